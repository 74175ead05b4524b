// The embedded dashboard as a browser fetches it: the page at /, its
// modules with the content types a browser requires (a module script
// served as anything but JavaScript is refused), the revalidating cache,
// and nothing outside the embedded files.
#include "server/http/dashboard/dashboard.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

class ViewsOnlyBackend final : public RestBackend {
 public:
  ViewStore views;
  const ViewStore& Views() override { return views; }
  void Submit(const Principal&, const v1::SubmitRequest&, SubmitDone done) override { done(absl::UnimplementedError("test")); }
  absl::StatusOr<v1::JobState> Kill(const Principal&, const std::string&, const std::string&) override {
    return absl::UnimplementedError("test");
  }
  absl::StatusOr<v1::JobView> Describe(const std::string&) override { return absl::UnimplementedError("test"); }
  std::optional<v1::ClusterStatus> ControlPlane() override { return control_plane; }
  std::optional<v1::ClusterStatus> control_plane;
};

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = HttpServer::Bind({});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    AddDashboardRoutes(*server_, &backend_);
    server_->Serve();
  }
  httplib::Result Get(const std::string& path, const httplib::Headers& headers = {}) {
    httplib::Client c("http://" + server_->address());
    return c.Get(path, headers);
  }
  ViewsOnlyBackend backend_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(DashboardTest, IndexIsTheEmbeddedPage) {
  auto r = Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(r->body, HasSubstr("<title>Trainyard</title>"));
  EXPECT_THAT(r->body, HasSubstr(R"(src="/ui/js/app.js")"));
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'self'"));
}

TEST_F(DashboardTest, EveryFileTheIndexNamesIsServedWithItsType) {
  for (const auto& [path, type] : std::vector<std::pair<std::string, std::string>>{
           {"/ui/js/app.js", "text/javascript; charset=utf-8"},
           {"/ui/js/nodes.js", "text/javascript; charset=utf-8"},
           {"/ui/style.css", "text/css; charset=utf-8"},
           {"/ui/favicon.svg", "image/svg+xml"}}) {
    auto r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), type) << path;
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_FALSE(r->body.empty()) << path;
  }
}

TEST_F(DashboardTest, AnUnchangedFileIsRevalidatedWith304) {
  auto first = Get("/ui/js/app.js");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->get_header_value("Cache-Control"), "no-cache");
  std::string etag = first->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = Get("/ui/js/app.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto other = Get("/ui/js/app.js", {{"If-None-Match", "\"something-else\""}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  // Another file has another tag.
  auto css = Get("/ui/style.css");
  ASSERT_TRUE(css);
  EXPECT_NE(css->get_header_value("ETag"), etag);
}

TEST_F(DashboardTest, OnlyEmbeddedFilesAreServed) {
  for (const std::string path : {"/ui/nope.js", "/ui/../CMakeLists.txt", "/ui/%2e%2e/etc/passwd", "/ui/js"}) {
    auto r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << path;
  }
}

