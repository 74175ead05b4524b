// Reports a job's outcome to the server over gRPC.
#include "jobmaster/server_job_terminator.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/server_list_channel.h"
#include "common/task_env_names.h"
#include "grpcpp/grpcpp.h"
#include "proto/service.grpc.pb.h"

namespace trainyard::jobmaster {

struct ServerJobTerminator::State {
  absl::Mutex mu;
  absl::CondVar cv;  // delivered or stop changed
  bool delivered ABSL_GUARDED_BY(mu) = false;
  bool stop ABSL_GUARDED_BY(mu) = false;

  // Makes one report to the server at `address` (or whichever of a list
  // leads) until it is answered for good: success, or an answer another try
  // would get again (Retry). `call` makes one try through the stub with a
  // context that has a 5 s deadline and the credentials; after a server
  // that did not answer (a failover) the next try goes through a new
  // channel, which dials every server of a list at once. At most 50 tries,
  // 100 ms apart doubling to 2 s, each failure logged as "reporting WHAT to
  // ADDRESS: ...; retrying". Returns that answer, or nullopt when Stop came
  // first or the tries ran out.
  std::optional<grpc::Status> Report(
      const std::string& address, const ReportCredentials& credentials, const std::string& what,
      absl::FunctionRef<grpc::Status(v1::Trainyard::Stub*, grpc::ClientContext*)> call) ABSL_LOCKS_EXCLUDED(mu);

  // A thread that makes the report `what` with Report through its own stub
  // (`call` makes one try); a final refusal is logged as "server refused
  // REFUSED: ...".
  static std::thread ReportInBackground(
      std::shared_ptr<State> state, std::string address, ReportCredentials credentials, std::string what,
      std::string refused, std::function<grpc::Status(v1::Trainyard::Stub*, grpc::ClientContext*)> call);
};

ServerJobTerminator::ServerJobTerminator(std::string server_address, JobTerminator* also,
                                         ReportCredentials credentials)
    : address_(std::move(server_address)),
      also_(also),
      credentials_(std::move(credentials)),
      state_(std::make_shared<State>()) {}

ServerJobTerminator::~ServerJobTerminator() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stop = true;
    state_->cv.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  for (std::thread& t : failure_threads_) t.join();
}

std::string ReportedMasterAddress() {
  const char* node = std::getenv(kNodeAddressEnv);
  const char* ports = std::getenv(kPortsEnv);
  if (node == nullptr || ports == nullptr || *node == '\0' || *ports == '\0') return "";
  std::string first(ports);
  return absl::StrCat(node, ":", first.substr(0, first.find(',')));
}

std::shared_ptr<grpc::ChannelCredentials> ServerChannelCredentials(const ReportCredentials& c) {
  if (c.server_ca_pem.empty()) return grpc::InsecureChannelCredentials();
  return grpc::SslCredentials({.pem_root_certs = c.server_ca_pem});
}

std::shared_ptr<grpc::Channel> ServerChannel(const std::string& address, const ReportCredentials& c) {
  grpc::ChannelArguments args;
  std::string target = ServerListChannelTarget(address, &args);
  return grpc::CreateCustomChannel(target, ServerChannelCredentials(c), args);
}

void PresentCredentials(const ReportCredentials& c, grpc::ClientContext* ctx) {
  if (!c.job_token.empty()) ctx->AddMetadata("trainyard-job-token", c.job_token);
  if (!c.bearer.empty()) ctx->AddMetadata("authorization", "Bearer " + c.bearer);
}

