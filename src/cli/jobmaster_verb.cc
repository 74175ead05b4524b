// `trainyard jobmaster`: runs the master of one job in the foreground. Prints
// HOST:PORT on its first stdout line (the launcher passes it to the tasks as
// TRAINYARD_JOB_MASTER), serves the workers until the job ends (then lingers
// briefly so the last answers reach them) or until SIGINT / SIGTERM. Exit
// code: 0 when the job SUCCEEDED or the master was stopped, 1 when it FAILED,
// 2 on bad flags.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "api/task_env.h"
#include "cli/client.h"
#include "cli/stop_signals.h"
#include "cli/verbs.h"
#include "common/clock.h"
#include "common/logging.h"
#include "jobmaster/barrier_record.h"
#include "jobmaster/jobmaster_server.h"
#include "jobmaster/server_job_terminator.h"
#include "jobmaster/summary_reporter.h"

namespace trainyard::cli {
namespace {

struct JobmasterFlags {
  jobmaster::JobMasterConfig config;
  int64_t ping_interval_ms = 1000;
  int64_t response_wait_ms = 10000;
  int64_t barrier_timeout_ms = 600000;
  int64_t linger_ms = 1000;
  int attempt = 0;
  std::string barrier_record;
  std::string advertise_host;
  std::string server_address;
  std::string ca;  // the CA the server's certificate must be signed by
  std::string outcome_file;
  std::string log_level = "info";
};

// Prints the outcome and remembers whether the job failed (the exit code).
class OutcomeTerminator : public jobmaster::StreamJobTerminator {
 public:
  using StreamJobTerminator::StreamJobTerminator;
  void Terminate(const jobmaster::JobEnd& end) override {
    failed_ = end.outcome == jobmaster::JobOutcome::kFailed;
    StreamJobTerminator::Terminate(end);
  }
  // Read after the loop stopped.
  bool failed() const { return failed_; }