TEST_F(DashboardTest, OverviewAddsUpNodesAndJobs) {
  auto nodes = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  for (auto [name, free, excluded, model, state] :
       std::vector<std::tuple<std::string, uint64_t, uint64_t, std::string, v1::NodeState>>{
           {"a", 0b11110000, 0, "a100", v1::NODE_READY},
           {"b", 0b00111111, 0b10000000, "a100", v1::NODE_READY},
           {"c", 0xff, 0, "", v1::NODE_LOST}}) {
    auto n = std::make_shared<v1::NodeView>();
    n->mutable_info()->set_name(name);
    n->mutable_info()->set_state(state);
    n->mutable_info()->mutable_topology()->set_gpu_count(8);
    n->mutable_info()->set_excluded_gpus(excluded);
    if (!model.empty()) (*n->mutable_info()->mutable_labels())["gpu"] = model;
    n->set_free_gpu_mask(free);
    nodes->push_back({n, 0});
  }
  backend_.views.PutNodes(nodes);
  for (auto [name, state] : std::vector<std::pair<std::string, v1::JobState>>{
           {"j1", v1::JOB_RUNNING}, {"j2", v1::JOB_RUNNING}, {"j3", v1::JOB_QUEUED}, {"j4", v1::JOB_KILLED}}) {
    auto v = std::make_shared<v1::JobView>();
    v->set_name(name);
    v->set_queue("default");
    v->set_state(state);
    ViewStore::JobEntry e;
    e.view = v;
    backend_.views.PutJob(name, e);
  }
  auto r = Get("/api/v1/overview");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  nlohmann::json o = nlohmann::json::parse(r->body);
  EXPECT_EQ(o["gpus"], nlohmann::json({{"total", 24}, {"allocated", 5}, {"free", 18}, {"excluded", 1}}));
  EXPECT_EQ(o["nodes_by_state"], nlohmann::json({{"READY", 2}, {"LOST", 1}}));
  EXPECT_EQ(o["jobs_by_state"]["RUNNING"], 2);
  EXPECT_EQ(o["jobs_by_state"]["QUEUED"], 1);
  EXPECT_EQ(o["jobs_by_state"]["KILLED"], 1);
  EXPECT_EQ(o["jobs_by_state"]["FAILED"], 0);
  ASSERT_EQ(o["gpus_by_model"].size(), 2u);
  EXPECT_EQ(o["gpus_by_model"][0]["model"], "a100");
  EXPECT_EQ(o["gpus_by_model"][0]["nodes"], 2);
  EXPECT_EQ(o["gpus_by_model"][0]["allocated"], 5);
  EXPECT_EQ(o["gpus_by_model"][1]["model"], "unlabelled");
  EXPECT_EQ(o["gpus_by_model"][1]["free"], 8);
  EXPECT_TRUE(o["queues"].contains("queues"));
  EXPECT_FALSE(o.contains("control_plane")) << "a backend that does not know who leads";
}

TEST_F(DashboardTest, OverviewNamesTheLeaderItsStandbysAndItsStore) {
  v1::ClusterStatus c;
  c.set_server_address("10.0.0.11:7450");
  c.set_store("etcd");
  c.add_etcd_endpoints("10.0.0.1:2379");
  c.add_etcd_endpoints("10.0.0.2:2379");
  c.set_leader(true);
  c.set_leader_since_unix_ms(1700000000123);
  c.set_leader_terms(3);
  c.set_leader_revision(42);
  c.set_leader_lease_ms(5000);
  c.add_standbys("10.0.0.12:7450");
  v1::LeaderDeposition* d = c.add_depositions();
  d->set_reason("fenced");
  d->set_count(2);
  d->set_last_unix_ms(1700000000000);
  d->set_last_server("10.0.0.12:7450");
  d->set_last_why("its write was refused");
  backend_.control_plane = c;
  auto r = Get("/api/v1/overview");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  nlohmann::json o = nlohmann::json::parse(r->body);
  EXPECT_EQ(o["control_plane"], nlohmann::json({{"server_address", "10.0.0.11:7450"},
                                                {"store", "etcd"},
                                                {"etcd_endpoints", {"10.0.0.1:2379", "10.0.0.2:2379"}},
                                                {"leader_since_unix_ms", 1700000000123},
                                                {"leader_terms", 3},
                                                {"leader_revision", 42},
                                                {"leader_lease_ms", 5000},
                                                {"standbys", {"10.0.0.12:7450"}},
                                                {"depositions",
                                                 {{{"reason", "fenced"},
                                                   {"count", 2},
                                                   {"last_unix_ms", 1700000000000},
                                                   {"last_server", "10.0.0.12:7450"},
                                                   {"last_why", "its write was refused"}}}}}))
      << r->body;
}

TEST(DashboardAssetsTest, EmbeddedFilesAreSortedForLookup) {
  std::span<const EmbeddedAsset> all = EmbeddedAssets();
  ASSERT_FALSE(all.empty());
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].path, all[i].path);
  ASSERT_NE(FindAsset("index.html"), nullptr);
  EXPECT_EQ(FindAsset("missing.html"), nullptr);
  EXPECT_EQ(ContentTypeOf("a/b.unknown"), "application/octet-stream");
}

}  // namespace
}  // namespace trainyard::server::http
