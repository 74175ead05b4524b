// End-to-end tests of the parameter-server example: ps and worker processes
// on loopback with the environment Trainyard gives them (TF_CONFIG, the
// TRAINYARD_* variables), with and without a real job master, including a
// worker killed with SIGKILL mid-training and restarted from the checkpoint.
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobmaster/test_master.h"
#include "ps_sgd/checkpoint.h"
#include "test_process.h"

namespace trainyard::examples {
namespace {

// The loss every run must reach by its last epoch (docs/examples.md).
constexpr double kSgdStatedLoss = 0.34;
constexpr int kEpochs = 12;
const absl::Duration kRunTimeout = absl::Seconds(60);

class PsSgdJob {
 public:
  PsSgdJob(int workers, const std::string& job_master, int epoch_sleep_ms)
      : workers_(workers), job_master_(job_master), epoch_sleep_ms_(epoch_sleep_ms) {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("ps_sgd_test_", getpid(), "_", ++counter_);
    std::filesystem::create_directories(dir_ / "ckpt");
    for (int i = 0; i < 2; ++i) ps_.push_back(absl::StrCat("127.0.0.1:", PickFreePort()));
  }
  ~PsSgdJob() {
    procs_.clear();
    std::filesystem::remove_all(dir_);
  }

  std::string checkpoint_dir() const { return (dir_ / "ckpt").string(); }

  TestProcess* StartPs(int index) { return Start("ps", index, 0); }
  // `epoch_sleep_ms` -1 = the job's.
  TestProcess* StartWorker(int index, int restart_count = 0, int epoch_sleep_ms = -1) {
    return Start("worker", index, restart_count, epoch_sleep_ms);
  }

 private:
  TestProcess* Start(const std::string& role, int index, int restart_count, int epoch_sleep_ms = -1) {
    std::vector<std::string> workers;
    for (int i = 0; i < workers_; ++i) workers.push_back(absl::StrCat("127.0.0.1:", 30000 + i));
    std::string tf_config = absl::StrCat(R"({"cluster": {"ps": [")", absl::StrJoin(ps_, "\", \""),
                                         R"("], "worker": [")", absl::StrJoin(workers, "\", \""),
                                         R"("]}, "task": {"type": ")", role, R"(", "index": )", index, "}}");
    std::map<std::string, std::string> env = {
        {"TF_CONFIG", tf_config},
        {"TRAINYARD_JOB", "ps-sgd-test"},
        {"TRAINYARD_ROLE", role},
        {"TRAINYARD_INDEX", absl::StrCat(index)},
        {"TRAINYARD_WORKER_ID", absl::StrCat(index)},
        {"TRAINYARD_TASK_NAME", absl::StrCat("ps-sgd-test-", role, "-", index)},
        {"TRAINYARD_NUM_WORKERS", absl::StrCat(workers_)},
        {"TRAINYARD_CHECKPOINT_DIR", checkpoint_dir()},
        {"TRAINYARD_RESTART_COUNT", absl::StrCat(restart_count)},
        {"EPOCH_SLEEP_MS", absl::StrCat(epoch_sleep_ms < 0 ? epoch_sleep_ms_ : epoch_sleep_ms)},
    };
    if (role == "ps") env["TRAINYARD_PORTS"] = ps_[index].substr(ps_[index].find(':') + 1);
    if (!job_master_.empty() && role != "ps") env["TRAINYARD_JOB_MASTER"] = job_master_;
    std::string log = (dir_ / absl::StrCat(role, index, "-", restart_count, ".log")).string();
    procs_.push_back(std::make_unique<TestProcess>(
        std::vector<std::string>{TRAINYARD_PS_SGD_BIN, "--epochs", absl::StrCat(kEpochs)}, env, log));
    return procs_.back().get();
  }

  static inline int counter_ = 0;
  int workers_;
  std::string job_master_;
  int epoch_sleep_ms_;
  std::filesystem::path dir_;
  std::vector<std::string> ps_;
  std::vector<std::unique_ptr<TestProcess>> procs_;
};

