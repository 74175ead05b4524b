// `trainyard worker state|list|barrier|checkpoint-requested|checkpoint-done`:
// the job master from a shell script
// inside a task. Each command is its own short-lived process: it reads
// TRAINYARD_JOB_MASTER and TRAINYARD_WORKER_ID, ATTACHes to its worker (or
// registers it with STARTING, without pings, when the worker has not
// registered yet), makes one request and exits; a barrier whose master went
// away is entered again once the master is back. Exit codes: 0 done; 1 the
// master refused or the barrier failed; 2 bad command line or environment;
// 3 the master is unreachable or went away (and for a barrier, did not come
// back in time); 4 timed out; 5 (checkpoint-requested) no checkpoint is
// requested.
#include <algorithm>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "cli/verbs.h"
#include "jobmaster/client/frame_connection.h"
#include "jobmaster/client/job_master_client.h"
#include "jobmaster/master_state.h"
#include "nlohmann/json.hpp"

namespace trainyard::cli {
namespace {

namespace pb = ::trainyard::v1;
using jobmaster::FrameConnection;

constexpr int kExitTimeout = 4;
constexpr int kExitNoCheckpoint = 5;
constexpr absl::Duration kConnectWait = absl::Seconds(10);
constexpr absl::Duration kReplyGrace = absl::Seconds(5);
// How long a barrier whose master went away keeps trying to enter it again
// when --timeout does not bound it (the agent restarts a master in well under
// that).
constexpr absl::Duration kReconnectWindow = absl::Seconds(60);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

struct WorkerFlags {
  std::string state;
  std::string reason;
  bool all_joined = false;
  double timeout_s = 0;
  int64_t generation = -1;  // barrier: -1 = whichever is open
  int64_t step = -1;        // checkpoint-done
  int64_t order = 0;        // checkpoint-done: 0 = the open order
  std::string output = "table";
};

int Fail(std::string_view verb, const absl::Status& s) {
  std::cerr << "trainyard worker " << verb << ": " << s.message() << "\n";
  switch (s.code()) {
    case absl::StatusCode::kUnavailable: return kExitUnavailable;
    case absl::StatusCode::kDeadlineExceeded: return kExitTimeout;
    default: return kExitFailure;
  }
}

// Connects and speaks for this task's worker: ATTACH, or STARTING when the
// worker has not registered yet (as after the master restarted). Connection
// refusals are retried until `deadline`.
absl::StatusOr<std::unique_ptr<FrameConnection>> ConnectAsWorker(
    const jobmaster::JobMasterClientOptions& options, absl::Time deadline) {
  auto conn = FrameConnection::Connect(jobmaster::CurrentMasterAddress(options), deadline);
  if (!conn.ok()) return conn.status();
  pb::JobMasterRequest attach;
  attach.set_request_id(1);
  attach.mutable_attach()->set_worker_id(options.info.worker_id());
  attach.mutable_attach()->set_job_secret(options.job_secret);
  absl::StatusOr<pb::JobMasterResponse> r = (*conn)->Call(attach, deadline);
  if (absl::IsNotFound(r.status())) {
    pb::JobMasterRequest start;
    start.set_request_id(2);
    *start.mutable_starting()->mutable_info() = options.info;
    start.mutable_starting()->set_restart_count(options.restart_count);
    start.mutable_starting()->set_job_secret(options.job_secret);
    r = (*conn)->Call(start, deadline);
  }
  if (!r.ok()) return r.status();
  return conn;
}

absl::Time ReplyDeadline(double timeout_s) {
  if (timeout_s <= 0) return absl::InfiniteFuture();
  return absl::Now() + absl::Seconds(timeout_s) + kReplyGrace;
}

// The worker's options from the environment; kExitOk or the exit code.
int LoadOptions(std::string_view verb, jobmaster::JobMasterClientOptions* out) {
  auto options = jobmaster::ClientOptionsFromEnvironment();
  if (!options.ok()) {
    std::cerr << "trainyard worker " << verb << ": " << options.status().message() << "\n";
    return kExitUsage;
  }
  if (options->info.worker_id() < 0) {
    std::cerr << "trainyard worker " << verb
              << ": TRAINYARD_WORKER_ID is not set: it names the worker this task speaks for\n";
    return kExitUsage;
  }
  *out = *std::move(options);
  return kExitOk;
}

// Connects as the worker and makes one request.
absl::StatusOr<pb::JobMasterResponse> CallAsWorker(
    const jobmaster::JobMasterClientOptions& options, pb::JobMasterRequest request,
    absl::Time connect_deadline, absl::Time deadline) {
  auto conn = ConnectAsWorker(options, connect_deadline);
  if (!conn.ok()) return conn.status();
  request.set_request_id(3);
  return (*conn)->Call(request, deadline);
}

// Runs `verb` against the master: environment, connection, one request.
int RunVerb(std::string_view verb, pb::JobMasterRequest request, absl::Time deadline,
            pb::JobMasterResponse* response) {
  jobmaster::JobMasterClientOptions options;
  if (int rc = LoadOptions(verb, &options); rc != kExitOk) return rc;
  absl::StatusOr<pb::JobMasterResponse> r =
      CallAsWorker(options, std::move(request), absl::Now() + kConnectWait, deadline);
  if (!r.ok()) return Fail(verb, r.status());
  *response = *std::move(r);
  return kExitOk;
}

int RunState(const WorkerFlags& f) {
  std::string name = absl::AsciiStrToUpper(f.state);
  pb::WorkerState state;
  if (!pb::WorkerState_Parse(name, &state) ||
      (state != pb::RUNNING && state != pb::COMPLETED && state != pb::ERROR)) {
    std::cerr << "trainyard worker state: '" << f.state
              << "' is not one of RUNNING, COMPLETED, ERROR\n";
    return kExitUsage;
  }
  pb::JobMasterRequest request;
  request.mutable_state_change()->set_state(state);
  request.mutable_state_change()->set_reason(f.reason);
  pb::JobMasterResponse response;
  int rc = RunVerb("state", request, absl::Now() + kConnectWait, &response);
  if (rc == kExitOk) {
    std::cout << "worker " << response.state().worker_id() << " "
              << jobmaster::WorkerStateName(response.state().state()) << "\n";
  }
  return rc;
}

void PrintWorkers(const pb::ListWorkersReply& list, const std::string& output) {
  if (output == "json") {
    nlohmann::json workers = nlohmann::json::array();
    for (const pb::WorkerStatus& w : list.workers()) {
      workers.push_back({{"worker_id", w.info().worker_id()},
                         {"state", jobmaster::WorkerStateName(w.state())},
                         {"ip", w.info().ip()},
                         {"port", w.info().port()},
                         {"role", w.info().role()},
                         {"index", w.info().index()},
                         {"restart_count", w.restart_count()},
                         {"connected", w.connected()},
                         {"in_barrier", w.in_barrier()},
                         {"reason", w.reason()}});
    }
    std::cout << nlohmann::json{{"num_workers", list.num_workers()},
                                {"barrier_generation", list.barrier_generation()},
                                {"workers", workers}}.dump(2)
              << "\n";
    return;
  }
  std::cout << absl::StrFormat("%-6s %-10s %-20s %-8s %-6s %-8s %s\n", "ID", "STATE", "ADDRESS",
                               "ROLE", "INDEX", "RESTARTS", "REASON");
  for (const pb::WorkerStatus& w : list.workers()) {
    std::cout << absl::StrFormat("%-6d %-10s %-20s %-8s %-6d %-8d %s\n", w.info().worker_id(),
                                 jobmaster::WorkerStateName(w.state()),
                                 absl::StrFormat("%s:%d", w.info().ip(), w.info().port()),
                                 w.info().role(), w.info().index(), w.restart_count(), w.reason());
  }
}

int RunList(const WorkerFlags& f) {
  if (f.output != "table" && f.output != "json") {
    std::cerr << "trainyard worker list: --output '" << f.output << "' is not table or json\n";
    return kExitUsage;
  }
  pb::JobMasterRequest request;
  request.mutable_list_workers()->set_mode(f.all_joined ? pb::RESPONSE_AFTER_ALL_JOINED
                                                        : pb::IMMEDIATE);
  request.mutable_list_workers()->set_timeout_ms(static_cast<int64_t>(f.timeout_s * 1000));
  absl::Time deadline = f.all_joined ? ReplyDeadline(f.timeout_s) : absl::Now() + kConnectWait;
  pb::JobMasterResponse response;
  int rc = RunVerb("list", request, deadline, &response);
  if (rc == kExitOk) PrintWorkers(response.workers(), f.output);
  return rc;
}

// The barrier request: the master's wait left before `master_deadline`, and
// the generation when the script gave one.
pb::JobMasterRequest BarrierRequest(const WorkerFlags& f, absl::Time master_deadline) {
  pb::JobMasterRequest request;
  request.mutable_barrier();  // the body, even when it carries no field
  if (master_deadline != absl::InfiniteFuture()) {
    request.mutable_barrier()->set_timeout_ms(
        std::max<int64_t>(1, absl::ToInt64Milliseconds(master_deadline - absl::Now())));
  }
  if (f.generation >= 0) request.mutable_barrier()->set_generation(f.generation);
  return request;
}

// Enters the barrier; when the master goes away meanwhile (it crashed and is
// being restarted), reconnects, registers again if the new master does not
// know the worker, and enters the same barrier again, within --timeout (or
// kReconnectWindow when there is none).
int RunBarrier(const WorkerFlags& f) {
  if (f.generation < -1) {
    std::cerr << "trainyard worker barrier: --generation " << f.generation
              << " is negative: barriers count from 0\n";
    return kExitUsage;
  }
  jobmaster::JobMasterClientOptions options;
  if (int rc = LoadOptions("barrier", &options); rc != kExitOk) return rc;
  absl::Time master_deadline =
      f.timeout_s > 0 ? absl::Now() + absl::Seconds(f.timeout_s) : absl::InfiniteFuture();
  absl::Time give_up = absl::InfiniteFuture();  // set once the master went away
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    absl::Time connect_deadline = std::min(give_up, absl::Now() + kConnectWait);
    absl::StatusOr<pb::JobMasterResponse> r =
        CallAsWorker(options, BarrierRequest(f, master_deadline), connect_deadline,
                     master_deadline + kReplyGrace);
    if (r.ok()) {
      std::cout << "barrier " << r->barrier().generation() << " passed\n";
      return kExitOk;
    }
    if (!absl::IsUnavailable(r.status()) || absl::Now() >= give_up) return Fail("barrier", r.status());
    if (give_up == absl::InfiniteFuture()) {
      give_up = std::min(master_deadline, absl::Now() + kReconnectWindow);
    }
    std::cerr << "trainyard worker barrier: " << r.status().message()
              << "; entering the barrier again\n";
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(backoff));  // reconnection pacing
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

// Asks whether the job is ordered to checkpoint; by asking, the worker is
// one that checkpoints: the job is not stopped before it says it saved (or
// the order's deadline passed).
int RunCheckpointRequested() {
  pb::JobMasterRequest request;
  request.mutable_checkpoint_poll();
  pb::JobMasterResponse r;
  if (int rc = RunVerb("checkpoint-requested", std::move(request), absl::Now() + kConnectWait + kReplyGrace, &r);
      rc != kExitOk) {
    return rc;
  }
  const pb::CheckpointOrder& o = r.checkpoint();
  if (o.id() == 0) {
    std::cout << "no checkpoint is requested\n";
    return kExitNoCheckpoint;
  }
  absl::Time deadline = absl::FromUnixMillis(o.deadline_unix_ms());
  std::cout << "checkpoint " << o.id() << " requested: " << o.reason() << "; save by "
            << absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", deadline, absl::UTCTimeZone()) << " (in "
            << std::max<int64_t>(0, absl::ToInt64Seconds(deadline - absl::Now())) << " s)\n";
  return kExitOk;
}

int RunCheckpointDone(const WorkerFlags& f) {
  if (f.step < 0) {
    std::cerr << "trainyard worker checkpoint-done: STEP " << f.step
              << " is negative: give the training step the checkpoint holds\n";
    return kExitUsage;
  }
  pb::JobMasterRequest request;
  request.mutable_checkpoint_done()->set_id(f.order);
  request.mutable_checkpoint_done()->set_step(f.step);
  pb::JobMasterResponse r;
  if (int rc = RunVerb("checkpoint-done", std::move(request), absl::Now() + kConnectWait + kReplyGrace, &r);
      rc != kExitOk) {
    return rc;
  }
  std::cout << "checkpoint " << r.checkpoint().id() << " saved at step " << f.step << "\n";
  return kExitOk;
}

}  // namespace

void RegisterWorker(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<WorkerFlags>();
  auto* cmd = app.add_subcommand(
      "worker", "Discovery and barriers from a shell script inside a task (reads "
                "TRAINYARD_JOB_MASTER and TRAINYARD_WORKER_ID)");
  cmd->require_subcommand(1);
  auto* state = cmd->add_subcommand("state", "Report this worker's state");
  state->add_option("STATE", f->state, "RUNNING, COMPLETED or ERROR")->required();
  state->add_option("--reason", f->reason, "Why (for ERROR)");
  state->callback([f, exit_code] { *exit_code = RunState(*f); });
  auto* list = cmd->add_subcommand("list", "List the job's workers");
  list->add_flag("--all-joined", f->all_joined, "Wait until every worker joined");
  list->add_option("--timeout", f->timeout_s, "Seconds to wait with --all-joined (0: the master's)");
  list->add_option("--output", f->output, "table or json")->capture_default_str();
  list->callback([f, exit_code] { *exit_code = RunList(*f); });
  auto* barrier = cmd->add_subcommand("barrier", "Wait until every worker reaches the barrier");
  barrier->add_option("--timeout", f->timeout_s, "Seconds to wait (0: the master's default)");
  barrier->add_option("--generation", f->generation,
                      "Which barrier this is, counting from 0; with it a barrier retried after "
                      "the job master restarted cannot be taken for the next one");
  barrier->callback([f, exit_code] { *exit_code = RunBarrier(*f); });
  auto* requested = cmd->add_subcommand(
      "checkpoint-requested",
      "Exit 0 when the job is ordered to checkpoint (a preemption, a time limit), 5 when not; asking marks "
      "this worker as one that checkpoints: the job waits for its checkpoint-done until the order's deadline");
  requested->callback([exit_code] { *exit_code = RunCheckpointRequested(); });
  auto* done = cmd->add_subcommand("checkpoint-done", "Report that this worker saved its checkpoint at STEP");
  done->add_option("STEP", f->step, "The training step the checkpoint holds")->required();
  done->add_option("--order", f->order, "The order it answers (0: the open one)");
  done->callback([f, exit_code] { *exit_code = RunCheckpointDone(*f); });
}

}  // namespace trainyard::cli
