// The overview's figures from the published views (see overview.h).
#include "server/http/dashboard/overview.h"

#include <map>

#include "api/states.h"
#include "server/http/json_views.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

json CountsJson(const GpuCounts& c) {
  // Shares as fractions: a GPU with a 0.25 share is 0.25 allocated, 0.75 free.
  return {{"total", c.total}, {"allocated", c.AllocatedGpus()}, {"free", c.FreeGpus()}, {"excluded", c.excluded}};
}

}  // namespace

std::string GpuModelOf(const v1::NodeInfo& info) {
  for (const char* key : {"gpu-model", "gpu_model", "gpu.model", "gpu"}) {
    auto it = info.labels().find(key);
    if (it != info.labels().end() && !it->second.empty()) return it->second;
  }
  return "unlabelled";
}

json OverviewJson(const ViewStore& views, const v1::ClusterStatus* control_plane) {
  GpuCounts all;
  std::map<std::string, int> nodes_by_state;
  std::map<std::string, std::pair<int, GpuCounts>> by_model;  // model -> (nodes, GPUs)
  for (const ViewStore::NodeEntry& n : *views.Nodes()) {
    GpuCounts c = GpuCountsOf(*n.view);
    all.Add(c);
    ++nodes_by_state[NodeStateName(n.view->info().state())];
    auto& [count, gpus] = by_model[GpuModelOf(n.view->info())];
    ++count;
    gpus.Add(c);
  }
  json jobs_by_state = json::object();
  for (v1::JobState s : api::JobStates()) jobs_by_state[api::JobStateName(s)] = 0;
  for (const auto& [key, count] : views.StateCounts().jobs) {
    jobs_by_state[api::JobStateName(key.second)] = jobs_by_state[api::JobStateName(key.second)].get<int64_t>() + count;
  }
  json models = json::array();
  for (const auto& [model, entry] : by_model) {
    json m = CountsJson(entry.second);
    m["model"] = model;
    m["nodes"] = entry.first;
    models.push_back(std::move(m));
  }
  json out = {{"gpus", CountsJson(all)},
              {"nodes_by_state", nodes_by_state},
              {"jobs_by_state", std::move(jobs_by_state)},
              {"gpus_by_model", std::move(models)},
              {"queues", QueuesJson(*views.Queues(), views.Jobs(false))}};
  if (control_plane != nullptr) {
    const v1::ClusterStatus& c = *control_plane;
    out["control_plane"] = {
        {"server_address", c.server_address()},
        {"store", c.store()},
        {"etcd_endpoints", std::vector<std::string>(c.etcd_endpoints().begin(), c.etcd_endpoints().end())},
        {"leader_since_unix_ms", c.leader_since_unix_ms()},
        {"leader_terms", c.leader_terms()},
        {"leader_revision", c.leader_revision()},
        {"leader_lease_ms", c.leader_lease_ms()},
        {"standbys", std::vector<std::string>(c.standbys().begin(), c.standbys().end())}};
    json depositions = json::array();
    for (const v1::LeaderDeposition& d : c.depositions()) {
      depositions.push_back({{"reason", d.reason()},
                             {"count", d.count()},
                             {"last_unix_ms", d.last_unix_ms()},
                             {"last_server", d.last_server()},
                             {"last_why", d.last_why()}});
    }
    out["control_plane"]["depositions"] = std::move(depositions);
  }
  return out;
}

}  // namespace trainyard::server::http
