// cgroup v2, cgroup v1 and unconfined limiters, and the detection of which
// one this machine allows. Files are written with plain open/write so a
// kernel refusal comes back as errno with the path.
#include "agent/resource_limiter.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr char kLimiterLog[] = "limits";

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
  if (errno != EEXIST) return false;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;
  errno = ENOTDIR;
  return false;
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

// A whole number file (memory.current, cpuacct.usage); nullopt when it
// cannot be read.
std::optional<int64_t> NumberIn(const std::string& path) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &value)) return std::nullopt;
  return value;
}

// Memory in use less the inactive file cache (the kernel's working set, as
// container runtimes report it), from a usage file and memory.stat's
// `inactive_key`.
std::optional<int64_t> WorkingSet(const std::string& dir, const char* usage_file, absl::string_view inactive_key) {
  std::optional<int64_t> usage = NumberIn(absl::StrCat(dir, "/", usage_file));
  if (!usage) return std::nullopt;
  int64_t inactive = KeyedValue(ReadFile(dir + "/memory.stat"), inactive_key);
  return std::max<int64_t>(0, *usage - inactive);
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
// for up to ~200 ms. Cgroups below it (an OCI runtime's container, left when
// the runtime was killed) go first, the same way.
void KillAndRemove(const std::string& dir, int depth = 0) {
  if (depth < 4) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      std::error_code kind_ec;
      if (entry.is_directory(kind_ec) && !entry.is_symlink(kind_ec)) KillAndRemove(entry.path().string(), depth + 1);
    }
  }
  for (int round = 0; round < 40; ++round) {
    for (absl::string_view pid_text : absl::StrSplit(ReadFile(dir + "/cgroup.procs"), '\n')) {
      int pid = 0;
      if (absl::SimpleAtoi(pid_text, &pid) && pid > 0) kill(pid, SIGKILL);
    }
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) break;
    usleep(5000);
  }
  Log(LogLevel::kWarning, kLimiterLog, "cgroup %s not removed: %s", dir, strerror(errno));
}

class CgroupV2Limiter : public ResourceLimiter {
 public:
  CgroupV2Limiter(std::string parent, Confinement confinement)
      : parent_(std::move(parent)), confinement_(std::move(confinement)) {}
  LimiterKind kind() const override { return LimiterKind::kCgroupV2; }
  const Confinement& confinement() const override { return confinement_; }

  absl::StatusOr<PreparedLimits> Prepare(const std::string& name, const TaskLimits& limits) override {
    std::string dir = absl::StrCat(parent_, "/", name);
    if (!MakeDir(dir)) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
    if (limits.memory_limit_mb > 0 && !confinement_.memory.empty()) {
      absl::Status s = WriteFile(dir + "/memory.max", absl::StrCat(limits.memory_limit_mb << 20));
      if (!s.ok()) return s;
      (void)WriteFile(dir + "/memory.swap.max", "0");  // absent without swap accounting
    }
    if (limits.vcores_milli > 0 && !confinement_.cpu.empty()) {
      absl::Status s = WriteFile(dir + "/cpu.max", absl::StrCat(limits.vcores_milli * 100, " 100000"));
      if (!s.ok()) return s;
    }
    if (limits.pids_max > 0 && !confinement_.pids.empty()) {
      absl::Status s = WriteFile(dir + "/pids.max", absl::StrCat(limits.pids_max));
      if (!s.ok()) return s;
    }
    return PreparedLimits{.procs_files = {dir + "/cgroup.procs"}};
  }

  bool OomKilled(const std::string& name) override {
    return KeyedValue(ReadFile(absl::StrCat(parent_, "/", name, "/memory.events")), "oom_kill") > 0;
  }

  void Release(const std::string& name) override { KillAndRemove(absl::StrCat(parent_, "/", name)); }

  std::vector<std::string> JoinFiles(const std::string& name) const override {
    if (name.empty()) return {};  // no cgroup of its own: never the parent's
    std::string procs = absl::StrCat(parent_, "/", name, "/cgroup.procs");
    if (access(procs.c_str(), F_OK) != 0) return {};
    return {procs};
  }

  CgroupUsage Usage(const std::string& name) const override {
    std::string dir = absl::StrCat(parent_, "/", name);
    CgroupUsage use;
    std::string stat = ReadFile(dir + "/cpu.stat");  // kept by every v2 cgroup
    if (!stat.empty()) use.cpu_ns = KeyedValue(stat, "usage_usec") * 1000;
    if (!confinement_.memory.empty()) use.memory_bytes = WorkingSet(dir, "memory.current", "inactive_file");
    if (use.cpu_ns || use.memory_bytes) use.source = "cgroup v2";
    return use;
  }

 private:
  const std::string parent_;
  const Confinement confinement_;
};

