// `Exec`: one bidirectional reactor per stream, fed by the exec relay. Its
// first message names the task and the command and is authorized then (the
// job is not known before); later ones carry input, read one at a time
// while the relay has room for it. Responses are written one at a time as
// the relay has them; no thread waits for either.
#include <functional>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/client_service.h"
#include "server/logs/hub_log_reader.h"

namespace trainyard::server {
namespace {

class ExecReactor;

// What the relay holds of the stream; it outlives the reactor, so a Ready
// that races with the stream's end finds it detached instead of freed.
struct ExecStreamSink final : ExecSink {
  void Ready() override;
  std::mutex mu;
  ExecReactor* reactor = nullptr;  // guarded by mu; nullptr once done
};

class ExecReactor final : public grpc::ServerBidiReactor<v1::ExecRequest, v1::ExecResponse> {
 public:
  // `open` authorizes the first message and opens the session (the
  // relay's id), or says why not.
  using Opener = std::function<absl::StatusOr<uint64_t>(const v1::ExecStart&, ExecSinkPtr)>;

  ExecReactor(ExecRelay* relay, Opener open, std::unique_ptr<security::CredentialCheck> credential)
      : relay_(relay),
        open_(std::move(open)),
        credential_(std::move(credential)),
        sink_(std::make_shared<ExecStreamSink>()) {
    sink_->reactor = this;
    reading_ = true;
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard<std::mutex> lock(sink_->mu);
    reading_ = false;
    if (finished_) return;
    if (cancelled_) {
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    if (!ok) {
      // The client has sent all it will (or gone: OnCancel finishes).
      read_done_ = true;
      if (id_ == 0) FinishLocked(grpc::Status(grpc::INVALID_ARGUMENT, "the stream ended before its start message"));
      return;
    }
    if (id_ == 0) {
      if (!in_.has_start()) {
        FinishLocked(grpc::Status(grpc::INVALID_ARGUMENT, "start: the first message must name the task and command"));
        return;
      }
      // Open may call Ready at once: it takes sink_->mu, so not under it.
      v1::ExecStart start = in_.start();
      sink_->mu.unlock();
      absl::StatusOr<uint64_t> id = open_(start, sink_);
      sink_->mu.lock();
      if (!id.ok()) {
        FinishLocked(ToGrpc(id.status()));
        return;
      }
      id_ = *id;
    } else {
      // Input runs code as the job's account: a token revoked since the
      // stream began takes nothing more.
      if (!credential_->Valid(absl::Now())) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                  "the token this stream began with is no longer valid"));
        return;
      }
      relay_->Input(id_, in_);
    }
    PumpLocked();
  }

  // Under sink_->mu.
  void PumpLocked() {
    if (finished_ || id_ == 0) return;
    if (cancelled_ && !writing_) {
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    if (!writing_) {
      ExecNext next = relay_->Next(id_);
      if (next.kind != ExecNext::Kind::kNothing && !credential_->Valid(absl::Now())) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                  "the token this stream began with is no longer valid"));
        return;
      }
      if (next.kind == ExecNext::Kind::kResponse) {
        out_ = std::move(next.response);
        writing_ = true;
        StartWrite(&out_);
      } else if (next.kind == ExecNext::Kind::kEnd) {
        FinishLocked(ToGrpc(next.end));
        return;
      }
    }
    if (!reading_ && !read_done_ && relay_->CanRead(id_)) {
      reading_ = true;
      StartRead(&in_);
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(sink_->mu);
    writing_ = false;
    if (id_ != 0) relay_->Written(id_);
    if (!ok || cancelled_) {
      FinishLocked(grpc::Status::CANCELLED);  // the client has gone
      return;
    }
    PumpLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(sink_->mu);
    cancelled_ = true;
    // A write in flight may still end well: OnWriteDone finishes then.
    if (!writing_) FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(sink_->mu);
      sink_->reactor = nullptr;
    }
    if (id_ != 0) relay_->Close(id_);
    delete this;
  }

 private:
  void FinishLocked(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    Finish(std::move(status));
  }

  ExecRelay* const relay_;
  const Opener open_;
  const std::unique_ptr<security::CredentialCheck> credential_;
  const std::shared_ptr<ExecStreamSink> sink_;
  uint64_t id_ = 0;
  v1::ExecRequest in_;
  v1::ExecResponse out_;
  bool reading_ = false;
  bool read_done_ = false;
  bool writing_ = false;
  bool finished_ = false;
  bool cancelled_ = false;  // OnCancel came
};

void ExecStreamSink::Ready() {
  std::lock_guard<std::mutex> lock(mu);
  if (reactor) reactor->PumpLocked();
}

}  // namespace

grpc::ServerBidiReactor<v1::ExecRequest, v1::ExecResponse>* ClientService::Exec(grpc::CallbackServerContext* ctx) {
  auto open = [this, ctx](const v1::ExecStart& start, ExecSinkPtr sink) -> absl::StatusOr<uint64_t> {
    if (exec_ == nullptr) return absl::UnimplementedError("this server runs no commands in tasks");
    absl::StatusOr<std::shared_ptr<const v1::JobView>> job = MayRunInJob(ctx, start.job());
    if (!job.ok()) return job.status();
    absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kLogs);
    if (!who.ok()) return who.status();
    // The job authorized, not one of its name submitted since.
    return exec_->Open(start, std::move(sink), LogStreamUser(*who, (*job)->user()), (*job)->id());
  };
  return new ExecReactor(exec_, std::move(open), StreamCredential(ctx));
}

}  // namespace trainyard::server
