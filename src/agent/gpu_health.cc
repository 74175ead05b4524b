// Xid events: the table, the line parser and the follower (gpu_health.h).
#include "agent/gpu_health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr char kHealthLog[] = "gpu-health";
constexpr size_t kMaxText = 512;
// At most this much of a file source is read per poll; the rest waits for
// the next (a flood of lines never holds a heartbeat up for long).
constexpr int64_t kMaxReadPerPoll = 1 << 20;
constexpr uint32_t kWatched = IN_MODIFY | IN_CLOSE_WRITE;  // what wakes the watch of a file

// The Xids the table knows, after NVIDIA's Xid catalog
// (https://docs.nvidia.com/deploy/xid-errors/): its "immediate action"
// bucket read as RESTART_APP or IGNORE -> IGNORE (the application's own
// error; the task's own restart policy handles its end), RESET_GPU ->
// EXCLUDE_GPU (no task may use the GPU until it is reset, which needs its
// tasks gone), RESTART_BM -> DRAIN_NODE (the node needs a reboot).
constexpr std::array kRules = {
    XidRule{13, v1::GPU_FAULT_IGNORE, "graphics engine exception"},
    XidRule{31, v1::GPU_FAULT_IGNORE, "GPU memory page fault"},
    XidRule{32, v1::GPU_FAULT_IGNORE, "invalid or corrupted push buffer stream"},
    XidRule{43, v1::GPU_FAULT_IGNORE, "GPU stopped processing"},
    XidRule{45, v1::GPU_FAULT_IGNORE, "preemptive cleanup after earlier errors"},
    XidRule{48, v1::GPU_FAULT_EXCLUDE_GPU, "double-bit ECC error"},
    XidRule{61, v1::GPU_FAULT_EXCLUDE_GPU, "internal micro-controller breakpoint"},
    XidRule{62, v1::GPU_FAULT_EXCLUDE_GPU, "internal micro-controller halt"},
    XidRule{63, v1::GPU_FAULT_EXCLUDE_GPU, "row remapping pending: the GPU needs a reset"},
    XidRule{64, v1::GPU_FAULT_EXCLUDE_GPU, "row remapping failure"},
    XidRule{69, v1::GPU_FAULT_IGNORE, "graphics engine class error"},
    XidRule{74, v1::GPU_FAULT_EXCLUDE_GPU, "NVLink error"},
    XidRule{79, v1::GPU_FAULT_DRAIN_NODE, "GPU has fallen off the bus"},
    XidRule{92, v1::GPU_FAULT_IGNORE, "high single-bit ECC error rate"},
    XidRule{94, v1::GPU_FAULT_IGNORE, "contained ECC error (the application's)"},
    XidRule{95, v1::GPU_FAULT_EXCLUDE_GPU, "uncontained ECC error"},
    XidRule{119, v1::GPU_FAULT_EXCLUDE_GPU, "GSP RPC timeout"},
    XidRule{120, v1::GPU_FAULT_EXCLUDE_GPU, "GSP error"},
    XidRule{140, v1::GPU_FAULT_EXCLUDE_GPU, "unrecovered ECC error"},
    XidRule{154, v1::GPU_FAULT_DRAIN_NODE, "GPU recovery action changed (reset or reboot required)"},
};