class CgroupV1Limiter : public ResourceLimiter {
 public:
  // A parent is "" where its controller is not writable.
  CgroupV1Limiter(std::string memory_parent, std::string cpu_parent, std::string pids_parent, Confinement c)
      : memory_parent_(std::move(memory_parent)),
        cpu_parent_(std::move(cpu_parent)),
        pids_parent_(std::move(pids_parent)),
        confinement_(std::move(c)) {}
  LimiterKind kind() const override { return LimiterKind::kCgroupV1; }
  const Confinement& confinement() const override { return confinement_; }

  absl::StatusOr<PreparedLimits> Prepare(const std::string& name, const TaskLimits& limits) override {
    PreparedLimits prepared;
    // A task joins the memory cgroup even without a limit, so an OOM kill
    // of the node's is still told apart (and, like cpu and pids, so it can
    // be killed whole).
    if (!memory_parent_.empty()) {
      std::string mem = absl::StrCat(memory_parent_, "/", name);
      if (!MakeDir(mem)) return absl::PermissionDeniedError(absl::StrCat("cannot create ", mem, ": ", strerror(errno)));
      prepared.procs_files.push_back(mem + "/cgroup.procs");
      if (limits.memory_limit_mb > 0) {
        std::string bytes = absl::StrCat(limits.memory_limit_mb << 20);
        absl::Status s = WriteFile(mem + "/memory.limit_in_bytes", bytes);
        if (!s.ok()) return s;
        (void)WriteFile(mem + "/memory.memsw.limit_in_bytes", bytes);  // no swap past the limit
      }
    }
    if (limits.vcores_milli > 0 && !cpu_parent_.empty()) {
      std::string cpu = absl::StrCat(cpu_parent_, "/", name);
      if (!MakeDir(cpu)) return absl::PermissionDeniedError(absl::StrCat("cannot create ", cpu, ": ", strerror(errno)));
      absl::Status s = WriteFile(cpu + "/cpu.cfs_period_us", "100000");
      if (s.ok()) s = WriteFile(cpu + "/cpu.cfs_quota_us", absl::StrCat(limits.vcores_milli * 100));
      if (!s.ok()) return s;
      prepared.procs_files.push_back(cpu + "/cgroup.procs");
    }
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
    if (memory_parent_.empty()) return false;
    std::string control = ReadFile(absl::StrCat(memory_parent_, "/", name, "/memory.oom_control"));
    // Kernels before 4.13 have no oom_kill counter; under_oom is the fallback.
    return KeyedValue(control, "oom_kill") > 0 || KeyedValue(control, "under_oom") > 0;
  }

  CgroupUsage Usage(const std::string& name) const override {
    CgroupUsage use;
    // A task has a cpu cgroup only when it asked for a CPU limit; cpuacct
    // is mounted with cpu where it counts there.
    if (!cpu_parent_.empty()) use.cpu_ns = NumberIn(absl::StrCat(cpu_parent_, "/", name, "/cpuacct.usage"));
    if (!memory_parent_.empty()) {
      use.memory_bytes =
          WorkingSet(absl::StrCat(memory_parent_, "/", name), "memory.usage_in_bytes", "total_inactive_file");
    }
    if (use.cpu_ns || use.memory_bytes) use.source = "cgroup v1";
    return use;
  }

  void Release(const std::string& name) override {
    for (const std::string* parent : {&memory_parent_, &cpu_parent_, &pids_parent_}) {
      if (!parent->empty()) KillAndRemove(absl::StrCat(*parent, "/", name));
    }
  }

  std::vector<std::string> JoinFiles(const std::string& name) const override {
    std::vector<std::string> files;
    if (name.empty()) return files;  // no cgroup of its own: never the parent's
    for (const std::string* parent : {&memory_parent_, &cpu_parent_, &pids_parent_}) {
      if (parent->empty()) continue;
      std::string procs = absl::StrCat(*parent, "/", name, "/cgroup.procs");
      if (access(procs.c_str(), F_OK) == 0) files.push_back(std::move(procs));
    }
    return files;
  }

 private:
  const std::string memory_parent_;
  const std::string cpu_parent_;
  const std::string pids_parent_;
  const Confinement confinement_;
};

// Tasks run unconfined: nothing to create, join or remove.
class UnconfinedLimiter : public ResourceLimiter {
 public:
  explicit UnconfinedLimiter(std::string why) { confinement_.why_not = std::move(why); }
  LimiterKind kind() const override { return LimiterKind::kNone; }
  const Confinement& confinement() const override { return confinement_; }
  absl::StatusOr<PreparedLimits> Prepare(const std::string&, const TaskLimits&) override { return PreparedLimits{}; }
  bool OomKilled(const std::string&) override { return false; }
  void Release(const std::string&) override {}

