// The agent's /metrics (trainyard agent --http-listen): its tasks by state,
// spawn latency, each GPU's utilisation, memory and allocated share, its
// data dir's filesystem, log bytes written and HTTP requests, in the
// Prometheus text format. Every sample carries the node's name (`node`);
// GPU samples also `gpu`, the index, bounded by the node's GPUs. On
// simulated GPUs, which have no load of their own, utilisation is the share
// allocated and memory used at least that share of the GPU's memory, so a
// local cluster's dashboards move with its work. docs/metrics.md lists
// every metric.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_core.h"
#include "agent/gpu_discovery.h"
#include "agent/supervisor.h"
#include "httpd/http_server.h"

namespace trainyard::agent {

// The size and free space of a filesystem.
struct DiskSpace {
  int64_t free_bytes = 0;   // available to an unprivileged writer
  int64_t total_bytes = 0;
};

// The filesystem that holds `path`; nullopt when statvfs fails.
std::optional<DiskSpace> DiskSpaceOf(const std::string& path);

// Everything one scrape shows.
struct AgentMetricsInput {
  std::string node;
  std::string gpu_source;  // "nvml", "nvidia-smi", "simulated"
  std::vector<GpuInfo> gpus;
  SupervisorMetrics supervisor;
  std::optional<DiskSpace> data_dir;
  std::vector<httpd::HttpRequestCount> http_requests;
};

// Gathers the input from a running agent (no GPU is read: the last
// heartbeat's values).
AgentMetricsInput GatherAgentMetrics(const AgentCore& core);

// Renders `in` in the text format (version 0.0.4).
std::string RenderAgentMetrics(const AgentMetricsInput& in);

// Binds `listen` (host:port; a bare port is on 127.0.0.1) and serves
// GET /metrics and /healthz for `core`, which must outlive the server
// (Stop it, or destroy it, first). Errors name the flag, http-listen.
absl::StatusOr<std::unique_ptr<httpd::HttpServer>> ServeAgentMetrics(const std::string& listen,
                                                                     const AgentCore* core);

}  // namespace trainyard::agent