 private:
  bool failed_ = false;
};

std::string AdvertisedHost(const JobmasterFlags& f) {
  if (!f.advertise_host.empty()) return f.advertise_host;
  if (f.config.bind_address != "0.0.0.0") return f.config.bind_address;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "127.0.0.1";
  return host;
}

// How many barriers the job passed before this master: none for its first
// attempt (whose record, if any, is an old job's); for a restart, what the
// record says, else unknown (the master learns it from its workers).
int BarrierCount(JobmasterFlags& f) {
  f.config.barrier_record = f.barrier_record;
  if (f.attempt == 0) {
    if (!f.barrier_record.empty()) {
      absl::Status s = jobmaster::WriteBarrierRecord(f.barrier_record, 0);
      if (!s.ok()) Log(LogLevel::kWarning, "jobmaster", "%s", s.message());
    }
    return kExitOk;
  }
  absl::StatusOr<int64_t> passed = f.barrier_record.empty()
                                       ? absl::NotFoundError("no --barrier-record")
                                       : jobmaster::ReadBarrierRecord(f.barrier_record);
  if (passed.ok()) {
    f.config.passed_barriers = *passed;
    Log(LogLevel::kInfo, "jobmaster", "restarted: the job has passed %d barriers (%s)", *passed,
        f.barrier_record);
    return kExitOk;
  }
  if (absl::IsInvalidArgument(passed.status())) {
    Log(LogLevel::kWarning, "jobmaster", "%s", passed.status().message());
  }
  f.config.learn_barriers = true;
  return kExitOk;
}

// Serves until the job ended (plus the linger) or a signal arrived.
void Serve(jobmaster::JobMasterServer* server, absl::Duration linger) {
  BlockStopSignals();
  std::thread waiter([&] {
    WaitForStopSignal();
    server->Stop();
  });
  absl::Status s = server->Run(linger);
  if (!s.ok()) Log(LogLevel::kError, "jobmaster", "event loop stopped: %s", s.message());
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter if no signal came
  waiter.join();
}

int RunJobmaster(JobmasterFlags& f) {
  LogLevel level;
  if (!ParseLogLevel(f.log_level, &level)) {
    std::cerr << "trainyard jobmaster: --log-level '" << f.log_level
              << "' is not one of debug, info, warning, error\n";
    return kExitUsage;
  }
  SetLogLevel(level);
  // The secret the server gave the job's tasks; never printed or logged.
  if (const char* secret = std::getenv(kJobSecretEnv)) f.config.job_secret = secret;
  f.config.ping_interval = absl::Milliseconds(f.ping_interval_ms);
  f.config.response_wait = absl::Milliseconds(f.response_wait_ms);
  f.config.barrier_timeout = absl::Milliseconds(f.barrier_timeout_ms);
  if (int rc = BarrierCount(f); rc != kExitOk) return rc;
  OutcomeTerminator terminator(&std::cout, f.outcome_file);
  // With --server the outcome goes to the Trainyard server, which then stops
  // the job's other tasks; it is printed too.
  std::unique_ptr<jobmaster::ServerJobTerminator> to_server;
  // The job's credential, which the server gave this task (docs/security.md),
  // and the CA the server is verified with: --ca, else the agent's
  // TRAINYARD_CA_FILE.
  const char* job_token = std::getenv(kJobTokenEnv);
  if (job_token != nullptr) f.config.order_key = job_token;  // the key of the server's pushed orders
  if (!f.server_address.empty() && !f.ca.empty()) SetCaFlag(f.ca);
  const jobmaster::ReportCredentials credentials{.job_token = job_token ? job_token : "",
                                                 .server_ca_pem = f.server_address.empty() ? "" : ServerCaPem()};
  if (!f.server_address.empty()) {
    to_server = std::make_unique<jobmaster::ServerJobTerminator>(f.server_address, &terminator, credentials);
  }
  RealClock clock;
  jobmaster::JobTerminator* end = to_server ? static_cast<jobmaster::JobTerminator*>(to_server.get()) : &terminator;
  auto server = jobmaster::JobMasterServer::Create(f.config, end, &clock);
  if (!server.ok()) {
    std::cerr << "trainyard jobmaster: " << server.status().message() << "\n";
    return absl::IsInvalidArgument(server.status()) ? kExitUsage : kExitFailure;
  }
  std::cout << AdvertisedHost(f) << ":" << (*server)->port() << std::endl;
  Log(LogLevel::kInfo, "jobmaster", "job %s: waiting for %d workers on port %d",
      f.config.job_name, f.config.num_workers, (*server)->port());
  // Its figures for the server's /metrics (summary_reporter.h). Its thread
  // (and gRPC's) start with SIGINT and SIGTERM blocked, as Serve blocks them
  // here: else one of them could take the signal meant for Serve's sigwait.
  std::unique_ptr<jobmaster::SummaryReporter> figures;
  if (!f.server_address.empty()) {
    BlockStopSignals();
    figures = std::make_unique<jobmaster::SummaryReporter>(f.server_address, credentials, server->get(),
                                                           f.config.job_name);
    figures->Start();
  }
  Serve(server->get(), absl::Milliseconds(f.linger_ms));
  if (figures) figures->Finish();
  if (to_server && !to_server->WaitDelivered(10)) {
    Log(LogLevel::kWarning, "jobmaster", "the server at %s did not take the outcome", f.server_address);
  }
  return terminator.failed() ? kExitFailure : kExitOk;
}

}  // namespace

void RegisterJobmaster(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<JobmasterFlags>();
  auto* cmd = app.add_subcommand("jobmaster", "Run the master of one job");
  cmd->add_option("--job", f->config.job_name, "Job name")->required();
  cmd->add_option("--workers", f->config.num_workers, "Number of workers (ids 0..N-1)")
      ->required();
  cmd->add_option("--port", f->config.port, "Port to listen on; 0 = any free port")
      ->capture_default_str();
  cmd->add_option("--bind", f->config.bind_address,
                  "Address to listen on: IPv4, or a host name that resolves to one (the server "
                  "passes the node's address)")
      ->capture_default_str();
  cmd->add_option("--attempt", f->attempt,
                  "This master's restart count (TRAINYARD_RESTART_COUNT): a restarted master "
                  "learns the job's barrier count from its workers")
      ->capture_default_str();
  cmd->add_option("--advertise-host", f->advertise_host,
                  "Host printed for TRAINYARD_JOB_MASTER (default: the bind address, or this "
                  "host's name when bound to 0.0.0.0)");
  cmd->add_option("--ping-interval-ms", f->ping_interval_ms, "Interval of worker pings")
      ->capture_default_str();
  cmd->add_option("--ping-misses", f->config.ping_misses,
                  "Missed pings after which a worker is ERROR")
      ->capture_default_str();
  cmd->add_option("--response-wait-ms", f->response_wait_ms,
                  "Default wait of an all-joined worker list")
      ->capture_default_str();
  cmd->add_option("--barrier-timeout-ms", f->barrier_timeout_ms, "Default barrier timeout")
      ->capture_default_str();
  cmd->add_option("--max-restarts", f->config.max_restarts,
                  "Restarts a worker may use before its ERROR fails the job")
      ->capture_default_str();
  cmd->add_option("--barrier-record", f->barrier_record,
                  "File recording how many barriers the job passed, read by a restarted master "
                  "(--attempt > 0) so it refuses generations past them");
  cmd->add_option("--server", f->server_address,
                  "Trainyard server to report the outcome, checkpoints and figures to; or every server of one etcd "
                  "store, comma-separated IP:port (reports go to whichever leads)");
  cmd->add_option("--ca", f->ca,
                  "the CA certificate the server's must be signed by (default $TRAINYARD_CA_FILE, which the agent "
                  "sets; none: plaintext)");
  cmd->add_option("--outcome-file", f->outcome_file, "Also write the job's outcome line here");
  cmd->add_option("--linger-ms", f->linger_ms, "Time served after the job ended")
      ->capture_default_str();
  cmd->add_option("--log-level", f->log_level, "debug, info, warning or error")
      ->capture_default_str();
  cmd->callback([f, exit_code] { *exit_code = RunJobmaster(*f); });
}

}  // namespace trainyard::cli
