// `Logs`: one server-streaming reactor per stream, fed by the log hub. It
// writes one chunk at a time, asking the hub for the next when the last one
// is written or when the hub says one is there; between the two no thread
// waits for it.
#include <memory>
#include <mutex>

#include "absl/time/clock.h"
#include "api/log_lines.h"
#include "server/client_service.h"
#include "server/logs/hub_log_reader.h"

namespace trainyard::server {
namespace {

class LogsReactor;

// What the hub holds of the stream; it outlives the reactor, so a Ready that
// races with the stream's end finds it detached instead of freed.
struct LogsSink final : LogSink {
  void Ready() override;
  std::mutex mu;
  LogsReactor* reactor = nullptr;  // guarded by mu; nullptr once done
};

class LogsReactor final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  LogsReactor(grpc::CallbackServerContext* ctx, LogHub* hub, const v1::LogsRequest& req, const std::string& user,
              std::unique_ptr<security::CredentialCheck> credential)
      : ctx_(ctx), hub_(hub), credential_(std::move(credential)), sink_(std::make_shared<LogsSink>()) {
    sink_->reactor = this;
    // The hub calls Ready only after a Next of ours found nothing, so none
    // can come before the Pump below.
    absl::StatusOr<uint64_t> id = hub_->Open(req, sink_, user);
    std::lock_guard<std::mutex> lock(sink_->mu);
    if (!id.ok()) {
      FinishLocked(ToGrpc(id.status()));
      return;
    }
    id_ = *id;
    PumpLocked();
  }

  // Under sink_->mu.
  void PumpLocked() {
    if (finished_ || id_ == 0) return;
    LogNext next = hub_->Next(id_);
    if (next.kind != LogNext::Kind::kNothing && !credential_->Valid(absl::Now())) {
      // Its token was revoked: nothing more of the log.
      FinishLocked(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                "the token this stream began with is no longer valid"));
      return;
    }
    if (next.kind == LogNext::Kind::kChunk) {
      out_ = std::move(next.chunk);
      writing_ = true;
      StartWrite(&out_);
    } else if (next.kind == LogNext::Kind::kEnd) {
      FinishLocked(ToGrpc(next.end));
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(sink_->mu);
    writing_ = false;
    if (id_ != 0) hub_->Written(id_);
    if (!ok) {
      FinishLocked(grpc::Status::CANCELLED);  // the client has gone
      return;
    }
    PumpLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(sink_->mu);
    if (!writing_) FinishLocked(grpc::Status::CANCELLED);  // else OnWriteDone(false) finishes
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(sink_->mu);
      sink_->reactor = nullptr;
    }
    if (id_ != 0) hub_->Close(id_);
    delete this;
  }

 private:
  void FinishLocked(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    ctx_->AddTrailingMetadata(api::kLogsEndedByServerKey, "1");
    Finish(std::move(status));
  }

  grpc::CallbackServerContext* const ctx_;
  LogHub* const hub_;
  const std::unique_ptr<security::CredentialCheck> credential_;
  const std::shared_ptr<LogsSink> sink_;
  uint64_t id_ = 0;
  v1::LogChunk out_;  // the chunk being written
  bool writing_ = false;
  bool finished_ = false;
};

void LogsSink::Ready() {
  std::lock_guard<std::mutex> lock(mu);
  if (reactor) reactor->PumpLocked();
}

}  // namespace

namespace {
// A stream refused before it began (no credential, not the job's owner).
class RefusedLogs final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  RefusedLogs(grpc::CallbackServerContext* ctx, const absl::Status& why) {
    ctx->AddTrailingMetadata(api::kLogsEndedByServerKey, "1");
    Finish(ToGrpc(why));
  }
  void OnDone() override { delete this; }
};
}  // namespace

grpc::ServerWriteReactor<v1::LogChunk>* ClientService::Logs(grpc::CallbackServerContext* ctx,
                                                            const v1::LogsRequest* req) {
  if (absl::Status may = MayActOnJob(ctx, req->job(), "read the logs of"); !may.ok()) return new RefusedLogs(ctx, may);
  absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kLogs);
  if (!who.ok()) return new RefusedLogs(ctx, who.status());
  std::shared_ptr<const v1::JobView> job = manager_->JobSummary(req->job());
  return new LogsReactor(ctx, logs_, *req, LogStreamUser(*who, job ? job->user() : ""), StreamCredential(ctx));
}

}  // namespace trainyard::server
