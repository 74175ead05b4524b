// The REST API's JSON for the published views: jobs with their tasks and
// events, nodes with their GPU bitmaps by topology, queues with their use
// per user. docs/openapi.yaml describes each shape; field names are the
// proto's (snake_case), states are the short names the CLI prints
// (RUNNING, READY), GPU sets are lists of GPU indices.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "proto/service.pb.h"

namespace trainyard::server::http {

// GPU indices of the set bits of `mask`, ascending.
std::vector<int> GpuList(uint64_t mask);

// A job; with `with_events` its event log too (describe's view).
nlohmann::json JobJson(const v1::JobView& job, bool with_events);

// Which task (of which job) holds each GPU of a node: node -> (gpu index ->
// holder), from the live jobs' placed tasks.
struct GpuHolder {
  std::string task;
  std::string job;
};
using GpuHolders = std::map<std::string, std::map<int, GpuHolder>>;
GpuHolders GpuHoldersOf(const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs);

// A node: capacity, free, each GPU's state (free, used, excluded) and the
// task and job holding it, topology groups, labels, state.
nlohmann::json NodeJson(const v1::NodeView& node, const std::map<int, GpuHolder>& holders);

// Every queue with its capacity, use, pending jobs, and the same per user
// (from the live jobs); the cluster's total. A user's "gpus" are the whole
// GPUs its tasks hold (as the queue's), "gpu_milli" all the GPU share they
// hold in thousandths, a 0.25 share counting 250 (never a whole GPU).
nlohmann::json QueuesJson(const v1::ListQueuesResponse& queues,
                          const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs);

// A node's GPU counts: allocated to tasks, free, excluded (busy with
// processes Trainyard did not start). They add up to its GPU count.
struct GpuCounts {
  int total = 0;
  int allocated = 0;
  int free = 0;
  int excluded = 0;
};
GpuCounts GpuCountsOf(const v1::NodeView& node);

// The short state names: "READY", "LOST", "DRAINING", "CORDONED".
std::string NodeStateName(v1::NodeState s);

}  // namespace trainyard::server::http