bool ParseHex(absl::string_view text, uint32_t* out) {
  if (text.empty() || text.size() > 8) return false;
  uint32_t v = 0;
  for (char c : text) {
    int d = absl::ascii_isdigit(c) ? c - '0' : absl::ascii_isxdigit(c) ? absl::ascii_tolower(c) - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  *out = v;
  return true;
}

// The line as it may be shown and sent: printable ASCII (the driver writes
// nothing else; a file of other bytes gets '?'), at most kMaxText bytes.
std::string Printable(absl::string_view s) {
  std::string out(s.substr(0, kMaxText));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

absl::string_view Trim(absl::string_view s) { return absl::StripAsciiWhitespace(s); }

}  // namespace

XidRule RuleOfXid(int xid) {
  for (const XidRule& r : kRules) {
    if (r.xid == xid) return r;
  }
  return XidRule{xid, v1::GPU_FAULT_IGNORE, "not in the table"};
}

std::string PciKey(absl::string_view address) {
  address = Trim(address);
  absl::ConsumePrefix(&address, "PCI:");
  std::vector<absl::string_view> parts = absl::StrSplit(address, ':');
  if (parts.size() == 2) parts.insert(parts.begin(), "0");
  if (parts.size() != 3) return "";
  absl::string_view dev = parts[2];
  if (size_t dot = dev.find('.'); dot != absl::string_view::npos) dev = dev.substr(0, dot);
  uint32_t domain = 0, bus = 0, device = 0;
  if (!ParseHex(parts[0], &domain) || !ParseHex(parts[1], &bus) || !ParseHex(dev, &device) || bus > 0xff ||
      device > 0xff || domain > 0xffff) {
    return "";
  }
  return absl::StrFormat("%04x:%02x:%02x", domain, bus, device);
}

std::optional<XidEvent> ParseXidLine(absl::string_view line) {
  size_t at = line.find("NVRM: Xid (");
  if (at == absl::string_view::npos) return std::nullopt;
  absl::string_view rest = line.substr(at + sizeof("NVRM: ") - 1);
  absl::string_view text = rest;
  rest.remove_prefix(sizeof("Xid (") - 1);
  size_t close = rest.find(')');
  if (close == absl::string_view::npos) return std::nullopt;
  XidEvent event;
  event.pci = PciKey(rest.substr(0, close));
  if (event.pci.empty()) return std::nullopt;
  rest.remove_prefix(close + 1);
  if (!absl::ConsumePrefix(&rest, ":")) return std::nullopt;
  rest = absl::StripLeadingAsciiWhitespace(rest);
  size_t end = 0;
  while (end < rest.size() && absl::ascii_isdigit(rest[end])) ++end;
  if (end == 0 || end > 6 || !absl::SimpleAtoi(rest.substr(0, end), &event.xid)) return std::nullopt;
  text = absl::StripTrailingAsciiWhitespace(text);
  event.text = Printable(text);
  return event;
}

absl::StatusOr<std::unique_ptr<GpuHealth>> GpuHealth::Open(const std::string& path,
                                                          const std::vector<GpuInfo>& gpus) {
  std::unique_ptr<GpuHealth> h(new GpuHealth());
  h->path_ = path;
  h->fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (h->fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat("--gpu-events ", path, ": cannot open it: ", strerror(errno)));
  }
  struct stat st;
  if (fstat(h->fd_, &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("--gpu-events ", path, ": ", strerror(errno)));
  }
  h->kmsg_ = S_ISCHR(st.st_mode);
  if (!h->kmsg_ && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu-events ", path, ": neither the kernel's log (a character device) nor a regular file"));
  }
  // From its end: the faults before this agent started were seen (and
  // acted on) by the one before it, and a GPU reset since may have cleared
  // them.
  off_t end = lseek(h->fd_, 0, SEEK_END);
  absl::MutexLock lock(&h->mu_);
  if (!h->kmsg_) {
    h->inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (h->inotify_fd_ >= 0) h->watch_ = inotify_add_watch(h->inotify_fd_, path.c_str(), kWatched);
  }
  h->offset_ = h->kmsg_ ? 0 : std::max<off_t>(end, 0);
  for (const GpuInfo& g : gpus) {
    if (std::string key = PciKey(g.pci_bus_id); !key.empty()) h->gpu_of_pci_.emplace_back(key, g.index);
  }
  return h;
}

GpuHealth::~GpuHealth() {
  if (fd_ >= 0) close(fd_);
  if (inotify_fd_ >= 0) close(inotify_fd_);
}

void GpuHealth::WaitForMore(int stop_fd, absl::Duration timeout) {
  // The kernel's log is never replaced (fd_ is constant in that mode).
  int source = kmsg_ ? fd_ : inotify_fd_;
  pollfd p[2] = {{stop_fd, POLLIN, 0}, {source, POLLIN, 0}};
  int ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 0, 3600 * 1000));
  if (poll(p, source >= 0 ? 2 : 1, ms) <= 0 || kmsg_ || (p[1].revents & POLLIN) == 0) return;
  // inotify: what it says is "written"; the events themselves are not needed.
  std::array<char, 4096> drain;
  while (read(inotify_fd_, drain.data(), drain.size()) > 0) {
  }
}

GpuHealthWatch::GpuHealthWatch(GpuHealth* health, const Clock* clock, std::function<void()> on_change,
                               absl::Duration fallback)
    : health_(health), clock_(clock), on_change_(std::move(on_change)), fallback_(fallback) {
  if (pipe2(stop_, O_CLOEXEC | O_NONBLOCK) != 0) {
    Log(LogLevel::kWarning, kHealthLog, "GPU health: no pipe for its watch (%s): faults go out at heartbeats",
        strerror(errno));
    return;
  }
  thread_ = std::thread([this] {
    // (GPU, action) of each fault: what makes a beat worth sending now.
    auto worst = [this] {
      std::vector<std::pair<int, int>> out;
      for (const v1::GpuFault& f : health_->Faults()) out.emplace_back(f.gpu(), f.action());
      return out;
    };
    while (!stopping_.load()) {
      health_->WaitForMore(stop_[0], fallback_);
      if (stopping_.load()) return;
      std::vector<std::pair<int, int>> before = worst();
      if (health_->Poll(clock_->Now()) && worst() != before) on_change_();
      // At most 20 looks a second, the stop still heard at once.
      pollfd p{stop_[0], POLLIN, 0};
      poll(&p, 1, 50);
    }
  });
}

GpuHealthWatch::~GpuHealthWatch() {
  stopping_.store(true);
  if (stop_[1] >= 0) {
    char b = 1;
    ssize_t ignored = write(stop_[1], &b, 1);
    (void)ignored;
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : stop_) {
    if (fd >= 0) close(fd);
  }
}