 private:
  Confinement confinement_;
};

bool Has(const std::vector<std::string>& v, absl::string_view x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Enables `wanted` controllers in `dir`'s subtree: all in one write, else
// one by one (a kernel refuses a whole write for one controller it cannot
// enable). Returns those enabled.
std::vector<std::string> EnableIn(const std::string& dir, const std::vector<std::string>& wanted) {
  std::string all;
  for (const std::string& c : wanted) absl::StrAppend(&all, all.empty() ? "+" : " +", c);
  if (wanted.empty() || WriteFile(dir + "/cgroup.subtree_control", all).ok()) return wanted;
  std::vector<std::string> enabled;
  for (const std::string& c : wanted) {
    if (WriteFile(dir + "/cgroup.subtree_control", "+" + c).ok()) enabled.push_back(c);
  }
  return enabled;
}

// A v2 limiter whose tasks' cgroups go under BASE/parent_name, where the
// agent may write BASE's subtree_control (the root, or a delegated
// subtree); nullptr with the reason in *why otherwise.
ResourceLimiterPtr V2At(const LimiterOptions& o, const std::string& base, std::string* why) {
  std::vector<std::string> offered = absl::StrSplit(absl::StripTrailingAsciiWhitespace(ReadFile(base + "/cgroup.controllers")),
                                                    ' ', absl::SkipEmpty());
  std::vector<std::string> wanted;
  for (const char* c : {"memory", "cpu", "pids"}) {
    if (Has(offered, c)) wanted.push_back(c);
  }
  if (wanted.empty()) {
    *why = absl::StrCat(base, " offers none of the memory, cpu and pids controllers");
    return nullptr;
  }
  std::string parent = absl::StrCat(base, "/", o.parent_name);
  if (!MakeDir(parent)) {
    *why = absl::StrCat("cannot create ", parent, ": ", strerror(errno));
    return nullptr;
  }
  // Controllers must be enabled in every ancestor's subtree_control.
  std::vector<std::string> enabled = EnableIn(parent, EnableIn(base, wanted));
  if (enabled.empty()) {
    *why = absl::StrCat("cannot enable controllers in ", base, "/cgroup.subtree_control: ", strerror(errno));
    rmdir(parent.c_str());
    return nullptr;
  }
  Confinement c{.where = parent};
  std::vector<std::string> missing;
  for (const char* name : {"memory", "cpu", "pids"}) {
    bool on = Has(enabled, name);
    if (!on) missing.push_back(name);
    std::string by = !on ? "" : std::string(name) == "cpu" ? "cgroup v2 quota" : "cgroup v2";
    (std::string(name) == "memory" ? c.memory : std::string(name) == "cpu" ? c.cpu : c.pids) = by;
  }
  if (!missing.empty()) {
    c.why_not = absl::StrCat("the ", absl::StrJoin(missing, ", "), " controller", missing.size() > 1 ? "s are" : " is",
                             " not delegated to ", base);
  }
  return std::make_unique<CgroupV2Limiter>(parent, std::move(c));
}

// The unified hierarchy: its root when the agent may write there (root),
// else the parent of the agent's own cgroup when the agent owns it (systemd
// Delegate=, with the agent in a subgroup of the delegated cgroup).
ResourceLimiterPtr TryV2(const LimiterOptions& o, std::vector<std::string>* why) {
  if (access((o.cgroup_root + "/cgroup.controllers").c_str(), F_OK) != 0) {
    why->push_back(absl::StrCat("no cgroup v2 hierarchy at ", o.cgroup_root));
    return nullptr;
  }
  std::vector<std::string> bases = {o.cgroup_root};
  std::string own = OwnCgroupPath(o.proc_self_cgroup, "");
  size_t slash = own.rfind('/');
  if (!own.empty() && slash != std::string::npos && slash > 0) bases.push_back(o.cgroup_root + own.substr(0, slash));
  for (const std::string& base : bases) {
    std::string reason;
    if (ResourceLimiterPtr l = V2At(o, base, &reason)) return l;
    why->push_back(reason);
  }
  return nullptr;
}

// PARENT_OF_CONTROLLER under the agent's own v1 cgroup of `controller`
// mounted at `mount`, created; "" (with the reason in *why) when it cannot
// be.
std::string V1Parent(const LimiterOptions& o, const std::string& mount, const char* controller, const char* probe,
                     std::vector<std::string>* why) {
  std::string root = o.cgroup_root + mount;
  if (access((root + "/" + probe).c_str(), F_OK) != 0) {
    why->push_back(absl::StrCat("no v1 ", controller, " controller at ", root));
    return "";
  }
  std::string parent = absl::StrCat(root, OwnCgroupPath(o.proc_self_cgroup, controller), "/", o.parent_name);
  if (!MakeDir(parent)) {
    why->push_back(absl::StrCat("cannot create ", parent, ": ", strerror(errno)));
    return "";
  }
  return parent;
}

// cgroup v1: each of the memory, cpu and pids controllers where the agent
// may create cgroups under its own.
ResourceLimiterPtr TryV1(const LimiterOptions& o, std::vector<std::string>* why) {
  std::vector<std::string> missing;
  std::string memory = V1Parent(o, "/memory", "memory", "memory.limit_in_bytes", &missing);
  std::string cpu_mount = "/cpu";
  if (access((o.cgroup_root + "/cpu/cpu.cfs_quota_us").c_str(), F_OK) != 0) cpu_mount = "/cpu,cpuacct";
  std::string cpu = V1Parent(o, cpu_mount, "cpu", "cpu.cfs_quota_us", &missing);
  std::string pids = V1Parent(o, "/pids", "pids", "cgroup.procs", &missing);
  if (memory.empty() && cpu.empty() && pids.empty()) {
    why->insert(why->end(), missing.begin(), missing.end());
    return nullptr;
  }
  std::vector<std::string> where;
  for (const std::string& p : {memory, cpu, pids}) {
    if (!p.empty()) where.push_back(p);
  }
  Confinement c{.memory = memory.empty() ? "" : "cgroup v1",
                .cpu = cpu.empty() ? "" : "cgroup v1 quota",
                .pids = pids.empty() ? "" : "cgroup v1",
                .why_not = absl::StrJoin(missing, "; "),
                .where = absl::StrJoin(where, " ")};
  return std::make_unique<CgroupV1Limiter>(memory, cpu, pids, std::move(c));
}

}  // namespace

