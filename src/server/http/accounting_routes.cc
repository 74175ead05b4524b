// The REST API's accounting routes (see accounting_routes.h).
#include "server/http/accounting_routes.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "api/job_spec.h"
#include "api/states.h"
#include "httplib.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

absl::Status ParseMs(const std::string& key, const std::string& value, int64_t* out) {
  if (!absl::SimpleAtoi(value, out) || *out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": '", value, "' is not a time in Unix ms"));
  }
  return absl::OkStatus();
}

absl::Status ParseState(const std::string& value, v1::HistoryRequest* req) {
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    std::optional<v1::JobState> state = api::ParseJobState(part);
    if (state && api::IsTerminal(*state)) {
      req->add_states(*state);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("state: '", part, "' is not one of SUCCEEDED, FAILED, KILLED, DEADLINE_EXCEEDED"));
    }
  }
  return absl::OkStatus();
}

json UsageRowJson(const v1::UsageRow& r) {
  return {{"jobs", r.jobs()},
          {"succeeded", r.succeeded()},
          {"failed", r.failed()},
          {"killed", r.killed()},
          {"deadline_exceeded", r.deadline_exceeded()},
          {"gpu_hours", r.gpu_hours()},
          {"cpu_hours", r.cpu_hours()},
          {"memory_gb_hours", r.memory_gb_hours()},
          {"elapsed_hours", r.elapsed_hours()},
          {"mean_wait_s", r.mean_wait_s()}};
}

void ServeHistory(RestBackend* b, const Principal& who, const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<v1::HistoryRequest> q = ParseHistoryQuery(req.params);
  if (!q.ok()) return SetStatusError(res, q.status());
  absl::StatusOr<v1::HistoryResponse> page = b->History(who, *q);
  if (!page.ok()) return SetStatusError(res, page.status());
  json jobs = json::array();
  for (const v1::JobAccount& a : page->jobs()) jobs.push_back(AccountJson(a));
  SetJson(res, {{"jobs", std::move(jobs)},
                {"next_cursor", page->next_page_token()},
                {"oldest_kept_unix_ms", page->oldest_kept_unix_ms()}});
}

void ServeUsage(RestBackend* b, const Principal& who, const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<v1::UsageRequest> q = ParseUsageQuery(req.params);
  if (!q.ok()) return SetStatusError(res, q.status());
  absl::StatusOr<v1::UsageResponse> usage = b->Usage(who, *q);
  if (!usage.ok()) return SetStatusError(res, usage.status());
  const std::string by = q->group_by().empty() ? "user" : q->group_by();
  json rows = json::array();
  for (const v1::UsageRow& r : usage->rows()) {
    json row = UsageRowJson(r);
    row[by] = r.key();
    rows.push_back(std::move(row));
  }
  SetJson(res, {{"by", by},
                {"since_unix_ms", usage->since_unix_ms()},
                {"until_unix_ms", usage->until_unix_ms()},
                {"rows", std::move(rows)},
                {"total", UsageRowJson(usage->total())}});
}

}  // namespace

absl::StatusOr<v1::HistoryRequest> ParseHistoryQuery(const std::multimap<std::string, std::string>& params) {
  v1::HistoryRequest req;
  req.set_page_size(500);
  for (const auto& [key, value] : params) {
    absl::Status st;
    int64_t ms = 0;
    if (key == "user") {
      req.set_user(value);
    } else if (key == "queue") {
      req.set_queue(value);
    } else if (key == "name") {
      req.set_name(value);
    } else if (key == "state") {
      st = ParseState(value, &req);
    } else if (key == "since" || key == "until") {
      st = ParseMs(key, value, &ms);
      key == "since" ? req.set_since_unix_ms(ms) : req.set_until_unix_ms(ms);
    } else if (key == "limit") {
      int limit = 0;
      if (!absl::SimpleAtoi(value, &limit) || limit < 1 || limit > 5000) {
        st = absl::InvalidArgumentError(absl::StrCat("limit: '", value, "' is not a whole number in 1..5000"));
      }
      req.set_page_size(limit);
    } else if (key == "cursor") {
      req.set_page_token(value);
    } else if (key == "order") {
      if (value != "oldest" && value != "newest") {
        st = absl::InvalidArgumentError(absl::StrCat("order: '", value, "' is not oldest or newest"));
      }
      req.set_newest_first(value == "newest");
    } else {
      st = absl::InvalidArgumentError(absl::StrCat(
          key, ": not a parameter of /api/v1/accounting/jobs (user, queue, name, state, since, until, order, limit, "
               "cursor)"));
    }
    if (!st.ok()) return st;
  }
  return req;
}

