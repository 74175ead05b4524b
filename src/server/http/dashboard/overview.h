// GET /api/v1/overview: the dashboard overview's figures, added up here
// from the published views rather than in the browser from every node and
// job (megabytes of JSON on a large cluster, for a page of a few numbers).
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "proto/service.pb.h"
#include "server/view_store.h"

namespace trainyard::server::http {

// A node's GPU model: no field of its own on the wire yet, so its label
// (gpu-model, gpu_model, gpu.model or gpu, the first present), else
// "unlabelled".
std::string GpuModelOf(const v1::NodeInfo& info);

// {"gpus": {total, allocated, free, excluded}, "nodes_by_state": {READY: n, ...},
//  "jobs_by_state": {QUEUED: n, ..., every state}, "gpus_by_model": [{model,
//  nodes, total, allocated, free, excluded}], "queues": the /api/v1/queues body,
//  "control_plane": {server_address, store, etcd_endpoints, leader_since_unix_ms,
//  leader_terms, leader_revision, leader_lease_ms, standbys, depositions:
//  [{reason, count, last_unix_ms, last_server, last_why}]} when
//  `control_plane` is given}.
nlohmann::json OverviewJson(const ViewStore& views, const v1::ClusterStatus* control_plane = nullptr);

}  // namespace trainyard::server::http
