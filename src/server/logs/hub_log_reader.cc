// HubLogReader (see hub_log_reader.h).
#include "server/logs/hub_log_reader.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace trainyard::server {

// What the hub holds of the reader: it may call Ready after the reader is
// gone (the shared pointer keeps this alive), and never under its own lock.
struct HubLogReader::Sink final : LogSink {
  void Ready() override {
    absl::MutexLock lock(&mu);
    ready = true;
    cv.Signal();
  }
  absl::Mutex mu;
  absl::CondVar cv;
  bool ready ABSL_GUARDED_BY(mu) = false;
};

std::string LogStreamUser(const security::Principal& who, const std::string& job_owner) {
  return who.anonymous ? job_owner : who.user;
}

absl::StatusOr<http::LogReaderPtr> HubLogReader::Open(LogHub* hub, const v1::LogsRequest& request,
                                                      const std::string& user) {
  auto sink = std::make_shared<Sink>();
  absl::StatusOr<uint64_t> id = hub->Open(request, sink, user);
  if (!id.ok()) return id.status();
  std::unique_ptr<HubLogReader> r(new HubLogReader(hub, std::move(sink)));
  r->id_ = *id;
  return r;
}

HubLogReader::~HubLogReader() {
  if (taken_) hub_->Written(id_);
  hub_->Close(id_);
}

http::LogRead HubLogReader::Next(absl::Time deadline) {
  if (taken_) {
    hub_->Written(id_);
    taken_ = false;
  }
  while (true) {
    {
      // Cleared before asking: a Ready that comes after a kNothing below is
      // then seen by the wait; one that came earlier only costs a loop.
      absl::MutexLock lock(&sink_->mu);
      sink_->ready = false;
    }
    LogNext next = hub_->Next(id_);
    http::LogRead out;
    if (next.kind == LogNext::Kind::kChunk) {
      taken_ = true;
      out.kind = http::LogRead::Kind::kChunk;
      out.chunk = std::move(next.chunk);
      return out;
    }
    if (next.kind == LogNext::Kind::kEnd) {
      out.kind = http::LogRead::Kind::kEnd;
      out.end = next.end;
      return out;
    }
    absl::MutexLock lock(&sink_->mu);
    while (!sink_->ready) {
      if (sink_->cv.WaitWithDeadline(&sink_->mu, deadline)) return out;  // kWaiting
    }
  }
}

}  // namespace trainyard::server
