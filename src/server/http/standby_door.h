// StandbyDoor: what a standby server (one of several on an etcd store that
// does not lead) answers on its HTTP address, where the leader serves the
// REST API, the dashboard and /metrics. A standby holds no state, so it
// serves nothing of the cluster's; it sends callers to the leader:
//
//   - any request but the three below is answered 307 Temporary Redirect
//     to the same path and query at the leader's HTTP URL (the leader puts
//     it in etcd, Leadership::PublishHttpUrl): a browser opening the
//     dashboard on a standby lands on the leader's, a REST client that
//     follows redirects (curl -L) reaches it, its method and body kept.
//     While the leader's URL is unknown (a leader still loading its state,
//     one with a wildcard HTTP host, or this server taking over) the answer
//     is 503 with Retry-After: 1 and a JSON error that says so.
//   - GET /healthz: 200 "standby" (the process is alive and waiting);
//   - GET /readyz: 503 (it serves nothing: a load balancer that checks
//     /readyz sends every request to the leader, whose /readyz is 200);
//   - GET /metrics: trainyard_server_is_leader 0, since when it waits and
//     the leader it knows of, so a Prometheus that scrapes every server
//     sees exactly one 1 among them.
//
// These routes are public, as the leader's /healthz and /metrics are: they
// say nothing beyond who leads. The door is the same httpd::HttpServer, with
// its caps and deadlines, on the server's --http-listen (HTTPS as there);
// it is stopped before the leader's own HTTP API binds that address.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "httpd/http_server.h"

namespace trainyard::server::http {

class StandbyDoor {
 public:
  // Binds options.listen (errors as httpd::HttpServer::Bind) and serves.
  static absl::StatusOr<std::unique_ptr<StandbyDoor>> Open(httpd::HttpOptions options);
  ~StandbyDoor();

  // The leader now: its identity (the address it serves gRPC on) and its
  // HTTP URL (scheme://host:port, "" when it has published none).
  void SetLeader(const std::string& identity, const std::string& http_url) ABSL_LOCKS_EXCLUDED(mu_);
  // This server won and loads the state: callers are asked to come back.
  void SetTakingOver() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& address() const { return http_->address(); }

 private:
  explicit StandbyDoor(std::unique_ptr<httpd::HttpServer> http);
  void Send(const httplib::Request& req, httplib::Response& res) ABSL_LOCKS_EXCLUDED(mu_);
  void Metrics(httplib::Response& res) ABSL_LOCKS_EXCLUDED(mu_);

  std::unique_ptr<httpd::HttpServer> http_;
  const double since_unix_seconds_;
  absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  std::string leader_url_ ABSL_GUARDED_BY(mu_);
  bool taking_over_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace trainyard::server::http
