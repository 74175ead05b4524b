// trainyard-ps-sgd: the parameter-server training example (docs/examples.md).
// One binary for both roles: TF_CONFIG (or TRAINYARD_ROLE) says whether this
// task is a ps or a worker. Exit code 0 when a worker finished training, 1 on
// a training error, 2 on bad flags or environment.
#include <cstdio>
#include <cstdlib>

#include "CLI/CLI.hpp"
#include "ps_sgd/epoch_sync.h"
#include "ps_sgd/ps_server.h"
#include "ps_sgd/task_config.h"
#include "ps_sgd/worker.h"

namespace {

using trainyard::examples::TrainOptions;

// EPOCH_SLEEP_MS from the environment, when the flag was not given.
int64_t EpochSleepFromEnv() {
  const char* v = std::getenv("EPOCH_SLEEP_MS");
  return v == nullptr ? 0 : std::atoll(v);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // one line per epoch reaches the log at once
  CLI::App app{"Data-parallel SGD with parameter servers (a Trainyard example)", "trainyard-ps-sgd"};
  TrainOptions o;
  std::string ps_flag;
  int64_t sleep_ms = EpochSleepFromEnv();
  int64_t barrier_timeout_s = 600;
  app.add_option("--epochs", o.epochs, "epochs to train")->check(CLI::Range(1, 100000));
  app.add_option("--batch", o.batch, "mini-batch size")->check(CLI::Range(1, 1 << 30));
  app.add_option("--lr", o.learning_rate, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--samples", o.data.samples, "samples in the synthetic data set")->check(CLI::Range(1, 10000000));
  app.add_option("--features", o.data.features, "features per sample")->check(CLI::Range(1, 100000));
  app.add_option("--seed", o.data.seed, "seed of the synthetic data set");
  app.add_option("--epoch-sleep-ms", sleep_ms, "extra milliseconds per epoch (default: $EPOCH_SLEEP_MS)")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));
  app.add_option("--barrier-timeout-s", barrier_timeout_s, "longest wait at an epoch barrier")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  app.add_option("--ps", ps_flag, "host:port of each ps, comma-separated (default: TF_CONFIG)");
  CLI11_PARSE(app, argc, argv);
  o.epoch_sleep = absl::Milliseconds(sleep_ms);
  o.barrier_timeout = absl::Seconds(barrier_timeout_s);

  auto task = trainyard::examples::TaskConfigFromEnv(trainyard::examples::ProcessEnvironment(), ps_flag);
  if (!task.ok()) {
    std::fprintf(stderr, "trainyard-ps-sgd: %s\n", std::string(task.status().message()).c_str());
    return 2;
  }
  absl::Status s;
  if (task->is_ps()) {
    s = trainyard::examples::RunParameterServer(*task, trainyard::examples::ParameterCount(o.data.features));
  } else {
    auto sync = task->job_master.empty() ? trainyard::examples::MakeNoSync()
                                         : trainyard::examples::MakeJobMasterSync(o.barrier_timeout);
    s = trainyard::examples::RunWorker(*task, o, sync.get());
  }
  if (!s.ok()) {
    std::fprintf(stderr, "trainyard-ps-sgd (%s): %s\n", task->task_name.c_str(), s.ToString().c_str());
    return 1;
  }
  return 0;
}
