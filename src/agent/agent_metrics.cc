// The agent's /metrics (see agent_metrics.h). Names follow Prometheus'
// conventions: trainyard_agent_ prefix, base units (seconds, bytes, ratios
// of 1), _total for counters.
#include "agent/agent_metrics.h"

#include <sys/statvfs.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "httpd/prometheus_text.h"

namespace trainyard::agent {
namespace {

using httpd::EscapeLabel;
using httpd::PrometheusText;

constexpr int64_t kMiB = int64_t{1} << 20;

void Tasks(PrometheusText& w, const std::string& node, const SupervisorMetrics& m) {
  w.Family("trainyard_agent_tasks", "gauge",
           "Tasks the agent holds, by state (ended ones until the server lets them go).");
  for (int s = 0; s < static_cast<int>(m.tasks_by_state.size()); ++s) {
    w.Sample("trainyard_agent_tasks",
             absl::StrCat(node, ",state=\"", TaskStateName(static_cast<TaskState>(s)), "\""), m.tasks_by_state[s]);
  }
  w.Hist("trainyard_agent_task_spawn_duration_seconds",
         "From a task attempt falling due (its launch order, or its restart time) to its process running.",
         m.spawn_seconds, node);
  w.Family("trainyard_agent_log_written_bytes_total", "counter",
           "Bytes of task logs written since the agent started (stdout and stderr, time stamps included).");
  w.Sample("trainyard_agent_log_written_bytes_total", node, static_cast<double>(m.log_bytes_written));
  w.Family("trainyard_agent_task_dirs_reclaimed_total", "counter",
           "Finished tasks' work dirs removed after --task-dir-retention since the agent started.");
  w.Sample("trainyard_agent_task_dirs_reclaimed_total", node, static_cast<double>(m.task_dirs_reclaimed));
  w.Family("trainyard_agent_task_dirs_reclaimed_bytes_total", "counter",
           "Disk space those removals freed since the agent started.");
  w.Sample("trainyard_agent_task_dirs_reclaimed_bytes_total", node, static_cast<double>(m.task_dirs_reclaimed_bytes));
}

void Gpus(PrometheusText& w, const std::string& node, const AgentMetricsInput& in) {
  bool simulated = in.gpu_source == "simulated";
  std::string allocated, utilization, used, total;
  for (const GpuInfo& g : in.gpus) {
    if (g.index < 0 || g.index >= core::kMaxGpus) continue;
    std::string labels = absl::StrCat(node, ",gpu=\"", g.index, "\"");
    double share = std::min(1000, in.supervisor.gpu_milli[g.index]) / 1000.0;
    double busy = simulated ? share : g.utilization_percent / 100.0;
    int64_t used_mb = simulated ? std::max(g.memory_used_mb, static_cast<int64_t>(share * g.memory_total_mb))
                                : g.memory_used_mb;
    absl::StrAppend(&allocated, "trainyard_agent_gpu_allocated_ratio{", labels, "} ", httpd::MetricNumber(share), "\n");
    if (busy >= 0) {
      absl::StrAppend(&utilization, "trainyard_agent_gpu_utilization_ratio{", labels, "} ", httpd::MetricNumber(busy),
                      "\n");
    }
    absl::StrAppend(&used, "trainyard_agent_gpu_memory_used_bytes{", labels, "} ", used_mb * kMiB, "\n");
    absl::StrAppend(&total, "trainyard_agent_gpu_memory_total_bytes{", labels, "} ", g.memory_total_mb * kMiB, "\n");
  }
  w.Family("trainyard_agent_gpus", "gauge", "GPUs of the node, by how the agent finds them (nvml, nvidia-smi, simulated).");
  w.Sample("trainyard_agent_gpus", absl::StrCat(node, ",source=\"", EscapeLabel(in.gpu_source), "\""),
           static_cast<double>(in.gpus.size()));
  w.Family("trainyard_agent_gpu_allocated_ratio", "gauge",
           "Share of the GPU allocated to tasks that have not ended: 1 for a whole GPU, the sum of the shares on a "
           "shared one.");
  w.Raw(allocated);
  w.Family("trainyard_agent_gpu_utilization_ratio", "gauge",
           "Time the GPU was busy over the driver's last sample (0..1); on simulated GPUs, the share allocated. "
           "Absent where the driver does not say.");
  w.Raw(utilization);
  w.Family("trainyard_agent_gpu_memory_used_bytes", "gauge",
           "GPU memory in use (on simulated GPUs at least the allocated share of it).");
  w.Raw(used);
  w.Family("trainyard_agent_gpu_memory_total_bytes", "gauge", "GPU memory in all.");
  w.Raw(total);
}

void Disk(PrometheusText& w, const std::string& node, const std::optional<DiskSpace>& disk) {
  w.Family("trainyard_agent_data_dir_free_bytes", "gauge",
           "Space left to the agent on the filesystem of its data dir (logs, work and checkpoint dirs).");
  if (disk) w.Sample("trainyard_agent_data_dir_free_bytes", node, static_cast<double>(disk->free_bytes));
  w.Family("trainyard_agent_data_dir_size_bytes", "gauge", "Size of the filesystem of the agent's data dir.");
  if (disk) w.Sample("trainyard_agent_data_dir_size_bytes", node, static_cast<double>(disk->total_bytes));
}

void Requests(PrometheusText& w, const std::string& node, const std::vector<httpd::HttpRequestCount>& requests) {
  w.Family("trainyard_agent_http_requests_total", "counter",
           "HTTP requests the agent answered, by method, route and status code.");
  for (const httpd::HttpRequestCount& r : requests) {
    w.Sample("trainyard_agent_http_requests_total",
             absl::StrCat(node, ",method=\"", EscapeLabel(r.method), "\",route=\"", EscapeLabel(r.route),
                          "\",code=\"", r.code, "\""),
             static_cast<double>(r.count));
  }
}

}  // namespace

std::optional<DiskSpace> DiskSpaceOf(const std::string& path) {
  struct statvfs s {};
  if (statvfs(path.c_str(), &s) != 0) return std::nullopt;
  return DiskSpace{.free_bytes = static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize),
                   .total_bytes = static_cast<int64_t>(s.f_blocks) * static_cast<int64_t>(s.f_frsize)};
}

AgentMetricsInput GatherAgentMetrics(const AgentCore& core) {
  AgentMetricsInput in;
  in.node = core.node_info().name;
  in.gpu_source = core.node_info().gpu_source;
  in.gpus = core.LastGpus();
  in.supervisor = core.supervisor().Metrics();
  in.data_dir = DiskSpaceOf(core.data_dir());
  return in;
}

std::string RenderAgentMetrics(const AgentMetricsInput& in) {
  std::string out;
  out.reserve(8192 + in.gpus.size() * 400);
  PrometheusText w(&out);
  std::string node = absl::StrCat("node=\"", EscapeLabel(in.node), "\"");
  Tasks(w, node, in.supervisor);
  Gpus(w, node, in);
  Disk(w, node, in.data_dir);
  Requests(w, node, in.http_requests);
  return out;
}

}  // namespace trainyard::agent
