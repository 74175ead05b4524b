// The REST API's handlers (see rest_api.h).
#include "server/http/rest_api.h"

#include <future>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "api/states.h"
#include "api/time_limits.h"
#include "google/protobuf/util/json_util.h"
#include "httplib.h"
#include "server/http/accounting_routes.h"
#include "server/http/resource_routes.h"
#include "server/http/schedule_routes.h"
#include "server/http/json_views.h"
#include "server/http/log_routes.h"
#include "server/http/node_routes.h"
#include "server/http/shared_answers.h"
#include "server/http/watch.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

constexpr const char* kGrpcCodeNames[] = {
    "OK",        "CANCELLED",         "UNKNOWN",      "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};

// The filters of GET /api/v1/jobs.
struct JobFilter {
  std::string user;
  std::string queue;
  std::set<v1::JobState> states;  // empty: any
  bool all = false;               // finished jobs too
};


// "QUEUED, SCHEDULED, ..., DEADLINE_EXCEEDED".
std::string JobStateNames() {
  std::vector<std::string> names;
  for (v1::JobState s : api::JobStates()) names.push_back(api::JobStateName(s));
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<JobFilter> ParseJobFilter(const httplib::Request& req, const v1::ListQueuesResponse& queues) {
  JobFilter f;
  for (const auto& [key, value] : req.params) {
    if (key == "user") {
      if (value.empty()) return absl::InvalidArgumentError("user: must not be empty");
      f.user = value;
    } else if (key == "queue") {
      std::vector<std::string> names;
      for (const auto& q : queues.queues()) names.push_back(q.name());
      if (std::find(names.begin(), names.end(), value) == names.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("queue: there is no queue '", value, "' (queues: ", absl::StrJoin(names, ", "), ")"));
      }
      f.queue = value;
    } else if (key == "state") {
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        std::optional<v1::JobState> s = api::ParseJobState(part);
        if (!s) {
          return absl::InvalidArgumentError(absl::StrCat("state: '", part, "' is not one of ",
                                                         JobStateNames()));
        }
        f.states.insert(*s);
        f.all = f.all || api::IsTerminal(*s);
      }
    } else if (key == "all") {
      if (value != "true" && value != "false" && value != "1" && value != "0") {
        return absl::InvalidArgumentError(absl::StrCat("all: '", value, "' is not true or false"));
      }
      f.all = f.all || value == "true" || value == "1";
    } else {
      return absl::InvalidArgumentError(absl::StrCat(key, ": not a filter of /api/v1/jobs (user, queue, state, all)"));
    }
  }
  return f;
}

bool Matches(const JobFilter& f, const v1::JobView& j) {
  return (f.user.empty() || j.user() == f.user) && (f.queue.empty() || j.queue() == f.queue) &&
         (f.states.empty() || f.states.count(j.state()));
}

// The key of a job list in SharedAnswers: its filter as parsed (the same
// filter however the query spells it), each string with its length first.
std::string AnswerKey(const JobFilter& f) {
  std::string key = absl::StrCat("/api/v1/jobs ", f.user.size(), ":", f.user, " ", f.queue.size(), ":", f.queue,
                                 f.all ? " all" : " live");
  for (v1::JobState s : f.states) absl::StrAppend(&key, " ", static_cast<int>(s));  // a set: in order
  return key;
}

void ListJobs(RestBackend* b, SharedAnswers* shared, const httplib::Request& req, httplib::Response& res) {
  const ViewStore& views = b->Views();
  absl::StatusOr<JobFilter> f = ParseJobFilter(req, *views.Queues());
  if (!f.ok()) return SetStatusError(res, f.status());
  shared->Serve(AnswerKey(*f), req, res, [&views, &f] {
    json jobs = json::array();
    for (const auto& j : views.Jobs(f->all)) {
      if (Matches(*f, *j)) jobs.push_back(JobJson(*j, false));
    }
    return json{{"jobs", std::move(jobs)}};
  });
}

void GetJob(RestBackend* b, const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  std::optional<ViewStore::JobEntry> entry = b->Views().Job(name);
  if (!entry) return SetStatusError(res, absl::NotFoundError(absl::StrCat("job '", name, "' does not exist")));
  absl::StatusOr<v1::JobView> v =
      entry->events_loaded ? absl::StatusOr<v1::JobView>(ViewStore::FullView(*entry)) : b->Describe(name);
  if (!v.ok()) return SetStatusError(res, v.status());
  json out = JobJson(*v, true);
  // What is left of its time limit as of this answer (null: no limit, not
  // started, or ended).
  std::optional<int64_t> left = api::TimeLeftMs(*v, absl::ToUnixMillis(absl::Now()));
  out["time_left_ms"] = left ? json(*left) : json(nullptr);
  SetJson(res, out);
}

