// The node routes over published views: what a client sees of a paged and
// filtered GET /api/v1/nodes, of bad queries, of the whole list old
// clients read, of /api/v1/node-summary, and that both need a token.
#include "server/http/node_routes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

class ViewsBackend final : public RestBackend {
 public:
  ViewStore views;
  const ViewStore& Views() override { return views; }
  void Submit(const Principal&, const v1::SubmitRequest&, SubmitDone done) override {
    done(absl::UnimplementedError("test"));
  }
  absl::StatusOr<v1::JobState> Kill(const Principal&, const std::string&, const std::string&) override {
    return absl::UnimplementedError("test");
  }
  absl::StatusOr<v1::JobView> Describe(const std::string&) override { return absl::UnimplementedError("test"); }
};

// `count` 8-GPU nodes n-000..: every 10th LOST, every 3rd an A10 (else
// V100), label pool=a on even nodes; node i has i % 9 GPUs in use (job-i's
// one task holds them).
void Fill(ViewStore& views, int count) {
  auto list = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  for (int i = 0; i < count; ++i) {
    auto n = std::make_shared<v1::NodeView>();
    v1::NodeInfo* info = n->mutable_info();
    info->set_name(absl::StrFormat("n-%03d", i));
    info->set_state(i % 10 == 9 ? v1::NODE_LOST : v1::NODE_READY);
    info->set_gpu_model(i % 3 == 0 ? "A10" : "V100");
    if (i % 2 == 0) info->mutable_labels()->insert({std::string("pool"), std::string("a")});
    info->mutable_topology()->set_gpu_count(8);
    uint64_t used = (1ull << (i % 9)) - 1;
    n->set_free_gpu_mask(0xff & ~used);
    if (used != 0) {
      auto job = std::make_shared<v1::JobView>();
      job->set_name(absl::StrCat("job-", i));
      job->set_id(i + 1);
      job->set_state(v1::JOB_RUNNING);
      v1::TaskView* t = job->add_tasks();
      t->set_name(absl::StrCat("job-", i, "-worker-0"));
      t->set_node(info->name());
      t->set_gpu_mask(used);
      t->set_state(v1::TASK_RUNNING);
      views.PutJob(job->name(), ViewStore::JobEntry{job});
    }
    list->push_back(ViewStore::NodeEntry{n, 1000});
  }
  views.PutNodes(list);
}

struct NodeRoutesApi {
  ViewsBackend backend;
  std::unique_ptr<HttpServer> server;
  std::unique_ptr<httplib::Client> client;
  explicit NodeRoutesApi(int nodes, HttpOptions options = {}) {
    Fill(backend.views, nodes);
    server = std::move(*HttpServer::Bind(options));
    AddRestRoutes(*server, &backend);
    server->Serve();
    client = std::make_unique<httplib::Client>("http://" + server->address());
  }
  // GET `path`: its status and JSON body.
  std::pair<int, json> Get(const std::string& path) {
    auto r = client->Get(path);
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
};

std::vector<std::string> NodeRoutesNames(const json& page) {
  std::vector<std::string> out;
  for (const json& n : page["nodes"]) out.push_back(n["name"]);
  return out;
}

TEST(NodeRoutesTest, PagesWalkEveryNodeOnceInNameOrder) {
  NodeRoutesApi api(250);
  std::vector<std::string> seen;
  std::string path = "/api/v1/nodes?limit=100";
  std::vector<size_t> sizes;
  for (int pages = 0; pages < 10; ++pages) {
    auto [status, page] = api.Get(path);
    ASSERT_EQ(status, 200) << page.dump();
    EXPECT_EQ(page["total"], 250);
    std::vector<std::string> names = NodeRoutesNames(page);
    sizes.push_back(names.size());
    seen.insert(seen.end(), names.begin(), names.end());
    if (page["next_cursor"] == "") break;
    path = absl::StrCat("/api/v1/nodes?limit=100&cursor=", page["next_cursor"].get<std::string>());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{100, 100, 50}));
  ASSERT_EQ(seen.size(), 250u);
  for (int i = 0; i < 250; ++i) EXPECT_EQ(seen[i], absl::StrFormat("n-%03d", i));
  // A page's node is the whole node, with the task holding each GPU.
  auto [status, page] = api.Get("/api/v1/nodes?name=n-005");
  ASSERT_EQ(status, 200);
  ASSERT_EQ(page["nodes"].size(), 1u);
  EXPECT_EQ(page["nodes"][0]["allocated_gpus"], 5);
  EXPECT_EQ(page["nodes"][0]["gpus"][0]["task"], "job-5-worker-0");
  EXPECT_EQ(page["nodes"][0]["gpus"][7]["state"], "free");
}

