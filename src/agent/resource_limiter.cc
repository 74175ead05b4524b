// cgroup v2, cgroup v1 and rlimit limiters. Files are written with plain
// open/write so a kernel refusal comes back as errno with the path.
#include "agent/resource_limiter.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr char kComponent[] = "limits";

absl::Status WriteFile(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  ssize_t n = write(fd, value.data(), value.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write \"", value, "\" to ", path, ": ", strerror(err)));
  }
  return absl::OkStatus();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// 0755 whatever the umask: a task may read its own cgroup's limits and
// usage (some runtimes size themselves by them); only root writes them.
bool MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0) return chmod(path.c_str(), 0755) == 0;
  return errno == EEXIST;
}

// Once per process: a pids limit was asked where no pids controller is.
void WarnNoPids() {
  static std::once_flag warned;
  std::call_once(warned, [] {
    Log(LogLevel::kWarning, kComponent, "the pids cgroup controller is not available: tasks have no process limit");
  });
}

// Value of "key N" lines (memory.events, memory.oom_control); 0 when absent.
int64_t KeyedValue(const std::string& text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t value = 0;
    if (parts.size() == 2 && parts[0] == key && absl::SimpleAtoi(parts[1], &value)) return value;
  }
  return 0;
}

// The agent's own cgroup path for a v1 controller ("memory") or v2 (""),
// from /proc/self/cgroup lines "4:memory:/a/b" and "0::/a/b".
std::string OwnCgroupPath(const std::string& proc_self_cgroup, absl::string_view controller) {
  for (absl::string_view line : absl::StrSplit(ReadFile(proc_self_cgroup), '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == controller) return std::string(absl::StripSuffix(parts[2], "/"));
    }
  }
  return "";
}

// Kills every process listed in a cgroup's cgroup.procs, then removes it.
// A killed process takes a moment to leave the cgroup, so removal is retried
// for up to ~200 ms.
void KillAndRemove(const std::string& dir) {
  for (int round = 0; round < 40; ++round) {
    for (absl::string_view pid_text : absl::StrSplit(ReadFile(dir + "/cgroup.procs"), '\n')) {
      int pid = 0;
      if (absl::SimpleAtoi(pid_text, &pid) && pid > 0) kill(pid, SIGKILL);
    }
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) break;
    usleep(5000);
  }
  Log(LogLevel::kWarning, kComponent, "cgroup %s not removed: %s", dir, strerror(errno));
}

class CgroupV2Limiter : public ResourceLimiter {
 public:
  CgroupV2Limiter(std::string parent, bool pids) : parent_(std::move(parent)), pids_(pids) {}
  LimiterKind kind() const override { return LimiterKind::kCgroupV2; }

  absl::StatusOr<PreparedLimits> Prepare(const std::string& name, const TaskLimits& limits) override {
    std::string dir = absl::StrCat(parent_, "/", name);
    if (!MakeDir(dir)) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
    if (limits.memory_limit_mb > 0) {
      absl::Status s = WriteFile(dir + "/memory.max", absl::StrCat(limits.memory_limit_mb << 20));
      if (!s.ok()) return s;
      (void)WriteFile(dir + "/memory.swap.max", "0");  // absent without swap accounting
    }
    if (limits.vcores_milli > 0) {
      absl::Status s = WriteFile(dir + "/cpu.max", absl::StrCat(limits.vcores_milli * 100, " 100000"));
      if (!s.ok()) return s;
    }
    if (limits.pids_max > 0) {
      if (!pids_) {
        WarnNoPids();
      } else if (absl::Status s = WriteFile(dir + "/pids.max", absl::StrCat(limits.pids_max)); !s.ok()) {
        return s;
      }
    }
    return PreparedLimits{.procs_files = {dir + "/cgroup.procs"}};
  }

  bool OomKilled(const std::string& name) override {
    return KeyedValue(ReadFile(absl::StrCat(parent_, "/", name, "/memory.events")), "oom_kill") > 0;
  }

  void Release(const std::string& name) override { KillAndRemove(absl::StrCat(parent_, "/", name)); }

