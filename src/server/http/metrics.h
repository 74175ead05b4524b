// /metrics: the server in the Prometheus text format (version 0.0.4).
// Everything comes from what is already published: job and task counts by
// state and the node and queue views (ViewStore), the counters the shell
// publishes with them (PublishedStats), and the request counters of the
// two APIs. Rendering walks the nodes once; nothing here takes the
// server's lock or calls its store. docs/api.md lists every metric.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/api_counters.h"
#include "server/connection_guard.h"
#include "server/stats.h"
#include "server/master_metrics.h"
#include "server/user_rate_limiter.h"
#include "httpd/prometheus_text.h"
#include "server/http/http_server.h"
#include "server/http/rest_api.h"
#include "server/view_store.h"

namespace trainyard::server::http {

struct MetricsSources {
  const ViewStore* views = nullptr;
  const GrpcCounters* grpc = nullptr;           // may be null
  JobMasterMetrics* masters = nullptr;          // may be null
  std::vector<HttpRequestCount> http_requests;  // answered so far
  absl::Time now;                               // for heartbeat ages
  ConnectionGuardStats connections;             // the client gRPC listener's connections
  ConnectionGuardStats agent_connections;       // the agent gRPC listener's
  const UserRateLimiter* limits = nullptr;      // may be null
  httpd::HttpConnectionStats http_connections;  // the HTTP door's
  LogHubStats logs;                             // `logs` streams and their refusals
  ExecRelayStats exec;                          // `exec` sessions
  // The control plane's own part (RestBackend::ControlPlane): with etcd,
  // the leaders deposed so far.
  std::optional<v1::ClusterStatus> control_plane;
};

std::string RenderMetrics(const MetricsSources& sources);

// Registers GET /metrics on `server`, rendered from `backend`'s views, the
// gRPC API's counters (`grpc`, may be null), the job masters' summed
// figures (`masters`, may be null), the per-user rate limits' refusals
// (`limits`, may be null) and the server's own.
// REQUIRES: backend, grpc, masters, limits and server outlive the route.
void AddMetricsRoute(HttpServer& server, RestBackend* backend, const GrpcCounters* grpc,
                     JobMasterMetrics* masters = nullptr, const UserRateLimiter* limits = nullptr);

// The Prometheus text format's content type.
using httpd::kMetricsContentType;

}  // namespace trainyard::server::http