// The worker's losses fall epoch after epoch (a little slack for the
// asynchronous pushes inside an epoch) and reach the stated loss.
void ExpectFalling(const std::string& output, int first_epoch) {
  if (first_epoch < 0) {  // the epoch after the checkpoint it resumed from, if any
    std::smatch m;
    first_epoch = std::regex_search(output, m, std::regex(R"(resumed from epoch (\d+))")) ? std::stoi(m[1]) + 1 : 1;
  }
  if (first_epoch > kEpochs) return;
  auto losses = EpochLosses(output);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kEpochs - first_epoch + 1)) << output;
  EXPECT_EQ(losses.front().first, first_epoch) << output;
  EXPECT_EQ(losses.back().first, kEpochs) << output;
  for (size_t i = 1; i < losses.size(); ++i) {
    EXPECT_LT(losses[i].second, losses[i - 1].second + 0.002) << "epoch " << losses[i].first << "\n" << output;
  }
}

void ExpectFallingToStatedLoss(const std::string& output, int first_epoch) {
  ExpectFalling(output, first_epoch);
  auto losses = EpochLosses(output);
  ASSERT_FALSE(losses.empty());
  EXPECT_LE(losses.back().second, kSgdStatedLoss) << output;
}

TEST(PsSgdTest, WorkersWithoutJobMasterTrainToTheStatedLoss) {
  PsSgdJob job(3, "", 0);
  job.StartPs(0);
  job.StartPs(1);
  std::vector<TestProcess*> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(job.StartWorker(i));
  for (TestProcess* w : workers) {
    ASSERT_EQ(w->WaitForExit(kRunTimeout), 0) << w->Output();
  }
  // Without barriers each worker trains at its own pace: one that ran ahead
  // reports a loss with fewer updates behind it (the worker that finished
  // last saw them all), and one that started late resumes after the chief's
  // checkpoint.
  ExpectFalling(workers[0]->Output(), 1);
  double best = 1.0;
  for (TestProcess* w : workers) {
    ExpectFalling(w->Output(), -1);
    auto losses = EpochLosses(w->Output());
    if (!losses.empty()) best = std::min(best, losses.back().second);
  }
  EXPECT_LE(best, kSgdStatedLoss);
  auto ckpt = ReadCheckpoint(job.checkpoint_dir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_TRUE(ckpt->has_value());
  EXPECT_EQ((*ckpt)->epoch, kEpochs);
  EXPECT_EQ((*ckpt)->params.size(), 51u);
}

TEST(PsSgdTest, WorkersLineUpAtTheJobMasterBarrierAndComplete) {
  jobmaster::JobMasterConfig config;
  config.job_name = "ps-sgd-test";
  config.num_workers = 2;
  jobmaster::TestMaster master(config);
  ASSERT_TRUE(master.status().ok()) << master.status();
  PsSgdJob job(2, absl::StrCat("127.0.0.1:", master.port()), 0);
  job.StartPs(0);
  job.StartPs(1);
  TestProcess* w0 = job.StartWorker(0);
  TestProcess* w1 = job.StartWorker(1);
  ASSERT_EQ(w0->WaitForExit(kRunTimeout), 0) << w0->Output();
  ASSERT_EQ(w1->WaitForExit(kRunTimeout), 0) << w1->Output();
  ExpectFallingToStatedLoss(w0->Output(), 1);
  ExpectFallingToStatedLoss(w1->Output(), 1);
  auto end = master.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, jobmaster::JobOutcome::kSucceeded) << end->reason;
}

TEST(PsSgdTest, KilledWorkerResumesFromTheCheckpointAndTheJobReachesTheLoss) {
  jobmaster::JobMasterConfig config;
  config.job_name = "ps-sgd-test";
  config.num_workers = 3;
  config.max_restarts = 3;
  jobmaster::TestMaster master(config);
  ASSERT_TRUE(master.status().ok()) << master.status();
  PsSgdJob job(3, absl::StrCat("127.0.0.1:", master.port()), 150);
  job.StartPs(0);
  job.StartPs(1);
  TestProcess* w0 = job.StartWorker(0);
  TestProcess* w1 = job.StartWorker(1);
  TestProcess* w2 = job.StartWorker(2);
  // After "epoch 3 loss" the worker is inside epoch 4 (training, then the
  // 150 ms sleep); epoch 3's barrier is behind every worker.
  ASSERT_TRUE(w1->WaitForOutput(R"(epoch 3 loss)", kRunTimeout)) << w1->Output();
  w1->Kill();
  TestProcess* again = job.StartWorker(1, /*restart_count=*/1);
  auto resumed = again->WaitForOutput(R"(resumed from epoch (\d+))", kRunTimeout);
  ASSERT_TRUE(resumed) << again->Output();
  int k = std::stoi((*resumed)[1]);
  EXPECT_GE(k, 3);
  EXPECT_LT(k, kEpochs);
  for (TestProcess* w : {w0, again, w2}) {
    ASSERT_EQ(w->WaitForExit(kRunTimeout), 0) << w->Output();
  }
  ExpectFallingToStatedLoss(w0->Output(), 1);
  ExpectFallingToStatedLoss(again->Output(), k + 1);
  auto end = master.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, jobmaster::JobOutcome::kSucceeded) << end->reason;
  EXPECT_EQ(master.Read<int>([](const jobmaster::MasterState& s) { return s.RestartsOf(1); }), 1);
}

