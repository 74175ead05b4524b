// The service proxy (see service_proxy.h).
#include "server/http/service_proxy.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace trainyard::server::http {

namespace {

using nlohmann::json;

// Whether header field `name` is one of `names` (lower case).
bool OneOf(const std::string& name, std::initializer_list<const char*> names) {
  std::string lower = absl::AsciiStrToLower(name);
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return lower == n; });
}

// Fields that describe one connection (RFC 9110 7.6.1), those the proxy
// sets itself, and what must not reach the other side: the caller's token
// (the dashboard's) and cookies (every service shares the server's origin,
// so one service's cookies would reach another's pages).
bool DroppedRequestField(const std::string& name) {
  return OneOf(name, {"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer",
                      "transfer-encoding", "upgrade", "host", "content-length", "authorization", "cookie", "expect",
                      "forwarded", "x-real-ip", "accept-encoding", "remote_addr", "remote_port", "local_addr",
                      "local_port", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto",
                      "x-forwarded-prefix"});
}

// Besides the fields of one connection and cookies: what would act on the
// dashboard's whole origin (its storage cleared, its transport pinned).
bool DroppedAnswerField(const std::string& name) {
  return OneOf(name, {"connection", "keep-alive", "transfer-encoding", "content-length", "trailer", "upgrade",
                      "set-cookie", "set-cookie2", "proxy-authenticate", "clear-site-data",
                      "strict-transport-security", "alt-svc", "public-key-pins", "expect-ct"});
}

// What every proxied answer carries: the sandbox (an origin of its own: no
// access to the dashboard's storage or its user's rights), no referrer (the
// grant is in the address), no sniffing; and, for a sandboxed page's own
// requests (from an opaque origin), leave to read the answer.
constexpr char kSandbox[] = "sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals";

void SetProxyFields(httplib::Response& res) {
  res.set_header("Content-Security-Policy", kSandbox);
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (!res.has_header("Access-Control-Allow-Origin")) res.set_header("Access-Control-Allow-Origin", "*");
  if (!res.has_header("Cache-Control")) res.set_header("Cache-Control", "private");
}

void ProxyError(httplib::Response& res, const absl::Status& st) {
  SetStatusError(res, st);
  SetProxyFields(res);
}

// The service's Location, as the caller must follow it: a path on the
// service's own root ("/x") is under the proxy's prefix (unless the service
// put it there itself, from X-Forwarded-Prefix); an address on the
// service's own host and port (it knows itself by those) likewise.
std::string RewriteLocation(const std::string& location, const ServiceTarget& target) {
  absl::string_view rest = location;
  const std::string self = absl::StrCat("http://", target.host, ":", target.port);
  if (absl::ConsumePrefix(&rest, self) && (rest.empty() || rest[0] == '/' || rest[0] == '?')) {
    return absl::StrCat(target.prefix, rest.empty() || rest[0] != '/' ? "/" : "", rest);
  }
  if (!absl::StartsWith(location, "/") || absl::StartsWith(location, "//")) return location;
  if (location == target.prefix || absl::StartsWith(location, target.prefix + "/")) return location;
  return target.prefix + location;
}

// The path as the caller wrote it (still percent-encoded: the service
// decodes it once) after /proxy/GRANT, with its query: "" when the target
// ends at the grant. Nullopt for a target no request line should hold
// (spaces, control characters).
std::optional<std::string> RawRest(const std::string& target, size_t grant_end) {
  for (unsigned char ch : target) {
    if (ch <= 0x20 || ch == 0x7f) return std::nullopt;
  }
  return target.substr(std::min(grant_end, target.size()));
}

