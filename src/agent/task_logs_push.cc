// The pusher's thread waits in poll() on its inotify descriptor and an
// eventfd that Subscribe, Ack and Cancel ring; it reads files and calls the
// sink without the lock, so acknowledgements are never held up by a send.
#include "agent/task_logs_push.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr uint32_t kWatchMask = IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO;

}  // namespace

LogPusher::LogPusher(const TaskLogs* logs, LogPusherOptions options, Sink sink)
    : logs_(logs), options_(options), sink_(std::move(sink)) {
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0) {
    Log(LogLevel::kWarning, "agent", "inotify is not available (%s); followed logs are looked at every %s",
        strerror(errno), absl::FormatDuration(options_.fallback_poll));
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
}

LogPusher::~LogPusher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  thread_.join();
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::Status LogPusher::Subscribe(LogSubscription spec) {
  if (absl::Status st = spec.key.Validate(); !st.ok()) return st;
  if (spec.chunk_bytes <= 0 || spec.window_bytes <= 0 || spec.offset < 0) {
    return absl::InvalidArgumentError("log subscription: max_bytes, window_bytes and offset must be positive");
  }
  spec.chunk_bytes = std::min(spec.chunk_bytes, options_.max_chunk_bytes);
  spec.window_bytes = std::max(spec.window_bytes, spec.chunk_bytes);
  if (spec.attempt < 0) {
    absl::StatusOr<std::vector<int>> attempts = logs_->Attempts(spec.key);
    if (!attempts.ok()) return attempts.status();
    spec.attempt = attempts->back();
  }
  // The directory appears with the task's first launch here; following a
  // task whose launch is on its way, watch it from now on.
  if (spec.follow) (void)logs_->Prepare(spec.key);  // a failure leaves it unwatched (polled)
  absl::MutexLock lock(&mu_);
  if (subs_.count(spec.id) == 0 && subs_.size() >= options_.max_subscriptions) {
    return absl::ResourceExhaustedError(absl::StrCat("this agent serves ", subs_.size(),
                                                     " log subscriptions, its limit (max_log_subscriptions)"));
  }
  RemoveLocked(spec.id);
  Sub& sub = subs_[spec.id];
  sub.spec = std::move(spec);
  sub.sent = sub.acked = sub.spec.offset;
  sub.placed = !sub.spec.seek();
  sub.generation = next_generation_++;
  if (sub.spec.follow) WatchLocked(sub.spec.id, sub);
  due_.insert(sub.spec.id);
  Wake();
  return absl::OkStatus();
}

void LogPusher::Ack(uint64_t id, int64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = subs_.find(id);
  if (it == subs_.end()) return;
  it->second.acked = std::clamp(offset, it->second.acked, it->second.sent);
  due_.insert(id);
  Wake();
}

void LogPusher::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  RemoveLocked(id);
}

void LogPusher::CancelAll() {
  absl::MutexLock lock(&mu_);
  while (!subs_.empty()) RemoveLocked(subs_.begin()->first);
}

size_t LogPusher::subscriptions() const {
  absl::MutexLock lock(&mu_);
  return subs_.size();
}

void LogPusher::WatchLocked(uint64_t id, Sub& sub) {
  std::string dir = logs_->TaskDir(sub.spec.key);
  Watch& w = watches_[dir];
  if (w.wd < 0 && inotify_fd_ >= 0) {
    w.wd = inotify_add_watch(inotify_fd_, dir.c_str(), kWatchMask);
    if (w.wd >= 0) dir_of_[w.wd] = dir;
  }
  if (w.wd < 0) {
    watches_.erase(dir);
    unwatched_.insert(id);
    return;
  }
  w.subs.insert(id);
  sub.dir = dir;
}

void LogPusher::RemoveLocked(uint64_t id) {
  auto it = subs_.find(id);
  if (it == subs_.end()) return;
  unwatched_.erase(id);
  due_.erase(id);
  auto w = watches_.find(it->second.dir);
  if (w != watches_.end()) {
    w->second.subs.erase(id);
    if (w->second.subs.empty()) {
      inotify_rm_watch(inotify_fd_, w->second.wd);
      dir_of_.erase(w->second.wd);
      watches_.erase(w);
    }
  }
  subs_.erase(it);
}

void LogPusher::Wake() {
  uint64_t one = 1;
  // A full counter already wakes the thread; nothing is lost.
  if (write(wake_fd_, &one, sizeof one) < 0) return;
}

void LogPusher::Run() {
  for (;;) {
    int timeout_ms = -1;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (!unwatched_.empty()) timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(options_.fallback_poll));
    }
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
    int n = poll(fds, inotify_fd_ >= 0 ? 2 : 1, timeout_ms);
    uint64_t count;
    if (fds[0].revents & POLLIN) (void)!read(wake_fd_, &count, sizeof count);
    if (inotify_fd_ >= 0 && (fds[1].revents & POLLIN)) DrainEvents();
    std::vector<uint64_t> due;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (n == 0) due_.insert(unwatched_.begin(), unwatched_.end());
      due.assign(due_.begin(), due_.end());
      due_.clear();
    }
    for (uint64_t id : due) Pump(id);
  }
}

