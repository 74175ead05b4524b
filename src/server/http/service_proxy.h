// The service proxy (docs/services.md): a service task's port reached
// through the server's HTTP listener at /proxy/GRANT/..., where GRANT is a
// link's grant (server/service_links.h), checked again on every request.
// The request goes on to the task's node address and service port with
// the prefix taken off (the service sees /... as the caller wrote it;
// X-Forwarded-Prefix names what was taken), without the caller's
// Authorization or cookies. The answer comes back whole (at most 64 MiB)
// inside a sandbox (Content-Security-Policy: sandbox), so a service's pages
// run in an origin of their own and cannot read the dashboard's token or
// act as its user. Requests under the prefix queue apart at the HTTP door
// (httpd's proxied_prefix, max_proxied), so a slow service never holds the
// threads the API and the dashboard need.
//
// Also the REST route that makes a link: POST /api/v1/jobs/{job}/service-link.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/http/http_server.h"
#include "server/http/rest_api.h"

namespace httplib {
class Client;
}

namespace trainyard::server::http {

// The paths the proxy serves (HttpOptions::proxied_prefix).
inline constexpr char kServiceProxyPrefix[] = "/proxy/";

struct ServiceProxyOptions {
  std::string scheme = "http";  // the listener's, told to services (X-Forwarded-Proto)
  absl::Duration connect_timeout = absl::Seconds(5);
  // For each read of the service's answer and each write of the request.
  absl::Duration timeout = absl::Seconds(30);
  // For the whole answer: past it the request is ended (504).
  absl::Duration total_timeout = absl::Minutes(2);
  int64_t max_answer_bytes = int64_t{64} << 20;
};

class ServiceProxy {
 public:
  // Registers /proxy/... (every method) and the link route on `server`.
  // REQUIRES: backend and server outlive the routes.
  static std::shared_ptr<ServiceProxy> Add(HttpServer& server, RestBackend* backend, ServiceProxyOptions options = {});

  // Ends the requests waiting for services now (and any that come later):
  // the server is stopping, and a service that does not answer must not
  // hold it up.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Answers `req` (a route of Add).
  void Serve(const httplib::Request& req, httplib::Response& res);

 private:
  ServiceProxy(RestBackend* backend, ServiceProxyOptions options) : backend_(backend), options_(std::move(options)) {}
  void Forward(const httplib::Request& req, const ServiceTarget& target, const std::string& path,
               const std::string& accept_encoding, httplib::Response& res);

  RestBackend* const backend_;
  const ServiceProxyOptions options_;
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  std::set<httplib::Client*> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace trainyard::server::http