absl::StatusOr<v1::UsageRequest> ParseUsageQuery(const std::multimap<std::string, std::string>& params) {
  v1::UsageRequest req;
  for (const auto& [key, value] : params) {
    absl::Status st;
    int64_t ms = 0;
    if (key == "since" || key == "until") {
      st = ParseMs(key, value, &ms);
      key == "since" ? req.set_since_unix_ms(ms) : req.set_until_unix_ms(ms);
    } else if (key == "by") {
      if (value != "user" && value != "queue") {
        st = absl::InvalidArgumentError(absl::StrCat("by: '", value, "' is not user or queue"));
      }
      req.set_group_by(value);
    } else if (key == "user") {
      req.set_user(value);
    } else if (key == "queue") {
      req.set_queue(value);
    } else {
      st = absl::InvalidArgumentError(
          absl::StrCat(key, ": not a parameter of /api/v1/accounting/usage (since, until, by, user, queue)"));
    }
    if (!st.ok()) return st;
  }
  return req;
}

json AccountJson(const v1::JobAccount& a) {
  json classes = json::object();
  for (const v1::AttemptClassCount& c : a.attempt_classes()) {
    std::string name = v1::AttemptClass_Name(c.attempt_class());
    classes[absl::StartsWith(name, "ATTEMPT_") ? name.substr(8) : name] = c.count();
  }
  json out = {{"id", a.id()},
              {"name", a.name()},
              {"user", a.user()},
              {"queue", a.queue()},
              {"priority", api::PriorityName(a.priority())},
              {"state", api::JobStateName(a.state())},
              {"message", a.message()},
              {"submit_time_unix_ms", a.submit_time_unix_ms()},
              {"start_time_unix_ms", a.start_time_unix_ms()},
              {"end_time_unix_ms", a.end_time_unix_ms()},
              {"wait_ms", a.wait_ms()},
              {"elapsed_ms", a.elapsed_ms()},
              {"tasks", a.tasks()},
              {"gpus", a.gpus()},
              {"gpu_hours", a.gpu_hours()},
              {"cpu_hours", a.cpu_hours()},
              {"memory_gb_hours", a.memory_gb_hours()},
              {"attempts", a.attempts()},
              {"restarts", a.restarts()},
              {"attempt_classes", std::move(classes)},
              {"exit_code", a.exit_code()},
              {"exit_signal", a.exit_signal()},
              {"exit_task", a.exit_task()},
              {"deleted", a.deleted()},
              {"settled", a.settled()}};
  if (!a.array_job().empty()) {
    out["array_job"] = a.array_job();
    out["array_index"] = a.array_index();
  }
  return out;
}

void AddAccountingRoutes(HttpServer& s, RestBackend* b) {
  s.Handle("GET", "/api/v1/accounting/jobs", "/api/v1/accounting/jobs",
           [b](const httplib::Request& req, httplib::Response& res, const Principal& who) {
             ServeHistory(b, who, req, res);
           });
  s.Handle("GET", "/api/v1/accounting/usage", "/api/v1/accounting/usage",
           [b](const httplib::Request& req, httplib::Response& res, const Principal& who) {
             ServeUsage(b, who, req, res);
           });
}

}  // namespace trainyard::server::http
