// The REST API's task resources route (see resource_routes.h).
#include "server/http/resource_routes.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/states.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

// "[t,cpu,mem,gpu,gpumem]": written by hand, as a large job's answer holds
// a hundred thousand of them.
void AppendSample(const v1::TaskResourceSample& s, std::string* out) {
  absl::StrAppend(out, "[", s.time_unix_ms(), ",", s.cpu_milli(), ",", s.memory_bytes(), ",", s.gpu_busy_milli(), ",",
                  s.gpu_memory_bytes(), "]");
}

void AppendSamples(const google::protobuf::RepeatedPtrField<v1::TaskResourceSample>& samples, std::string* out) {
  out->push_back('[');
  for (int i = 0; i < samples.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendSample(samples[i], out);
  }
  out->push_back(']');
}

std::string Quoted(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

void GetResources(RestBackend* b, const Principal& who, const httplib::Request& req, httplib::Response& res) {
  v1::JobResourcesRequest q;
  q.set_job(req.matches[1]);
  for (const auto& [key, value] : req.params) {
    int64_t since = 0;
    if (key != "since") {
      return SetStatusError(res, absl::InvalidArgumentError(absl::StrCat(
                                     key, ": not a parameter of /api/v1/jobs/{job}/resources (since)")));
    }
    if (!absl::SimpleAtoi(value, &since) || since < 0) {
      return SetStatusError(res,
                            absl::InvalidArgumentError(absl::StrCat("since: '", value, "' is not a time in Unix ms")));
    }
    q.set_since_unix_ms(since);
  }
  absl::StatusOr<v1::JobResourcesResponse> r = b->JobResources(who, q);
  if (!r.ok()) return SetStatusError(res, r.status());
  res.status = 200;
  res.set_content(JobResourcesJson(*r), "application/json");
}

}  // namespace

std::string JobResourcesJson(const v1::JobResourcesResponse& r) {
  std::string out;
  size_t samples = static_cast<size_t>(r.totals_size());
  for (const v1::TaskResourcesView& t : r.tasks()) samples += static_cast<size_t>(t.samples_size());
  out.reserve(256 + samples * 48 + static_cast<size_t>(r.tasks_size()) * 256);
  absl::StrAppend(&out, "{\"job\":", Quoted(r.job()), ",\"id\":", r.id(), ",\"sample_interval_ms\":",
                  r.sample_interval_ms(),
                  ",\"sample_fields\":[\"time_unix_ms\",\"cpu_milli\",\"memory_bytes\",\"gpu_busy_milli\","
                  "\"gpu_memory_bytes\"],\"tasks\":[");
  for (int i = 0; i < r.tasks_size(); ++i) {
    const v1::TaskResourcesView& t = r.tasks(i);
    absl::StrAppend(&out, i > 0 ? "," : "", "{\"task\":", Quoted(t.task()), ",\"role\":", Quoted(t.role()),
                    ",\"index\":", t.index(), ",\"node\":", Quoted(t.node()), ",\"attempt\":", t.attempt(),
                    ",\"state\":\"", api::TaskStateName(t.state()), "\",\"memory_limit_bytes\":", t.memory_limit_bytes(),
                    ",\"vcores_milli\":", t.vcores_milli(), ",\"gpu_milli\":", t.gpu_milli(),
                    ",\"source\":", Quoted(t.source()), ",\"near_memory_limit\":",
                    t.near_memory_limit() ? "true" : "false", ",\"samples\":");
    AppendSamples(t.samples(), &out);
    out.push_back('}');
  }
  out += "],\"totals\":";
  AppendSamples(r.totals(), &out);
  out.push_back('}');
  return out;
}

void AddResourceRoutes(HttpServer& s, RestBackend* b) {
  s.Handle("GET", "/api/v1/jobs/([^/]+)/resources", "/api/v1/jobs/{job}/resources",
           [b](const httplib::Request& req, httplib::Response& res, const Principal& who) {
             GetResources(b, who, req, res);
           });
}

}  // namespace trainyard::server::http
