// The REST API's schedule routes (see schedule_routes.h).
#include "server/http/schedule_routes.h"

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

const char* PolicyName(v1::ConcurrencyPolicy p) {
  switch (p) {
    case v1::CONCURRENCY_QUEUE: return "queue";
    case v1::CONCURRENCY_REPLACE: return "replace";
    default: return "skip";
  }
}

}  // namespace

json ScheduleJson(const v1::ScheduleView& v) {
  const v1::ScheduleRecord& s = v.schedule();
  json runs = json::array();
  for (const v1::ScheduleRun& r : s.runs()) {
    runs.push_back({{"time_unix_ms", r.time_unix_ms()},
                    {"job", r.job()},
                    {"outcome", r.outcome()},
                    {"message", r.message()},
                    {"by_hand", r.by_hand()}});
  }
  return {{"name", s.name()},
          {"user", s.user()},
          {"queue", s.spec().queue()},
          {"cron", s.cron()},
          {"time_zone", s.time_zone().empty() ? "UTC" : s.time_zone()},
          {"concurrency", PolicyName(s.concurrency())},
          {"paused", s.paused()},
          {"created_unix_ms", s.created_unix_ms()},
          {"next_run_unix_ms", v.next_run_unix_ms() > 0 ? json(v.next_run_unix_ms()) : json(nullptr)},
          {"live_jobs", json(std::vector<std::string>(v.live_jobs().begin(), v.live_jobs().end()))},
          {"runs", std::move(runs)}};
}

void AddScheduleRoutes(HttpServer& s, RestBackend* b) {
  s.Handle("GET", "/api/v1/schedules", "/api/v1/schedules",
           [b](const httplib::Request&, httplib::Response& res, const Principal&) {
             json all = json::array();
             for (const v1::ScheduleView& v : *b->Views().Schedules()) all.push_back(ScheduleJson(v));
             SetJson(res, {{"schedules", std::move(all)}});
           });
  s.Handle("GET", "/api/v1/schedules/([^/]+)", "/api/v1/schedules/{schedule}",
           [b](const httplib::Request& req, httplib::Response& res, const Principal&) {
             const std::string name = req.matches[1];
             for (const v1::ScheduleView& v : *b->Views().Schedules()) {
               if (v.schedule().name() == name) return SetJson(res, ScheduleJson(v));
             }
             SetStatusError(res, absl::NotFoundError(absl::StrCat("schedule '", name, "' does not exist")));
           });
}

}  // namespace trainyard::server::http