// The chief is killed after its checkpoint of epoch 2; a fast worker is
// killed while it waits at a barrier for the slow ones. Each restarted task
// resumes where the others are, and the job still reaches the loss.
TEST(PsSgdTest, KilledChiefAndWorkerWaitingAtTheBarrierResume) {
  jobmaster::JobMasterConfig config;
  config.job_name = "ps-sgd-test";
  config.num_workers = 3;
  config.max_restarts = 3;
  jobmaster::TestMaster master(config);
  ASSERT_TRUE(master.status().ok()) << master.status();
  PsSgdJob job(3, absl::StrCat("127.0.0.1:", master.port()), 150);
  job.StartPs(0);
  job.StartPs(1);
  TestProcess* chief = job.StartWorker(0);
  TestProcess* w1 = job.StartWorker(1);
  TestProcess* fast = job.StartWorker(2, 0, /*epoch_sleep_ms=*/0);
  ASSERT_TRUE(chief->WaitForOutput(R"(epoch 2 loss)", kRunTimeout)) << chief->Output();
  chief->Kill();
  TestProcess* chief2 = job.StartWorker(0, 1);
  auto resumed = chief2->WaitForOutput(R"(resumed from epoch (\d+))", kRunTimeout);
  ASSERT_TRUE(resumed) << chief2->Output();
  EXPECT_GE(std::stoi((*resumed)[1]), 2);
  // The fast worker spends most of each epoch waiting for the others.
  ASSERT_TRUE(fast->WaitForOutput(R"(epoch 5 loss)", kRunTimeout)) << fast->Output();
  fast->Kill();
  TestProcess* fast2 = job.StartWorker(2, 1, 0);
  auto fast_resumed = fast2->WaitForOutput(R"(resumed from epoch (\d+))", kRunTimeout);
  ASSERT_TRUE(fast_resumed) << fast2->Output();
  EXPECT_GE(std::stoi((*fast_resumed)[1]), 5);
  for (TestProcess* w : {chief2, w1, fast2}) {
    ASSERT_EQ(w->WaitForExit(kRunTimeout), 0) << w->Output();
  }
  ExpectFallingToStatedLoss(w1->Output(), 1);
  ExpectFallingToStatedLoss(chief2->Output(), -1);
  auto end = master.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, jobmaster::JobOutcome::kSucceeded) << end->reason;
  auto ckpt = ReadCheckpoint(job.checkpoint_dir());
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->epoch, kEpochs);
}

TEST(PsSgdTest, RestartedParameterServerRestoresItsShard) {
  PsSgdJob job(1, "", 0);
  ASSERT_TRUE(WriteCheckpoint(job.checkpoint_dir(), Checkpoint{7, std::vector<double>(51, 0.25)}).ok());
  TestProcess* ps = job.StartPs(1);
  EXPECT_TRUE(ps->WaitForOutput(R"(resumed from epoch 7)", kRunTimeout)) << ps->Output();
  EXPECT_TRUE(ps->WaitForOutput(R"(ps 1 serving parameters \[25, 51\))", kRunTimeout)) << ps->Output();
}

TEST(PsSgdTest, TaskWithoutClusterSpecGetsAClearError) {
  TestProcess p({TRAINYARD_PS_SGD_BIN}, {{"TRAINYARD_ROLE", "worker"}},
                (std::filesystem::temp_directory_path() / absl::StrCat("ps_sgd_bad_", getpid(), ".log")).string());
  ASSERT_EQ(p.WaitForExit(kRunTimeout), 2);
  EXPECT_THAT(p.Output(), testing::HasSubstr("no parameter servers"));
  std::filesystem::remove(std::filesystem::temp_directory_path() / absl::StrCat("ps_sgd_bad_", getpid(), ".log"));
}

}  // namespace
}  // namespace trainyard::examples
