#include "server/http/standby_door.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httpd/prometheus_text.h"
#include "httplib.h"

namespace trainyard::server::http {

absl::StatusOr<std::unique_ptr<StandbyDoor>> StandbyDoor::Open(httpd::HttpOptions options) {
  // Nothing here streams or proxies: no workers kept for those.
  options.max_log_streams = 0;
  options.max_watchers = 0;
  options.proxied_prefix.clear();
  options.trusted = nullptr;
  absl::StatusOr<std::unique_ptr<httpd::HttpServer>> bound = httpd::HttpServer::Bind(std::move(options));
  if (!bound.ok()) return bound.status();
  std::unique_ptr<StandbyDoor> door(new StandbyDoor(std::move(*bound)));
  StandbyDoor* self = door.get();
  httpd::HttpServer& http = *door->http_;
  http.Handle("GET", "/healthz", "/healthz",
              [](const httplib::Request&, httplib::Response& res) { res.set_content("standby\n", "text/plain"); });
  http.Handle("GET", "/readyz", "/readyz", [](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content("standby: this server does not serve; the leader does\n", "text/plain");
  });
  http.Handle("GET", "/metrics", "/metrics", [self](const httplib::Request&, httplib::Response& res) { self->Metrics(res); });
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    http.Handle(method, "/.*", "to the leader",
                [self](const httplib::Request& req, httplib::Response& res) { self->Send(req, res); });
  }
  http.Serve();
  return door;
}

StandbyDoor::StandbyDoor(std::unique_ptr<httpd::HttpServer> http)
    : http_(std::move(http)), since_unix_seconds_(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch())) {}

StandbyDoor::~StandbyDoor() { http_->Stop(); }

void StandbyDoor::SetLeader(const std::string& identity, const std::string& http_url) {
  absl::MutexLock lock(&mu_);
  leader_ = identity;
  leader_url_ = http_url;
}

void StandbyDoor::SetTakingOver() {
  absl::MutexLock lock(&mu_);
  taking_over_ = true;
  leader_url_.clear();
}

void StandbyDoor::Send(const httplib::Request& req, httplib::Response& res) {
  std::string leader, url;
  bool taking_over = false;
  {
    absl::MutexLock lock(&mu_);
    leader = leader_;
    url = leader_url_;
    taking_over = taking_over_;
  }
  // The leader's URL naming this very door (a loopback URL seen from the
  // same host's standby, or a stale one): no redirect to itself.
  if (!url.empty() && absl::EndsWith(url, "://" + http_->address())) url.clear();
  if (!url.empty()) {
    std::string location = url + req.target;  // the same path and query there
    res.status = 307;
    res.set_header("Location", location);
    httpd::SetJsonError(res, 307, absl::StrCat("this server is a standby; the leader serves at ", url, " (",
                                               location, ")"));
    return;
  }
  res.set_header("Retry-After", "1");
  std::string why = taking_over
                        ? std::string("this server is taking over as the leader and loads the state; try again")
                    : leader.empty()
                        ? std::string("this server is a standby and knows of no leader yet; try again")
                        : absl::StrCat("this server is a standby; the leader is ", leader,
                                       ", which has published no HTTP address (still loading its state, or its "
                                       "--http-listen has no host a caller can reach); try again");
  httpd::SetJsonError(res, 503, why);
}

void StandbyDoor::Metrics(httplib::Response& res) {
  std::string leader, url;
  {
    absl::MutexLock lock(&mu_);
    leader = leader_;
    url = leader_url_;
  }
  std::string out;
  httpd::PrometheusText w(&out);
  w.Gauge("trainyard_server_is_leader",
          "1 when this server leads (serves the API and schedules); 0 on a standby of an etcd store.", 0);
  w.Gauge("trainyard_standby_since_timestamp_seconds", "When this server started to wait as a standby (Unix seconds).",
          since_unix_seconds_);
  w.Family("trainyard_standby_leader_info", "gauge",
           "The leader this standby knows of: its gRPC address and the HTTP URL callers are sent to (\"\" when "
           "unknown).");
  w.Sample("trainyard_standby_leader_info",
           absl::StrCat("leader=\"", httpd::EscapeLabel(leader), "\",url=\"", httpd::EscapeLabel(url), "\""), 1);
  res.set_content(out, httpd::kMetricsContentType);
}

}  // namespace trainyard::server::http
