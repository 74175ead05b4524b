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

// Which tasks (of which jobs) hold each GPU of a node: node -> (gpu index ->
// holders), from the live jobs' placed tasks. A whole GPU has one holder, a
// GPU split into shares one per share, in the jobs' order.
struct GpuHolder {
  std::string task;
  std::string job;
};
using NodeGpuHolders = std::map<int, std::vector<GpuHolder>>;
using GpuHolders = std::map<std::string, NodeGpuHolders>;
GpuHolders GpuHoldersOf(const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs);
// Adds the holders of `task` (a task of `job`) to `out`.
void AddGpuHolders(const v1::TaskView& task, const std::string& job, GpuHolders* out);

// A node: capacity, free, each GPU's state (free, used, excluded), the share
// of it held (used_milli: 1000 for a whole GPU, the shares' sum for a split
// one) and every task holding it (holders; task and job name the first),
// topology groups, labels, state.
nlohmann::json NodeJson(const v1::NodeView& node, const NodeGpuHolders& holders);

// What one user holds in one queue, from its live jobs.
struct UserUse {
  int running_jobs = 0;
  int pending_jobs = 0;
  int64_t memory_mb = 0;
  int64_t vcores_milli = 0;
  int gpus = 0;            // whole GPUs held, as the queue's used.gpus counts them
  int64_t gpu_milli = 0;   // GPU share held in thousandths: whole GPUs and shares
};
// queue -> user -> use, from the live jobs' placed tasks.
using UseByQueue = std::map<std::string, std::map<std::string, UserUse>>;
UseByQueue UseByQueueAndUser(const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs);

// Every queue with its capacity, use, pending jobs, and the same per user
// (from the live jobs); the cluster's total. A queue's and a user's
// used.gpus are the whole GPUs their tasks hold; used.gpu_milli all the GPU
// share they hold in thousandths, whole GPUs 1000 each and a 0.25 share 250,
// so a share counts as its fraction.
nlohmann::json QueuesJson(const v1::ListQueuesResponse& queues,
                          const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs);

// A node's GPU counts: allocated to tasks, free, excluded (busy with
// processes Trainyard did not start). They add up to its GPU count; a GPU
// holding any share is allocated. allocated_milli is the GPU share held in
// thousandths (whole GPUs 1000 each, a 0.25 share 250), what the gauges
// and the dashboard count as used.
struct GpuCounts {
  int total = 0;
  int allocated = 0;
  int free = 0;
  int excluded = 0;
  int64_t allocated_milli = 0;
  // GPU share not held nor excluded in thousandths, the free part of split
  // GPUs included.
  int64_t FreeMilli() const { return int64_t{1000} * (total - excluded) - allocated_milli; }
  // GPUs held, shares as fractions: allocated_milli / 1000.
  double AllocatedGpus() const { return allocated_milli / 1000.0; }
  // GPUs not held nor excluded, shares as fractions: FreeMilli() / 1000.
  double FreeGpus() const { return FreeMilli() / 1000.0; }
  // Adds `c`'s counts. Sums stay integer thousandths, divided once by
  // AllocatedGpus / FreeGpus, so 0.1 + 0.2 of a GPU reads 0.3 exactly.
  void Add(const GpuCounts& c) {
    total += c.total;
    allocated += c.allocated;
    free += c.free;
    excluded += c.excluded;
    allocated_milli += c.allocated_milli;
  }
};
GpuCounts GpuCountsOf(const v1::NodeView& node);
// The node's GPUs out of service, "excluded" in the views: busy with
// others' processes (NodeInfo.excluded_gpus), faulty (api::FaultyGpus), or
// cordoned by an admin (NodeView.cordoned_gpus).
uint64_t OutOfServiceGpus(const v1::NodeView& node);

// The short state names: "READY", "LOST", "DRAINING", "CORDONED".
std::string NodeStateName(v1::NodeState s);

}  // namespace trainyard::server::http
