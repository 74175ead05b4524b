// The REST API over a fake backend: what a client sees of submit's
// answers (durable, refused, store down) and of a job recovered whose
// events are still only in the store.
#include "server/http/rest_api.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

class RestApiFakeBackend final : public RestBackend {
 public:
  ViewStore views;
  absl::StatusOr<v1::SubmitResponse> answer;
  v1::SubmitRequest last;
  const ViewStore& Views() override { return views; }
  void Submit(const Principal&, const v1::SubmitRequest& req, SubmitDone done) override {
    last = req;
    done(answer);
  }
  absl::StatusOr<v1::JobState> Kill(const Principal&, const std::string& job, const std::string&) override {
    return absl::NotFoundError("job '" + job + "' does not exist");
  }
  absl::StatusOr<v1::JobView> Describe(const std::string& job) override {
    v1::JobView v;
    v.set_name(job);
    v.add_events()->set_text("read from the store");
    return v;
  }
};

struct RestApiApi {
  RestApiFakeBackend backend;
  std::unique_ptr<HttpServer> server;
  std::unique_ptr<httplib::Client> client;
  RestApiApi() {
    server = std::move(*HttpServer::Bind(HttpOptions{}));
    AddRestRoutes(*server, &backend);
    server->Serve();
    client = std::make_unique<httplib::Client>("http://" + server->address());
  }
};

TEST(RestApiTest, AnArraysSubmitPointsAtItsFirstElementAndNamesThemAll) {
  RestApiApi api;
  v1::SubmitResponse ok;
  ok.set_job("sweep");
  ok.set_job_id(7);
  ok.add_array_jobs("sweep-0");
  ok.add_array_jobs("sweep-1");
  api.backend.answer = ok;
  auto r = api.client->Post("/api/v1/jobs", "name: sweep\narray: 0-1\n", "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->get_header_value("Location"), "/api/v1/jobs/sweep-0");
  nlohmann::json body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body["job"], "sweep");
  EXPECT_EQ(body["array_jobs"], nlohmann::json::array({"sweep-0", "sweep-1"}));
}

TEST(RestApiTest, SubmitAnswers201WithTheNameOrTheErrorWithItsGrpcCode) {
  RestApiApi api;
  v1::SubmitResponse ok;
  ok.set_job("train-2");
  ok.set_job_id(7);
  api.backend.answer = ok;
  auto r = api.client->Post("/api/v1/jobs", "name: train\n", "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->get_header_value("Location"), "/api/v1/jobs/train-2");
  EXPECT_EQ(nlohmann::json::parse(r->body)["id"], 7);
  EXPECT_EQ(api.backend.last.yaml(), "name: train\n");

  api.backend.answer = absl::UnavailableError("the store cannot keep it");
  r = api.client->Post("/api/v1/jobs", R"({"yaml": "name: x\n"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  nlohmann::json e = nlohmann::json::parse(r->body)["error"];
  EXPECT_EQ(e["status"], "UNAVAILABLE");
  EXPECT_EQ(e["message"], "the store cannot keep it");
  EXPECT_EQ(api.backend.last.yaml(), "name: x\n");

  r = api.client->Post("/api/v1/jobs", R"({"spec": {"name": "s", "replicas": [{"role": "worker", "count": 2}]}})",
                       "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(api.backend.last.spec().name(), "s");
  ASSERT_EQ(api.backend.last.spec().replicas_size(), 1);
  EXPECT_EQ(api.backend.last.spec().replicas(0).count(), 2);
  r = api.client->Post("/api/v1/jobs", R"({"spec": {"nmae": "s"}})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("spec: "));
  r = api.client->Post("/api/v1/jobs", R"({"yaml": "a", "spec": {}})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("exactly one of"));
}

TEST(RestApiTest, ARecoveredJobsEventsComeFromTheStoreOnce) {
  RestApiApi api;
  auto v = std::make_shared<v1::JobView>();
  v->set_name("old");
  ViewStore::JobEntry e;
  e.view = v;
  e.events_loaded = false;
  api.backend.views.PutJob("old", e);
  auto r = api.client->Get("/api/v1/jobs/old");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->body, HasSubstr("read from the store"));
}

TEST(RestApiTest, StatusCodesMapToHttp) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInternal), 500);
}

}  // namespace
}  // namespace trainyard::server::http