namespace {
// False for an answer that another try would get again: no such job, a
// report the server refuses, a credential it does not take.
bool Retry(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::optional<grpc::Status> ServerJobTerminator::State::Report(
    const std::string& address, const ReportCredentials& credentials, const std::string& what,
    absl::FunctionRef<grpc::Status(v1::Trainyard::Stub*, grpc::ClientContext*)> call) {
  int delay_ms = 100;
  std::shared_ptr<grpc::Channel> channel = ServerChannel(address, credentials);
  std::unique_ptr<v1::Trainyard::Stub> stub = v1::Trainyard::NewStub(channel);
  for (int attempt = 0; attempt < 50; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    PresentCredentials(credentials, &ctx);
    grpc::Status st = call(stub.get(), &ctx);
    if (st.ok() || !Retry(st)) return st;
    if (ServerGone(st, channel.get())) {
      channel = ServerChannel(address, credentials);
      stub = v1::Trainyard::NewStub(channel);
    }
    Log(LogLevel::kWarning, "jobmaster", "reporting %s to %s: %s; retrying", what, address, st.error_message());
    absl::MutexLock lock(&mu);
    absl::Time retry_at = absl::Now() + absl::Milliseconds(delay_ms);
    while (!stop && !cv.WaitWithDeadline(&mu, retry_at)) {
    }
    if (stop) return std::nullopt;
    delay_ms = std::min(delay_ms * 2, 2000);
  }
  return std::nullopt;
}

std::thread ServerJobTerminator::State::ReportInBackground(
    std::shared_ptr<State> state, std::string address, ReportCredentials credentials, std::string what,
    std::string refused, std::function<grpc::Status(v1::Trainyard::Stub*, grpc::ClientContext*)> call) {
  return std::thread([state = std::move(state), address = std::move(address), credentials = std::move(credentials),
                      what = std::move(what), refused = std::move(refused), call = std::move(call)] {
    std::optional<grpc::Status> st = state->Report(address, credentials, what, call);
    if (st.has_value() && !st->ok()) {
      Log(LogLevel::kWarning, "jobmaster", "server refused %s: %s", refused, st->error_message());
    }
  });
}

bool ServerJobTerminator::WorkerFailed(const WorkerFailure& failure) {
  v1::WorkerFailureRequest req;
  req.set_job(failure.job);
  req.set_worker_id(failure.worker_id);
  req.set_attempt(failure.attempt);
  req.set_reason(failure.reason);
  req.set_master_address(ReportedMasterAddress());
  failure_threads_.push_back(State::ReportInBackground(
      state_, address_, credentials_, absl::StrCat("worker ", req.worker_id(), " failed"),
      absl::StrCat("the failure of worker ", req.worker_id()),
      [req](v1::Trainyard::Stub* stub, grpc::ClientContext* ctx) {
        v1::WorkerFailureResponse resp;
        return stub->ReportWorkerFailure(ctx, req, &resp);
      }));
  return true;
}

void ServerJobTerminator::Checkpointed(const CheckpointResult& result) {
  if (also_) also_->Checkpointed(result);
  v1::CheckpointReport req;
  req.set_job(result.job);
  req.set_order_id(result.order_id);
  req.set_saved(result.saved);
  req.set_step(result.step);
  req.set_workers(result.workers);
  req.set_master_address(ReportedMasterAddress());
  failure_threads_.push_back(State::ReportInBackground(
      state_, address_, credentials_, absl::StrCat("checkpoint order ", req.order_id()), "the checkpoint report",
      [req](v1::Trainyard::Stub* stub, grpc::ClientContext* ctx) {
        v1::CheckpointReportResponse resp;
        return stub->ReportCheckpoint(ctx, req, &resp);
      }));
}

void ServerJobTerminator::Terminate(const JobEnd& end) {
  if (also_) also_->Terminate(end);
  if (thread_.joinable()) return;  // told once per job
  v1::JobOutcomeRequest req;
  req.set_job(end.job);
  req.set_state(end.outcome == JobOutcome::kSucceeded ? v1::JOB_SUCCEEDED : v1::JOB_FAILED);
  req.set_reason(end.reason);
  req.set_master_address(ReportedMasterAddress());
  std::string address = address_;
  std::shared_ptr<State> state = state_;
  ReportCredentials credentials = credentials_;
  thread_ = std::thread([address, req, state, credentials] {
    std::optional<grpc::Status> st =
        state->Report(address, credentials, "the outcome", [&](v1::Trainyard::Stub* stub, grpc::ClientContext* ctx) {
          v1::JobOutcomeResponse resp;
          return stub->ReportJobOutcome(ctx, req, &resp);
        });
    if (!st.has_value()) return;
    if (!st->ok()) Log(LogLevel::kWarning, "jobmaster", "server refused the outcome: %s", st->error_message());
    absl::MutexLock lock(&state->mu);
    state->delivered = st->ok();
    state->cv.SignalAll();
  });
}

bool ServerJobTerminator::WaitDelivered(int seconds) {
  if (!thread_.joinable()) return true;  // nothing to deliver: the job did not end here
  absl::Time deadline = absl::Now() + absl::Seconds(seconds);
  absl::MutexLock lock(&state_->mu);
  while (!state_->delivered && !state_->cv.WaitWithDeadline(&state_->mu, deadline)) {
  }
  return state_->delivered;
}

}  // namespace trainyard::jobmaster