void MakeLink(RestBackend* b, const Principal& who, const httplib::Request& req, httplib::Response& res) {
  v1::ServiceLinkRequest link;
  link.set_job(req.matches[1]);
  if (!req.body.empty()) {
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object()) {
      return SetStatusError(res, absl::InvalidArgumentError("body: not a JSON object ({\"role\": ..., \"index\": ...})"));
    }
    if (body.contains("role")) {
      if (!body["role"].is_string()) return SetStatusError(res, absl::InvalidArgumentError("role: not a string"));
      link.set_role(body["role"].get<std::string>());
    }
    if (body.contains("index")) {
      if (!body["index"].is_number_integer() || body["index"].get<int64_t>() < 0 ||
          body["index"].get<int64_t>() > 1000000) {
        return SetStatusError(res, absl::InvalidArgumentError("index: not a task index (0 or more)"));
      }
      link.set_index(body["index"].get<int32_t>());
    }
  }
  absl::StatusOr<v1::ServiceLinkResponse> r = b->ServiceLink(who, link);
  if (!r.ok()) return SetStatusError(res, r.status());
  SetJson(res, {{"path", r->path()}, {"expires_unix_ms", r->expires_unix_ms()}, {"node", r->node()},
                {"port", r->port()}});
}

}  // namespace

std::shared_ptr<ServiceProxy> ServiceProxy::Add(HttpServer& s, RestBackend* b, ServiceProxyOptions options) {
  std::shared_ptr<ServiceProxy> proxy(new ServiceProxy(b, std::move(options)));
  // GRANT, then the path on the service ("" when the address ends at the
  // grant: redirected to GRANT/).
  const std::string pattern = absl::StrCat(kServiceProxyPrefix, "([A-Za-z0-9._=-]+)(/.*)?");
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    s.Handle(method, pattern, "/proxy/{grant}/...",
             [proxy](const httplib::Request& req, httplib::Response& res, const Principal&) { proxy->Serve(req, res); });
  }
  s.Handle("POST", "/api/v1/jobs/([^/]+)/service-link", "/api/v1/jobs/{job}/service-link",
           [b](const httplib::Request& req, httplib::Response& res, const Principal& who) { MakeLink(b, who, req, res); });
  return proxy;
}

void ServiceProxy::Stop() {
  stopping_ = true;
  // A client still connecting has no socket to shut down yet: stopped
  // again each round until every request has ended (each checks
  // stopping_ as its answer comes), or a few seconds passed.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::MutexLock lock(&mu_);
  for (;;) {
    for (httplib::Client* c : in_flight_) c->stop();
    if (in_flight_.empty() || absl::Now() > deadline) return;
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](std::set<httplib::Client*>* s) { return s->empty(); }, &in_flight_),
                         absl::Milliseconds(20));
  }
}

void ServiceProxy::Serve(const httplib::Request& req, httplib::Response& res) {
  // The service's answer goes back as it came (its encoding and its byte
  // ranges too): the caller's Accept-Encoding and Range are the service's
  // to answer, not this server's.
  const std::string accept_encoding = req.get_header_value("Accept-Encoding");
  HttpServer::NoCompression(req);
  const_cast<httplib::Request&>(req).ranges.clear();
  const std::string grant = req.matches[1];
  // The route matched the decoded path; the door queued the request by its
  // target as sent. Both must be /proxy/GRANT as it is, or the request
  // could pass the door as another and the path go on misplaced.
  if (!absl::StartsWith(req.target, absl::StrCat(kServiceProxyPrefix, grant))) {
    return ProxyError(res, absl::InvalidArgumentError(absl::StrCat(
                               "the address must begin with ", kServiceProxyPrefix, "GRANT as the link gave it, "
                               "not percent-encoded")));
  }
  absl::StatusOr<ServiceTarget> target = backend_->ResolveService(grant);
  if (!target.ok()) return ProxyError(res, target.status());
  std::optional<std::string> rest = RawRest(req.target, std::strlen(kServiceProxyPrefix) + grant.size());
  if (!rest) return ProxyError(res, absl::InvalidArgumentError("the address holds a space or a control character"));
  if (rest->empty() || (*rest)[0] == '?') {  // relative addresses need the prefix's trailing '/'
    res.status = 308;
    res.set_header("Location", absl::StrCat(target->prefix, "/", *rest));
    SetProxyFields(res);
    return;
  }
  if (req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method")) {
    // A sandboxed page's preflight (its origin is opaque): allowed, as the
    // grant in the address is what authorizes.
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE");
    if (req.has_header("Access-Control-Request-Headers")) {
      res.set_header("Access-Control-Allow-Headers", req.get_header_value("Access-Control-Request-Headers"));
    }
    res.set_header("Access-Control-Max-Age", "600");
    SetProxyFields(res);
    return;
  }
  Forward(req, *target, *rest, accept_encoding, res);
}

