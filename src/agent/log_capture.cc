// LogCapture and the keeper's read loop: async-signal-safe code that runs in
// the forked keeper (see log_capture.h).
#include "agent/log_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainyard::agent {
namespace {

constexpr int kStampBytes = 20;  // api::kLogStampBytes; api's writer allocates

void FormatStamp(int64_t nanos, char* out) {
  for (int i = kStampBytes - 2; i >= 0; --i) {
    out[i] = static_cast<char>('0' + nanos % 10);
    nanos /= 10;
  }
  out[kStampBytes - 1] = ' ';
}

int64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

int64_t LogSegmentBytes(int64_t max_bytes) {
  if (max_bytes <= 0) return 0;
  int64_t s = max_bytes / 8;
  return s < 1024 ? 1024 : s;
}

bool LogCapture::Open(int dir_fd, const char* name, int64_t max_bytes) {
  dir_fd_ = dir_fd;
  size_t n = strlen(name);
  if (n >= sizeof name_) return false;
  memcpy(name_, name, n + 1);
  max_bytes_ = max_bytes;
  segment_bytes_ = LogSegmentBytes(max_bytes);
  fd_ = openat(dir_fd_, name_, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return false;
  // A log appended to (an agent that started the attempt again) goes on.
  off_t end = lseek(fd_, 0, SEEK_END);
  size_ = end > 0 ? end : 0;
  segments_ = 1;
  bases_[0] = 0;
  return true;
}

const char* LogCapture::SegmentName(int64_t base) {
  size_t n = strlen(name_);
  memcpy(name_buf_, name_, n);
  if (base == 0) {
    name_buf_[n] = '\0';
    return name_buf_;
  }
  char digits[24];
  int d = 0;
  for (uint64_t v = static_cast<uint64_t>(base); v != 0; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
  name_buf_[n++] = '@';
  while (d > 0) name_buf_[n++] = digits[--d];
  name_buf_[n] = '\0';
  return name_buf_;
}

void LogCapture::Flush() {
  size_t at = 0;
  while (at < buffered_ && fd_ >= 0) {
    ssize_t w = write(fd_, buf_ + at, buffered_ - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;  // a full disk: what did not fit is lost, the task goes on
    at += static_cast<size_t>(w);
    size_ += w;
  }
  buffered_ = 0;
}

void LogCapture::Put(const char* data, size_t n) {
  while (n > 0) {
    if (buffered_ == sizeof buf_) Flush();
    size_t take = sizeof buf_ - buffered_;
    if (take > n) take = n;
    memcpy(buf_ + buffered_, data, take);
    buffered_ += take;
    data += take;
    n -= take;
  }
}

void LogCapture::Rotate() {
  Flush();
  int64_t base = bases_[segments_ - 1] + size_;
  int fd = openat(dir_fd_, SegmentName(base), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;  // keep writing where it was
  close(fd_);
  fd_ = fd;
  size_ = 0;
  if (segments_ == kMaxSegments) {
    unlinkat(dir_fd_, SegmentName(bases_[0]), 0);
    memmove(bases_, bases_ + 1, sizeof(bases_[0]) * (kMaxSegments - 1));
    --segments_;
  }
  bases_[segments_++] = base;
  // The older segments keep at most max_bytes - one segment, so the new one
  // may grow to its size within the cap.
  while (segments_ > 1 && base - bases_[0] > max_bytes_ - segment_bytes_) {
    unlinkat(dir_fd_, SegmentName(bases_[0]), 0);
    memmove(bases_, bases_ + 1, sizeof(bases_[0]) * (segments_ - 1));
    --segments_;
  }
}

void LogCapture::Write(const char* data, size_t n, int64_t unix_nanos) {
  if (fd_ < 0) return;
  while (n > 0) {
    int64_t pending = size_ + static_cast<int64_t>(buffered_);
    // A new segment at a line start; one line longer than two segments is cut.
    if (segment_bytes_ > 0 && ((at_line_start_ && pending >= segment_bytes_) || pending >= 2 * segment_bytes_)) {
      Rotate();
    }
    if (at_line_start_) {
      char stamp[kStampBytes];
      FormatStamp(unix_nanos, stamp);
      Put(stamp, sizeof stamp);
    }
    const char* nl = static_cast<const char*>(memchr(data, '\n', n));
    size_t len = nl ? static_cast<size_t>(nl - data) + 1 : n;
    if (segment_bytes_ > 0) {
      int64_t room = 2 * segment_bytes_ - (size_ + static_cast<int64_t>(buffered_));
      if (room < 1) room = 1;
      if (static_cast<int64_t>(len) > room) {
        len = static_cast<size_t>(room);
        nl = nullptr;
      }
    }
    Put(data, len);
    at_line_start_ = nl != nullptr;
    data += len;
    n -= len;
  }
  Flush();  // readers see each piece as soon as the task wrote it
}

void LogCapture::Close() {
  Flush();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int CaptureUntilExit(pid_t task, int out_fd, int err_fd, LogCapture& out, LogCapture& err) {
  sigset_t wait_mask;
  sigprocmask(SIG_SETMASK, nullptr, &wait_mask);
  sigdelset(&wait_mask, SIGCHLD);
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  LogCapture* sinks[2] = {&out, &err};
  int status = 0;
  bool exited = false;
  static char buf[64 << 10];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (!exited) {
      pid_t r = waitpid(task, &status, WNOHANG);
      exited = r == task;
    }
    if (exited) {
      // What the task wrote before it ended is in the pipes: read it to
      // the end without waiting for a child the task may have left.
      for (pollfd& p : fds) {
        if (p.fd >= 0) fcntl(p.fd, F_SETFL, fcntl(p.fd, F_GETFL) | O_NONBLOCK);
      }
    } else if (ppoll(fds, 2, nullptr, &wait_mask) < 0) {
      continue;  // SIGCHLD (or another signal): look at the task again
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (!exited && fds[i].revents == 0)) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->Write(buf, static_cast<size_t>(n), NowNanos());
        continue;
      }
      if (n < 0 && (errno == EINTR || (errno == EAGAIN && !exited))) continue;
      // The end, an error, or (the task has exited) nothing more now.
      close(fds[i].fd);
      fds[i].fd = -1;  // poll ignores negative descriptors
    }
  }
  while (!exited) {
    pid_t r = waitpid(task, &status, 0);
    if (r == task) exited = true;
    else if (r < 0 && errno != EINTR) return 127 << 8;
  }
  return status;
}

}  // namespace trainyard::agent