// The body of POST /api/v1/jobs as gRPC's SubmitRequest: a spec file's
// text (YAML content type), or JSON {"yaml": TEXT} or {"spec": JobSpec in
// the proto's JSON form}.
absl::StatusOr<v1::SubmitRequest> ParseSubmitBody(const httplib::Request& req) {
  v1::SubmitRequest out;
  std::string type = absl::AsciiStrToLower(req.get_header_value("Content-Type"));
  if (!absl::StartsWith(type, "application/json")) {
    out.set_yaml(req.body);
    return out;
  }
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return absl::InvalidArgumentError("body: not a JSON object ({\"yaml\": TEXT} or {\"spec\": {...}})");
  }
  if (body.contains("yaml") == body.contains("spec") || body.size() != 1) {
    return absl::InvalidArgumentError("body: give exactly one of \"yaml\" (a spec file's text) or \"spec\"");
  }
  if (body.contains("yaml")) {
    if (!body["yaml"].is_string()) return absl::InvalidArgumentError("yaml: must be a string");
    out.set_yaml(body["yaml"].get<std::string>());
    return out;
  }
  google::protobuf::util::JsonParseOptions opt;
  auto st = google::protobuf::util::JsonStringToMessage(body["spec"].dump(), out.mutable_spec(), opt);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec: ", std::string(st.message().data(), st.message().size())));
  }
  return out;
}

void SubmitJob(RestBackend* b, const Principal& who, const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<v1::SubmitRequest> submit = ParseSubmitBody(req);
  if (!submit.ok()) return SetStatusError(res, submit.status());
  std::promise<absl::StatusOr<v1::SubmitResponse>> promise;
  std::future<absl::StatusOr<v1::SubmitResponse>> answer = promise.get_future();
  b->Submit(who, *submit, [&promise](absl::StatusOr<v1::SubmitResponse> r) { promise.set_value(std::move(r)); });
  absl::StatusOr<v1::SubmitResponse> r = answer.get();  // durable, or refused
  if (!r.ok()) return SetStatusError(res, r.status());
  if (r->array_jobs_size() == 0) {
    res.set_header("Location", absl::StrCat("/api/v1/jobs/", r->job()));
    SetJson(res, {{"job", r->job()}, {"id", r->job_id()}}, 201);
    return;
  }
  // An array has no record of its own: the answer points at its first
  // element and names them all.
  res.set_header("Location", absl::StrCat("/api/v1/jobs/", r->array_jobs(0)));
  SetJson(res, {{"job", r->job()}, {"id", r->job_id()}, {"array_jobs", std::vector<std::string>(r->array_jobs().begin(), r->array_jobs().end())}}, 201);
}

void KillJob(RestBackend* b, const Principal& who, const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  std::string reason;
  if (!req.body.empty()) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object() || (body.contains("reason") && !body["reason"].is_string())) {
      return SetStatusError(res, absl::InvalidArgumentError("body: must be {\"reason\": TEXT} or empty"));
    }
    reason = body.value("reason", "");
  }
  absl::StatusOr<v1::JobState> st = b->Kill(who, name, reason);
  if (!st.ok()) return SetStatusError(res, st.status());
  SetJson(res, {{"job", name}, {"state", api::JobStateName(*st)}});
}

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

void SetStatusError(httplib::Response& res, const absl::Status& st) {
  int code = static_cast<int>(st.code());
  json body = {{"error",
                {{"code", HttpStatusOf(st.code())},
                 {"status", code >= 0 && code <= 16 ? kGrpcCodeNames[code] : "UNKNOWN"},
                 {"message", std::string(st.message())}}}};
  res.status = HttpStatusOf(st.code());
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void SetJson(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void AddRestRoutes(HttpServer& s, RestBackend* b) {
  // Job and node names: a name the server gives never holds '/'.
  const std::string name = "([^/]+)";
  // The lists: the same for every reader, made at most once a second.
  auto shared = std::make_shared<SharedAnswers>(&b->Views());
  s.Handle("GET", "/api/v1/jobs", "/api/v1/jobs",
           [b, shared](const httplib::Request& req, httplib::Response& res, const Principal&) {
             ListJobs(b, shared.get(), req, res);
           });
  // The submitter is the principal, as over gRPC.
  s.Handle("POST", "/api/v1/jobs", "/api/v1/jobs",
           [b](const httplib::Request& req, httplib::Response& res, const Principal& who) {
             SubmitJob(b, who, req, res);
           });
  s.Handle("GET", "/api/v1/jobs/" + name, "/api/v1/jobs/{job}",
           [b](const httplib::Request& req, httplib::Response& res, const Principal&) { GetJob(b, req, res); });
  s.Handle("POST", "/api/v1/jobs/" + name + "/kill", "/api/v1/jobs/{job}/kill",
           [b](const httplib::Request& req, httplib::Response& res, const Principal& who) {
             KillJob(b, who, req, res);
           });
  AddNodeRoutes(s, b, shared);
  AddAccountingRoutes(s, b);
  AddResourceRoutes(s, b);
  AddScheduleRoutes(s, b);
  s.Handle("GET", "/api/v1/queues", "/api/v1/queues",
           [b, shared](const httplib::Request& req, httplib::Response& res, const Principal&) {
             const ViewStore& views = b->Views();
             shared->Serve("/api/v1/queues", req, res,
                           [&views] { return QueuesJson(*views.Queues(), views.Jobs(false)); });
           });
  AddLogRoutes(s, b);
  AddWatchRoute(s, &b->Views());
  s.Handle("GET", "/healthz", "/healthz",
           [](const httplib::Request&, httplib::Response& res, const Principal&) { res.set_content("ok\n", "text/plain"); });
  // This server serves (a standby's door answers 503: standby_door.h), for
  // a load balancer in front of several servers.
  s.Handle("GET", "/readyz", "/readyz",
           [](const httplib::Request&, httplib::Response& res, const Principal&) { res.set_content("ok\n", "text/plain"); });
}

}  // namespace trainyard::server::http