void ServiceProxy::Forward(const httplib::Request& req, const ServiceTarget& target, const std::string& path,
                           const std::string& accept_encoding, httplib::Response& res) {
  httplib::Client client(target.host, static_cast<int>(target.port));
  client.set_url_encode(false);
  client.set_decompress(false);
  client.set_keep_alive(false);
  client.set_follow_location(false);
  auto micros = [](absl::Duration d) { return std::chrono::microseconds(absl::ToInt64Microseconds(d)); };
  client.set_connection_timeout(micros(options_.connect_timeout));
  client.set_read_timeout(micros(options_.timeout));
  client.set_write_timeout(micros(options_.timeout));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return ProxyError(res, absl::UnavailableError("the server is stopping"));
    in_flight_.insert(&client);
  }
  struct Untrack {
    ServiceProxy* proxy;
    httplib::Client* client;
    ~Untrack() {
      absl::MutexLock lock(&proxy->mu_);
      proxy->in_flight_.erase(client);
    }
  } untrack{this, &client};

  httplib::Request out;
  out.method = req.method;
  out.path = path;
  for (const auto& [name, value] : req.headers) {
    if (!DroppedRequestField(name)) out.headers.emplace(name, value);
  }
  if (!accept_encoding.empty()) out.headers.emplace("Accept-Encoding", accept_encoding);
  out.headers.emplace("X-Forwarded-Prefix", target.prefix);
  out.headers.emplace("X-Forwarded-For", req.remote_addr);
  out.headers.emplace("X-Forwarded-Proto", options_.scheme);
  if (req.has_header("Host")) out.headers.emplace("X-Forwarded-Host", req.get_header_value("Host"));
  out.body = req.body;
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
    out.set_header("Content-Length", std::to_string(req.body.size()));
  }
  // The answer's body, up to the cap, within the whole answer's time, while
  // the caller is there to take it.
  const absl::Time deadline = absl::Now() + options_.total_timeout;
  std::string body;
  bool too_big = false, too_slow = false;
  out.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (static_cast<int64_t>(body.size() + n) > options_.max_answer_bytes) {
      too_big = true;
      return false;
    }
    if (absl::Now() > deadline) {
      too_slow = true;
      return false;
    }
    body.append(data, n);
    return !stopping_ && !HttpServer::ClientGone();
  };
  httplib::Result r = client.send(out);
  if (stopping_) return ProxyError(res, absl::UnavailableError("the server is stopping"));
  const std::string where = absl::StrCat("service ", target.task, " (", target.host, ":", target.port, ")");
  if (too_big) {
    return ProxyError(res, absl::UnavailableError(absl::StrCat(where, " answered more than ",
                                                               options_.max_answer_bytes >> 20,
                                                               " MiB: the proxy passes on at most that")));
  }
  if (too_slow || (!r && (r.error() == httplib::Error::Read || r.error() == httplib::Error::Write))) {
    ProxyError(res, absl::DeadlineExceededError(absl::StrCat(where, " did not answer in time")));
    res.status = 504;
    return;
  }
  if (!r) {
    ProxyError(res, absl::UnavailableError(absl::StrCat(
                        where, " could not be reached: ", httplib::to_string(r.error()),
                        " (does it listen on its node's address and $TRAINYARD_SERVICE_PORT?)")));
    res.status = 502;
    return;
  }
  res.status = r->status;
  for (const auto& [name, value] : r->headers) {
    if (DroppedAnswerField(name)) continue;
    res.headers.emplace(name, absl::EqualsIgnoreCase(name, "Location") ? RewriteLocation(value, target) : value);
  }
  SetProxyFields(res);
  res.body = std::move(body);  // its Content-Type is among the fields copied
}

}  // namespace trainyard::server::http
