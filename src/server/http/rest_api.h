// The REST API, /api/v1/...: the client verbs over HTTP with JSON
// (docs/api.md, docs/openapi.yaml). Reads come from the published views
// (ViewStore), never the server's lock or its store; submit and kill go
// through RestBackend, the same calls the gRPC API makes.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/service.pb.h"
#include "server/http/http_server.h"
#include "server/http/log_reader.h"
#include "server/service_links.h"
#include "server/stats.h"
#include "server/view_store.h"

namespace trainyard::server::http {

// What the REST API acts through (server.cc adapts the JobManager).
class RestBackend {
 public:
  using SubmitDone = std::function<void(absl::StatusOr<v1::SubmitResponse>)>;
  virtual ~RestBackend() = default;
  // The published views (jobs recovered at start-up published first).
  virtual const ViewStore& Views() = 0;
  // gRPC's Submit path (server/submission.h) for `who`: access, size
  // check, parse, validate, durable; `done` may run on another thread.
  virtual void Submit(const Principal& who, const v1::SubmitRequest& req, SubmitDone done) = 0;
  // gRPC's KillJob, with its check that `who` may kill the job
  // (PermissionDenied); answered once the end is durable.
  virtual absl::StatusOr<v1::JobState> Kill(const Principal& who, const std::string& job,
                                            const std::string& reason) = 0;
  // describe's view of a job recovered after a restart whose earlier events
  // are still only in the store (read there once).
  virtual absl::StatusOr<v1::JobView> Describe(const std::string& job) = 0;
  // OK when `who` may read job `job`'s logs (its owner, an administrator of
  // its queue, an admin); else PermissionDenied, or NotFound for no such
  // job. The log routes ask before they open anything.
  virtual absl::Status MayReadLogs(const Principal& /*who*/, const std::string& /*job*/) {
    return absl::OkStatus();
  }
  // A stream of task logs for `who`, as gRPC's Logs opens it (the log hub,
  // counted against who's streams): errors as LogHub::Open's (too many
  // streams, the server's or who's; no such job or task). A backend without
  // logs (a benchmark's) answers Unimplemented.
  virtual absl::StatusOr<LogReaderPtr> OpenLogs(const Principal& /*who*/, const v1::LogsRequest& /*request*/) {
    return absl::UnimplementedError("this server serves no task logs");
  }
  // The log hub's counts (streams, subscriptions, refusals) for /metrics.
  virtual LogHubStats LogStats() { return {}; }
  // The exec relay's counts for /metrics.
  virtual ExecRelayStats ExecStats() { return {}; }
  // A link to a service task's port through the proxy for `who`, as gRPC's
  // ServiceLink makes it (the job's owner or a cluster admin).
  virtual absl::StatusOr<v1::ServiceLinkResponse> ServiceLink(const Principal& /*who*/,
                                                              const v1::ServiceLinkRequest& /*req*/) {
    return absl::UnimplementedError("this server proxies no services");
  }
  // Where a request under /proxy/GRANT goes (ServiceLinks::Resolve).
  virtual absl::StatusOr<ServiceTarget> ResolveService(absl::string_view /*grant*/) {
    return absl::UnimplementedError("this server proxies no services");
  }
  // Accounting for `who` (counted under rateLimits.listJobs), as gRPC's
  // History and Usage answer; a backend without it answers Unimplemented.
  virtual absl::StatusOr<v1::HistoryResponse> History(const Principal& /*who*/, const v1::HistoryRequest& /*req*/) {
    return absl::UnimplementedError("this server keeps no accounting");
  }
  virtual absl::StatusOr<v1::UsageResponse> Usage(const Principal& /*who*/, const v1::UsageRequest& /*req*/) {
    return absl::UnimplementedError("this server keeps no accounting");
  }
  // A job's task resource samples for `who`, as gRPC's JobResources
  // answers (counted under rateLimits.listJobs).
  virtual absl::StatusOr<v1::JobResourcesResponse> JobResources(const Principal& /*who*/,
                                                                const v1::JobResourcesRequest& /*req*/) {
    return absl::UnimplementedError("this server keeps no task samples");
  }
  // Who leads the control plane, as `trainyard status` shows it (the
  // overview's "control_plane"); nullopt for a backend that does not know.
  virtual std::optional<v1::ClusterStatus> ControlPlane() { return std::nullopt; }
};

// Registers every /api/v1 route (the log routes of log_routes.h and the
// watch of watch.h too), plus /healthz. REQUIRES: backend outlives server.
void AddRestRoutes(HttpServer& server, RestBackend* backend);

// The HTTP status for an absl status code (InvalidArgument 400, NotFound
// 404, Unavailable 503, ...).
int HttpStatusOf(absl::StatusCode code);

// Sets `res` to the JSON error for `st`: its HTTP status, the message and
// the gRPC code name (INVALID_ARGUMENT), which a client can compare with
// what the gRPC API answers.
void SetStatusError(httplib::Response& res, const absl::Status& st);

// Sets `res` to `body` as JSON with `status` (strings not valid UTF-8 are
// written with replacement characters).
void SetJson(httplib::Response& res, const nlohmann::json& body, int status = 200);

}  // namespace trainyard::server::http