void LogPusher::DrainEvents() {
  alignas(inotify_event) char buf[16 << 10];
  for (;;) {
    ssize_t n = read(inotify_fd_, buf, sizeof buf);
    if (n <= 0) return;
    absl::MutexLock lock(&mu_);
    for (ssize_t at = 0; at < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {
        for (const auto& [id, sub] : subs_) due_.insert(id);
        continue;
      }
      auto dir = dir_of_.find(ev->wd);
      if (dir == dir_of_.end()) continue;
      auto w = watches_.find(dir->second);
      if (w == watches_.end()) continue;
      due_.insert(w->second.subs.begin(), w->second.subs.end());
      if (ev->mask & IN_IGNORED) {
        // The directory went away (or was unmounted): look at its logs on
        // the slow pass from now on.
        unwatched_.insert(w->second.subs.begin(), w->second.subs.end());
        for (uint64_t id : w->second.subs) subs_[id].dir.clear();
        dir_of_.erase(dir);
        watches_.erase(w);
      }
    }
  }
}

std::optional<std::pair<LogPiece, bool>> LogPusher::ReadPiece(const Sub& sub, int64_t want) const {
  const LogSubscription& s = sub.spec;
  LogPiece p{.id = s.id, .tag = s.tag, .attempt = s.attempt, .offset = sub.sent, .next_offset = sub.sent};
  absl::StatusOr<LogChunk> chunk =
      logs_->Read(s.key, {.attempt = s.attempt, .stream = s.stream, .offset = sub.sent, .limit = want});
  if (!chunk.ok()) {
    bool not_started = chunk.status().code() == absl::StatusCode::kNotFound;
    // An attempt's log appears when it starts; one that ended without a log
    // (the agent could not start it) has nothing to send.
    if (not_started && s.follow && !logs_->Ended(s.key, s.attempt)) {
      if (sub.start_told) return std::nullopt;
      return std::make_pair(std::move(p), false);  // a seek's start: the beginning, empty so far
    }
    if (not_started && s.follow) {
      p.eof = p.finished = true;
    } else {
      p.error = std::string(chunk.status().message());
    }
    return std::make_pair(std::move(p), true);
  }
  if (chunk->data.empty() && !chunk->complete && s.follow && sub.start_told) return std::nullopt;
  p.next_offset = chunk->next_offset;
  p.data = std::move(chunk->data);
  p.eof = chunk->at_end;
  p.finished = chunk->complete;
  bool last = p.finished || (!s.follow && p.eof);
  return std::make_pair(std::move(p), last);
}

bool LogPusher::Place(uint64_t id, Sub& sub) {
  const LogSubscription& s = sub.spec;
  absl::StatusOr<int64_t> start = logs_->StartOffset(s.key, s.attempt, s.stream, s.tail_lines, s.since_unix_nanos);
  // A followed attempt that has not started yet is placed when it writes;
  // any other error is the read's to report. A seek on it starts at its
  // beginning (nothing was written before it), said at once like any seek's
  // start.
  if (!start.ok() && s.follow && !logs_->Ended(s.key, s.attempt) && !s.seek()) return false;
  absl::MutexLock lock(&mu_);
  auto it = subs_.find(id);
  if (it == subs_.end() || it->second.generation != sub.generation) return false;
  it->second.placed = sub.placed = true;
  if (start.ok()) it->second.sent = it->second.acked = sub.sent = sub.acked = *start;
  it->second.start_told = sub.start_told = !s.seek();
  return true;
}

void LogPusher::Pump(uint64_t id) {
  // At most one window per pass, so one busy log does not starve the rest.
  for (;;) {
    Sub sub;
    int64_t want;
    {
      absl::MutexLock lock(&mu_);
      auto it = subs_.find(id);
      if (it == subs_.end()) return;
      sub = it->second;
      want = std::min(sub.spec.chunk_bytes, sub.spec.window_bytes - (sub.sent - sub.acked));
    }
    if (want <= 0) return;
    if (!sub.placed && !Place(id, sub)) return;
    std::optional<std::pair<LogPiece, bool>> piece = ReadPiece(sub, want);
    if (!piece) return;
    auto& [p, last] = *piece;
    {
      absl::MutexLock lock(&mu_);
      auto it = subs_.find(id);
      if (it == subs_.end() || it->second.generation != sub.generation) return;  // cancelled or replaced
      it->second.sent = p.error.empty() ? std::max(p.next_offset, it->second.sent) : it->second.sent;
      it->second.start_told = true;
      if (last) RemoveLocked(id);
    }
    if (!sink_(p)) {
      absl::MutexLock lock(&mu_);
      RemoveLocked(id);
      return;
    }
    if (last) return;
  }
}

}  // namespace trainyard::agent