const char* LimiterKindName(LimiterKind kind) {
  switch (kind) {
    case LimiterKind::kCgroupV2: return "cgroup-v2";
    case LimiterKind::kCgroupV1: return "cgroup-v1";
    case LimiterKind::kNone: return "none";
  }
  return "unknown";
}

std::string DescribeConfinement(const Confinement& c) {
  auto by = [](const std::string& how) { return how.empty() ? std::string("not enforced") : how; };
  std::string text = absl::StrCat("memory: ", by(c.memory), ", cpu: ", by(c.cpu), ", pids: ", by(c.pids));
  if (!c.why_not.empty()) absl::StrAppend(&text, " (", c.why_not, ")");
  return text;
}

EnforcedLimits EnforcedFor(const Confinement& c, const TaskLimits& l) {
  EnforcedLimits e{.memory_mb = l.memory_limit_mb, .vcores_milli = l.vcores_milli, .pids_max = l.pids_max};
  if (e.memory_mb > 0) e.memory_by = c.memory;
  if (e.vcores_milli > 0) e.cpu_by = c.cpu;
  if (e.pids_max > 0) e.pids_by = c.pids;
  bool unenforced = (e.memory_mb > 0 && e.memory_by.empty()) || (e.vcores_milli > 0 && e.cpu_by.empty()) ||
                    (e.pids_max > 0 && e.pids_by.empty());
  if (unenforced) e.why_not = c.why_not.empty() ? "no writable cgroup" : c.why_not;
  return e;
}

std::string CgroupSafeName(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  }
  return out;
}

ResourceLimiterPtr NewUnconfinedLimiter(std::string why) { return std::make_unique<UnconfinedLimiter>(std::move(why)); }

ResourceLimiterPtr DetectResourceLimiter(const LimiterOptions& options) {
  ResourceLimiterPtr limiter;
  std::vector<std::string> why;
  if (options.allow_v2) limiter = TryV2(options, &why);
  if (!limiter && options.allow_v1) limiter = TryV1(options, &why);
  if (!limiter) {
    limiter = NewUnconfinedLimiter(absl::StrCat("no writable cgroup: ", why.empty() ? "cgroups not used" : absl::StrJoin(why, "; ")));
  }
  const Confinement& c = limiter->confinement();
  bool all = !c.memory.empty() && !c.cpu.empty() && !c.pids.empty();
  Log(all ? LogLevel::kInfo : LogLevel::kWarning, kLimiterLog, "task confinement: %s%s%s", DescribeConfinement(c),
      c.where.empty() ? "" : "; task cgroups under ", c.where);
  if (limiter->kind() == LimiterKind::kNone) {
    Log(LogLevel::kWarning, kLimiterLog,
        "tasks on this node run unconfined: their memory, cpu and process limits are accounted by the scheduler "
        "but not enforced here (no rlimit stands in: RLIMIT_AS would kill correct programs that reserve address "
        "space); give the agent a writable cgroup (run it as root, or under systemd with Delegate=yes and the "
        "agent in a subgroup) to enforce them");
  }
  return limiter;
}

}  // namespace trainyard::agent
