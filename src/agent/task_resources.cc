#include "agent/task_resources.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace trainyard::agent {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

int64_t TicksPerSecond() {
  static const int64_t ticks = [] {
    long t = sysconf(_SC_CLK_TCK);
    return t > 0 ? static_cast<int64_t>(t) : int64_t{100};
  }();
  return ticks;
}

int64_t PageBytes() {
  static const int64_t bytes = [] {
    long b = sysconf(_SC_PAGESIZE);
    return b > 0 ? static_cast<int64_t>(b) : int64_t{4096};
  }();
  return bytes;
}

}  // namespace

ProcessTable ProcessTable::Read(const std::string& proc_root) {
  ProcessTable table;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return table;
  while (struct dirent* e = readdir(dir)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    std::string stat = ReadSmallFile(proc_root + "/" + e->d_name + "/stat");
    // "PID (COMM) STATE PPID ...": the command may hold spaces and parens,
    // so the fields are counted from the last ')'.
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<absl::string_view> f = absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
    // f[0] is field 3 (state): field N is f[N - 3].
    if (f.size() < 22) continue;
    Proc p;
    int64_t utime = 0, stime = 0, cutime = 0, cstime = 0;
    if (!absl::SimpleAtoi(f[1], &p.ppid) || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime) ||
        !absl::SimpleAtoi(f[13], &cutime) || !absl::SimpleAtoi(f[14], &cstime) ||
        !absl::SimpleAtoi(f[21], &p.rss_pages)) {
      continue;
    }
    p.cpu_ticks = utime + stime + cutime + cstime;
    table.procs_[pid] = p;
    table.children_.emplace(p.ppid, pid);
  }
  closedir(dir);
  return table;
}

ProcessTable::TreeUse ProcessTable::Tree(pid_t root) const {
  TreeUse use;
  if (procs_.find(root) == procs_.end()) return use;
  // A living process's cutime/cstime count only the children it reaped,
  // which are no longer in the table: nothing is counted twice.
  std::vector<pid_t> stack = {root};
  int64_t ticks = 0, pages = 0;
  while (!stack.empty() && use.processes < 100000) {
    pid_t pid = stack.back();
    stack.pop_back();
    auto it = procs_.find(pid);
    if (it == procs_.end()) continue;
    ++use.processes;
    ticks += it->second.cpu_ticks;
    pages += it->second.rss_pages;
    auto [b, e] = children_.equal_range(pid);
    for (auto c = b; c != e; ++c) {
      if (c->second != pid) stack.push_back(c->second);
    }
  }
  use.cpu_ns = ticks * (1000000000 / TicksPerSecond());
  use.rss_bytes = pages * PageBytes();
  return use;
}

std::vector<ResourceSample> TaskResourceSampler::Sample(const std::vector<ResourceTarget>& targets,
                                                        const ResourceLimiter& limiter,
                                                        const std::vector<GpuInfo>& gpus, bool simulated,
                                                        absl::Time now) {
  // Thousandths of each GPU held by the targets, to apportion its load.
  std::map<int, int64_t> held;
  for (const ResourceTarget& t : targets) {
    for (int g : t.gpus.Indices()) held[g] += t.gpu_milli > 0 ? t.gpu_milli : 1000;
  }
  std::optional<ProcessTable> procs;  // read once, when some target needs it
  std::map<std::pair<TaskKey, int>, Last> seen;
  std::vector<ResourceSample> out;
  out.reserve(targets.size());
  for (const ResourceTarget& t : targets) {
    ResourceSample s{.key = t.key, .attempt = t.attempt, .job_id = t.job_id, .time = now};
    s.memory_limit_bytes = t.memory_limit_mb << 20;
    CgroupUsage use = t.cgroup.empty() ? CgroupUsage{} : limiter.Usage(t.cgroup);
    s.source = use.source;
    if ((!use.cpu_ns || !use.memory_bytes) && t.pid > 0) {
      if (!procs) procs = ProcessTable::Read(proc_root_);
      ProcessTable::TreeUse tree = procs->Tree(t.pid);
      if (tree.processes == 0 && !use.cpu_ns && !use.memory_bytes) continue;  // it just ended
      if (!use.cpu_ns) use.cpu_ns = tree.cpu_ns;
      if (!use.memory_bytes) use.memory_bytes = tree.rss_bytes;
      s.source = s.source.empty() ? "process tree" : s.source + " and process tree";
    }
    s.memory_bytes = use.memory_bytes.value_or(0);
    int64_t cpu_ns = use.cpu_ns.value_or(0);
    auto key = std::make_pair(t.key, t.attempt);
    // Since the last sample; the first since the attempt started. Not known
    // (0 this once): an adopted attempt's start, or a count that went back.
    std::optional<Last> since;
    if (auto it = last_.find(key); it != last_.end()) {
      if (it->second.cpu_ns <= cpu_ns) since = it->second;
    } else if (t.started != absl::InfinitePast() && t.started < now) {
      since = Last{.cpu_ns = 0, .at = t.started};
    }
    if (since) {
      double wall_ns = absl::ToDoubleNanoseconds(now - since->at);
      if (wall_ns > 0) {
        double milli = static_cast<double>(cpu_ns - since->cpu_ns) * 1000.0 / wall_ns;
        s.cpu_milli = static_cast<int32_t>(std::clamp(milli, 0.0, static_cast<double>(1 << 24)));
      }
    }
    seen[key] = Last{.cpu_ns = cpu_ns, .at = now};

    int64_t mine = t.gpu_milli > 0 ? t.gpu_milli : 1000;
    int64_t busy = 0, memory_mb_milli = 0;
    bool known = true;
    for (int g : t.gpus.Indices()) {
      auto info = std::find_if(gpus.begin(), gpus.end(), [g](const GpuInfo& i) { return i.index == g; });
      int64_t all = std::max<int64_t>(held[g], mine);
      if (info == gpus.end()) continue;
      if (simulated) {  // no load of its own: busy for the share held, its memory at least that share
        busy += mine;
        int64_t used_mb = std::max(info->memory_used_mb, info->memory_total_mb * std::min<int64_t>(all, 1000) / 1000);
        memory_mb_milli += used_mb * 1000 * mine / all;
        continue;
      }
      if (info->utilization_percent >= 0) {
        busy += info->utilization_percent * 10 * mine / all;
      } else {
        known = false;  // MIG, or a driver that does not tell
      }
      memory_mb_milli += info->memory_used_mb * 1000 * mine / all;
    }
    s.gpu_busy_milli = known ? static_cast<int32_t>(std::min<int64_t>(busy, 1 << 24)) : -1;
    s.gpu_memory_bytes = (memory_mb_milli << 20) / 1000;
    out.push_back(std::move(s));
  }
  last_ = std::move(seen);
  return out;
}

}  // namespace trainyard::agent