bool GpuHealth::Poll(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<XidEvent> events;
  ReadSource(&events);
  bool changed = false;
  for (const XidEvent& e : events) changed |= Apply(e, now);
  return changed;
}

void GpuHealth::ReadSource(std::vector<XidEvent>* events) {
  auto line = [events](absl::string_view text) {
    if (std::optional<XidEvent> e = ParseXidLine(text)) events->push_back(*std::move(e));
  };
  if (kmsg_) {
    // One record per read; EAGAIN: nothing more now; EPIPE: records were
    // overwritten before they were read (the next read goes on).
    std::array<char, 8192> buf;
    for (int records = 0; records < 4096; ++records) {
      ssize_t n = read(fd_, buf.data(), buf.size());
      if (n < 0 && errno == EPIPE) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      absl::string_view rec(buf.data(), static_cast<size_t>(n));
      if (size_t semi = rec.find(';'); semi != absl::string_view::npos) rec.remove_prefix(semi + 1);
      line(rec.substr(0, rec.find('\n')));
    }
    return;
  }
  for (int file = 0; file < 2; ++file) {
    struct stat st;
    if (fstat(fd_, &st) != 0) return;
    if (st.st_size < offset_) {  // truncated: from its start
      offset_ = 0;
      partial_.clear();
    }
    int64_t want = std::min<int64_t>(st.st_size - offset_, kMaxReadPerPoll);
    if (want > 0) {
      std::string data(static_cast<size_t>(want), '\0');
      ssize_t n = pread(fd_, data.data(), data.size(), offset_);
      if (n <= 0) return;
      data.resize(static_cast<size_t>(n));
      offset_ += n;
      partial_ += data;
      size_t start = 0;
      for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
        line(absl::string_view(partial_).substr(start, nl - start));
      }
      partial_.erase(0, start);
      if (partial_.size() > 64 * 1024) partial_.clear();  // no line is that long: not a log of lines
      if (offset_ < st.st_size) return;  // more next time
    }
    // Read to its end: a file rotated away (a new one at the path, as
    // logrotate leaves it) is followed from the new one's start.
    struct stat now_at_path;
    if (stat(path_.c_str(), &now_at_path) != 0 || (now_at_path.st_ino == st.st_ino && now_at_path.st_dev == st.st_dev) ||
        !S_ISREG(now_at_path.st_mode)) {
      return;
    }
    int fd = open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return;
    close(fd_);
    fd_ = fd;
    if (inotify_fd_ >= 0) {  // the watch follows the new file
      if (watch_ >= 0) inotify_rm_watch(inotify_fd_, watch_);
      watch_ = inotify_add_watch(inotify_fd_, path_.c_str(), kWatched);
    }
    offset_ = 0;
    partial_.clear();
  }
}

bool GpuHealth::Apply(const XidEvent& event, absl::Time now) {
  auto gpu = std::find_if(gpu_of_pci_.begin(), gpu_of_pci_.end(),
                          [&](const auto& p) { return p.first == event.pci; });
  XidRule rule = RuleOfXid(event.xid);
  if (gpu == gpu_of_pci_.end()) {
    Log(LogLevel::kWarning, kHealthLog, "Xid %d on PCI %s, not a GPU of this node: %s", event.xid, event.pci,
        event.text);
    return false;
  }
  if (rule.action == v1::GPU_FAULT_IGNORE) {
    Log(LogLevel::kInfo, kHealthLog, "GPU %d: Xid %d (%s), left to the task: %s", gpu->second, event.xid, rule.what,
        event.text);
    return false;
  }
  Log(LogLevel::kWarning, kHealthLog, "GPU %d: Xid %d (%s): %s; %s", gpu->second, event.xid, rule.what, event.text,
      rule.action == v1::GPU_FAULT_DRAIN_NODE ? "the node is drained" : "the GPU is excluded");
  v1::GpuFault fault;
  fault.set_gpu(gpu->second);
  fault.set_xid(event.xid);
  fault.set_action(rule.action);
  fault.set_message(absl::StrCat("Xid ", event.xid, " (", rule.what, "): ", event.text).substr(0, kMaxText));
  fault.set_time_unix_ms(absl::ToUnixMillis(now));
  auto same = std::find_if(faults_.begin(), faults_.end(), [&](const v1::GpuFault& f) { return f.gpu() == fault.gpu(); });
  if (same == faults_.end()) {
    faults_.push_back(std::move(fault));
    std::sort(faults_.begin(), faults_.end(), [](const v1::GpuFault& a, const v1::GpuFault& b) { return a.gpu() < b.gpu(); });
    return true;
  }
  // The latest fault of a GPU stands, unless it asks less than one before.
  if (fault.action() < same->action()) return false;
  *same = std::move(fault);
  return true;
}

std::vector<v1::GpuFault> GpuHealth::Faults() const {
  absl::MutexLock lock(&mu_);
  return faults_;
}

}  // namespace trainyard::agent