 private:
  std::string parent_;
  bool pids_;  // the pids controller is enabled for the agent's cgroups
};

class CgroupV1Limiter : public ResourceLimiter {
 public:
  CgroupV1Limiter(std::string memory_parent, std::string cpu_parent, std::string pids_parent)
      : memory_parent_(std::move(memory_parent)),
        cpu_parent_(std::move(cpu_parent)),
        pids_parent_(std::move(pids_parent)) {}
  LimiterKind kind() const override { return LimiterKind::kCgroupV1; }

  absl::StatusOr<PreparedLimits> Prepare(const std::string& name, const TaskLimits& limits) override {
    PreparedLimits prepared;
    std::string mem = absl::StrCat(memory_parent_, "/", name);
    if (!MakeDir(mem)) return absl::PermissionDeniedError(absl::StrCat("cannot create ", mem, ": ", strerror(errno)));
    prepared.procs_files.push_back(mem + "/cgroup.procs");
    if (limits.memory_limit_mb > 0) {
      std::string bytes = absl::StrCat(limits.memory_limit_mb << 20);
      absl::Status s = WriteFile(mem + "/memory.limit_in_bytes", bytes);
      if (!s.ok()) return s;
      (void)WriteFile(mem + "/memory.memsw.limit_in_bytes", bytes);  // no swap past the limit
    }
    if (limits.vcores_milli > 0 && !cpu_parent_.empty()) {
      std::string cpu = absl::StrCat(cpu_parent_, "/", name);
      if (!MakeDir(cpu)) return absl::PermissionDeniedError(absl::StrCat("cannot create ", cpu, ": ", strerror(errno)));
      absl::Status s = WriteFile(cpu + "/cpu.cfs_period_us", "100000");
      if (s.ok()) s = WriteFile(cpu + "/cpu.cfs_quota_us", absl::StrCat(limits.vcores_milli * 100));
      if (!s.ok()) return s;
      prepared.procs_files.push_back(cpu + "/cgroup.procs");
    }
    if (limits.pids_max > 0 && pids_parent_.empty()) WarnNoPids();
    if (limits.pids_max > 0 && !pids_parent_.empty()) {
      std::string pids = absl::StrCat(pids_parent_, "/", name);
      if (!MakeDir(pids)) return absl::PermissionDeniedError(absl::StrCat("cannot create ", pids, ": ", strerror(errno)));
      absl::Status s = WriteFile(pids + "/pids.max", absl::StrCat(limits.pids_max));
      if (!s.ok()) return s;
      prepared.procs_files.push_back(pids + "/cgroup.procs");
    }
    return prepared;
  }

  bool OomKilled(const std::string& name) override {
    std::string control = ReadFile(absl::StrCat(memory_parent_, "/", name, "/memory.oom_control"));
    // Kernels before 4.13 have no oom_kill counter; under_oom is the fallback.
    return KeyedValue(control, "oom_kill") > 0 || KeyedValue(control, "under_oom") > 0;
  }

  void Release(const std::string& name) override {
    KillAndRemove(absl::StrCat(memory_parent_, "/", name));
    if (!cpu_parent_.empty()) KillAndRemove(absl::StrCat(cpu_parent_, "/", name));
    if (!pids_parent_.empty()) KillAndRemove(absl::StrCat(pids_parent_, "/", name));
  }

 private:
  std::string memory_parent_;
  std::string cpu_parent_;   // "" when the cpu controller is not writable
  std::string pids_parent_;  // "" when the pids controller is not writable
};

class RlimitLimiter : public ResourceLimiter {
 public:
  LimiterKind kind() const override { return LimiterKind::kRlimit; }
  absl::StatusOr<PreparedLimits> Prepare(const std::string&, const TaskLimits& limits) override {
    if (limits.memory_limit_mb > 0 || limits.vcores_milli > 0) WarnOnce();
    return PreparedLimits{.address_space_bytes = static_cast<uint64_t>(limits.memory_limit_mb) << 20};
  }
  bool OomKilled(const std::string&) override { return false; }
  void Release(const std::string&) override {}