TEST(NodeRoutesTest, FiltersByStateLabelModelAndFreeGpus) {
  NodeRoutesApi api(100);
  auto [s1, lost] = api.Get("/api/v1/nodes?state=lost&limit=500");
  ASSERT_EQ(s1, 200);
  EXPECT_EQ(lost["total"], 10);
  for (const json& n : lost["nodes"]) EXPECT_EQ(n["state"], "LOST");
  auto [s2, a10] = api.Get("/api/v1/nodes?model=a10&label=pool%3Da&state=READY,LOST");
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(a10["total"], 17);  // i % 6 == 0 below 100
  for (const json& n : a10["nodes"]) EXPECT_EQ(n["labels"]["pool"], "a");
  auto [s3, keyed] = api.Get("/api/v1/nodes?label=pool");
  ASSERT_EQ(s3, 200);
  EXPECT_EQ(keyed["total"], 50);
  // min_free_gpus=7: i % 9 in {0, 1}.
  auto [s4, roomy] = api.Get("/api/v1/nodes?min_free_gpus=7&limit=5");
  ASSERT_EQ(s4, 200);
  EXPECT_EQ(roomy["total"], 23);
  EXPECT_EQ(NodeRoutesNames(roomy), (std::vector<std::string>{"n-000", "n-001", "n-009", "n-010", "n-018"}));
  EXPECT_NE(roomy["next_cursor"], "");
  auto [s5, none] = api.Get("/api/v1/nodes?label=pool%3Db");
  ASSERT_EQ(s5, 200);
  EXPECT_EQ(none["total"], 0);
  EXPECT_EQ(none["next_cursor"], "");
}

TEST(NodeRoutesTest, BadQueryValuesAre400NamingTheParameter) {
  NodeRoutesApi api(3);
  for (const auto& [query, param] : std::vector<std::pair<std::string, std::string>>{
           {"limit=0", "limit: "},
           {"limit=501", "limit: "},
           {"limit=ten", "limit: "},
           {"state=asleep", "state: "},
           {"min_free_gpus=65", "min_free_gpus: "},
           {"min_free_gpus=-1", "min_free_gpus: "},
           {"cursor=%21%21", "cursor: "},
           {"cursor=bm9wZQ", "cursor: "},
           {"label=%3Dx", "label: "},
           {"model=", "model: "},
           {"colour=red", "colour: "}}) {
    auto [status, body] = api.Get(absl::StrCat("/api/v1/nodes?", query));
    EXPECT_EQ(status, 400) << query;
    EXPECT_EQ(body["error"]["status"], "INVALID_ARGUMENT") << query;
    EXPECT_THAT(body["error"]["message"].get<std::string>(), HasSubstr(param)) << query;
  }
  auto [status, body] = api.Get("/api/v1/node-summary?x=1");
  EXPECT_EQ(status, 400);
}

TEST(NodeRoutesTest, TheWholeListAndOneNodeStayAsBefore) {
  NodeRoutesApi api(30);
  auto [s1, all] = api.Get("/api/v1/nodes");
  ASSERT_EQ(s1, 200);
  EXPECT_EQ(all["nodes"].size(), 30u);
  EXPECT_FALSE(all.contains("next_cursor"));
  EXPECT_EQ(all["nodes"][3]["gpus"][2]["job"], "job-3");
  auto [s2, one] = api.Get("/api/v1/nodes/n-004");
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(one["gpus"][3]["task"], "job-4-worker-0");
  auto [s3, missing] = api.Get("/api/v1/nodes/n-999");
  EXPECT_EQ(s3, 404);
}

TEST(NodeRoutesTest, SummaryCountsStatesModelsAndGivesTheHeatVector) {
  NodeRoutesApi api(20);
  auto [status, s] = api.Get("/api/v1/node-summary");
  ASSERT_EQ(status, 200) << s.dump();
  EXPECT_EQ(s["nodes"], 20);
  EXPECT_EQ(s["states"]["READY"], 18);
  EXPECT_EQ(s["states"]["LOST"], 2);
  // Used GPUs: sum of i % 9 for i < 20 = 36 + 36 + 1.
  EXPECT_EQ(s["gpus"]["total"], 160);
  EXPECT_EQ(s["gpus"]["used"], 73);
  EXPECT_EQ(s["gpus"]["free"], 87);
  ASSERT_EQ(s["models"].size(), 2u);
  EXPECT_EQ(s["models"][0]["model"], "A10");
  EXPECT_EQ(s["models"][0]["nodes"], 7);
  EXPECT_EQ(s["models"][1]["model"], "V100");
  EXPECT_EQ(s["models"][1]["total"], 13 * 8);
  const json& heat = s["heat"];
  ASSERT_EQ(heat["names"].size(), 20u);
  EXPECT_EQ(heat["names"][12], "n-012");
  EXPECT_EQ(heat["used"][12], 3);
  EXPECT_EQ(heat["gpus"][12], 8);
  EXPECT_EQ(heat["states"][19], "LOST");
}

TEST(NodeRoutesTest, PagesAndSummaryNeedAToken) {
  HttpOptions opt;
  opt.authenticate = [](absl::string_view authorization) -> absl::StatusOr<Principal> {
    if (authorization == "Bearer good") return Principal{.user = "alice", .admin = false, .anonymous = false};
    return absl::UnauthenticatedError("this server requires a token");
  };
  NodeRoutesApi api(5, opt);
  for (const char* path : {"/api/v1/nodes?limit=2", "/api/v1/node-summary"}) {
    auto none = api.client->Get(path);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path;
    auto good = api.client->Get(path, {{"Authorization", "Bearer good"}});
    ASSERT_TRUE(good);
    EXPECT_EQ(good->status, 200) << path;
  }
}

}  // namespace
}  // namespace trainyard::server::http
