// HTTP requests to a server's REST API and /metrics for integration tests
// (cpp-httplib's client), with the body parsed as JSON when it is JSON.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/integration/harness.h"

namespace trainyard::testing {

struct HttpResult {
  int status = -1;  // -1: no answer (refused, reset, timed out)
  std::string body;
  nlohmann::json json;  // discarded when the body is not JSON
};

inline HttpResult ToResult(const httplib::Result& r) {
  HttpResult out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  out.json = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

// A client that sends the harness's admin token (AdminAuthorization), as
// every request to a cluster's REST API must carry a token.
inline httplib::Client HttpClient(const std::string& address) {
  httplib::Client client("http://" + address);
  client.set_default_headers({{"Authorization", AdminAuthorization()}});
  client.set_read_timeout(30, 0);
  client.set_write_timeout(30, 0);
  return client;
}

// GET http://ADDRESS/PATH.
inline HttpResult HttpGet(const std::string& address, const std::string& path) {
  httplib::Client client = HttpClient(address);
  return ToResult(client.Get(path));
}

// POST http://ADDRESS/PATH with `body` of `type`.
inline HttpResult HttpPost(const std::string& address, const std::string& path, const std::string& body,
                           const std::string& type) {
  httplib::Client client = HttpClient(address);
  return ToResult(client.Post(path, body, type));
}

// The value of the sample `series` (name{labels} exactly as exposed) in a
// Prometheus text; nullopt when it is not there.
inline std::optional<double> MetricSample(const std::string& metrics, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &v)) return v;
  }
  return std::nullopt;
}

// The sample `series` of the cluster's server's /metrics now; -1 when absent.
inline double ServerMetric(const Cluster& c, const std::string& series) {
  return MetricSample(HttpGet(c.http_address(), "/metrics").body, series).value_or(-1);
}

}  // namespace trainyard::testing