 private:
  // Once per process, however many limiters there are.
  static void WarnOnce() {
    static std::once_flag warned;
    std::call_once(warned, [] {
      Log(LogLevel::kWarning, kComponent,
          "cgroups are not writable: memory limits fall back to RLIMIT_AS, CPU limits are not "
          "enforced, and OOM kills cannot be told apart from other SIGKILLs");
    });
  }
};

// Enables `controllers` in the subtree of the root and of the agent's parent.
bool EnableControllers(const LimiterOptions& o, const std::string& parent, const std::string& controllers) {
  return WriteFile(o.cgroup_root + "/cgroup.subtree_control", controllers).ok() &&
         WriteFile(parent + "/cgroup.subtree_control", controllers).ok();
}

ResourceLimiterPtr TryV2(const LimiterOptions& o) {
  std::string controllers = ReadFile(o.cgroup_root + "/cgroup.controllers");
  if (controllers.find("memory") == std::string::npos) return nullptr;
  std::string parent = absl::StrCat(o.cgroup_root, "/", o.parent_name);
  if (!MakeDir(parent)) return nullptr;
  // Controllers must be enabled in every ancestor's subtree_control. A
  // kernel without the pids controller still has memory and CPU limits.
  bool pids = controllers.find("pids") != std::string::npos && EnableControllers(o, parent, "+memory +cpu +pids");
  if (!pids && !EnableControllers(o, parent, "+memory +cpu")) return nullptr;
  return std::make_unique<CgroupV2Limiter>(parent, pids);
}

ResourceLimiterPtr TryV1(const LimiterOptions& o) {
  std::string memory_root = o.cgroup_root + "/memory";
  if (access((memory_root + "/memory.limit_in_bytes").c_str(), F_OK) != 0) return nullptr;
  std::string memory_parent =
      absl::StrCat(memory_root, OwnCgroupPath(o.proc_self_cgroup, "memory"), "/", o.parent_name);
  if (!MakeDir(memory_parent)) return nullptr;
  std::string cpu_parent;
  for (const char* mount : {"/cpu", "/cpu,cpuacct"}) {
    std::string root = o.cgroup_root + mount;
    if (access((root + "/cpu.cfs_quota_us").c_str(), F_OK) != 0) continue;
    std::string candidate = absl::StrCat(root, OwnCgroupPath(o.proc_self_cgroup, "cpu"), "/", o.parent_name);
    if (MakeDir(candidate)) cpu_parent = candidate;
    break;
  }
  std::string pids_parent;
  std::string pids_root = o.cgroup_root + "/pids";
  if (access((pids_root + "/cgroup.procs").c_str(), F_OK) == 0) {
    std::string candidate = absl::StrCat(pids_root, OwnCgroupPath(o.proc_self_cgroup, "pids"), "/", o.parent_name);
    if (MakeDir(candidate)) pids_parent = candidate;
  }
  return std::make_unique<CgroupV1Limiter>(memory_parent, cpu_parent, pids_parent);
}

}  // namespace

const char* LimiterKindName(LimiterKind kind) {
  switch (kind) {
    case LimiterKind::kCgroupV2: return "cgroup-v2";
    case LimiterKind::kCgroupV1: return "cgroup-v1";
    case LimiterKind::kRlimit: return "rlimit";
  }
  return "unknown";
}

std::string CgroupSafeName(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  }
  return out;
}

ResourceLimiterPtr NewRlimitLimiter() { return std::make_unique<RlimitLimiter>(); }

ResourceLimiterPtr DetectResourceLimiter(const LimiterOptions& options) {
  ResourceLimiterPtr limiter;
  if (options.allow_v2) limiter = TryV2(options);
  if (!limiter && options.allow_v1) limiter = TryV1(options);
  if (!limiter) limiter = NewRlimitLimiter();
  Log(LogLevel::kInfo, kComponent, "task limits through %s", LimiterKindName(limiter->kind()));
  return limiter;
}

}  // namespace trainyard::agent
