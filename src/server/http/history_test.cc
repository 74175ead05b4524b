// The history ring: what a sample says of the published views, the ring's
// bound, and GET /api/v1/history as a client reads it.
#include "server/http/history.h"

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "common/wait_until.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

// A node of `gpus` GPUs, the first `used` held, GPU `gpus - 1` excluded
// when `excluded`.
ViewStore::NodeEntry HistoryNode(const std::string& name, int gpus, int used, bool excluded, v1::NodeState state) {
  auto v = std::make_shared<v1::NodeView>();
  v->mutable_info()->set_name(name);
  v->mutable_info()->set_state(state);
  v->mutable_info()->mutable_topology()->set_gpu_count(gpus);
  uint64_t all = (uint64_t{1} << gpus) - 1;
  uint64_t held = (uint64_t{1} << used) - 1;
  uint64_t ex = excluded ? uint64_t{1} << (gpus - 1) : 0;
  v->mutable_info()->set_excluded_gpus(ex);
  v->set_free_gpu_mask(all & ~held & ~ex);
  ViewStore::NodeEntry e;
  e.view = v;
  return e;
}

void PutJob(ViewStore& views, const std::string& name, const std::string& queue, v1::JobState state,
            int64_t submit_ms) {
  static uint64_t next_id = 1;
  auto v = std::make_shared<v1::JobView>();
  v->set_name(name);
  v->set_id(next_id++);
  v->set_queue(queue);
  v->set_state(state);
  v->set_submit_time_unix_ms(submit_ms);
  ViewStore::JobEntry e;
  e.view = v;
  views.PutJob(name, e);
}

void PutStats(ViewStore& views, std::initializer_list<double> waits) {
  auto stats = std::make_shared<PublishedStats>();
  for (double w : waits) stats->manager.pending_seconds.Observe(w);
  views.PutStats(stats);
}

// GET `path` from a server holding only the history route over `h`.
struct Answer {
  int status = 0;
  std::string body;
};
Answer GetHistory(History* h, const std::string& path) {
  auto server = std::move(*HttpServer::Bind(HttpOptions{}));
  AddHistoryRoute(*server, h);
  server->Serve();
  httplib::Client client("http://" + server->address());
  auto r = client.Get(path);
  Answer a;
  if (r) a = {r->status, r->body};
  server->Stop();
  return a;
}

struct Cluster {
  ViewStore views;
  absl::Time now = absl::FromUnixMillis(1'800'000'000'000);
  Cluster() {
    auto nodes = std::make_shared<std::vector<ViewStore::NodeEntry>>();
    nodes->push_back(HistoryNode("a", 8, 3, true, v1::NODE_READY));
    nodes->push_back(HistoryNode("b", 4, 4, false, v1::NODE_LOST));
    views.PutNodes(nodes);
    auto queues = std::make_shared<v1::ListQueuesResponse>();
    v1::QueueView* q = queues->add_queues();
    q->set_name("prod");
    q->mutable_used()->set_gpus(7);
    q->mutable_used()->set_gpu_milli(7250);  // 7 whole GPUs and a 0.25 share
    q->set_running_jobs(2);
    q->set_pending_jobs(1);
    q = queues->add_queues();
    q->set_name("dev");
    views.PutQueues(queues);
    PutJob(views, "r1", "prod", v1::JOB_RUNNING, 0);
    PutJob(views, "r2", "prod", v1::JOB_RUNNING, 0);
    // Queued 90 s and 30 s ago: the queue's longest wait is 90 s.
    PutJob(views, "q1", "prod", v1::JOB_QUEUED, absl::ToUnixMillis(now - absl::Seconds(90)));
    PutJob(views, "q2", "prod", v1::JOB_QUEUED, absl::ToUnixMillis(now - absl::Seconds(30)));
    PutStats(views, {});
  }
};

TEST(HistoryTest, ASampleAddsUpTheClusterAndEachQueue) {
  Cluster c;
  History h(absl::Seconds(10), absl::Minutes(10));
  h.Record(c.views, c.now);
  std::vector<HistorySample> s = h.Since(0);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].unix_ms, absl::ToUnixMillis(c.now));
  EXPECT_EQ(s[0].gpus_total, 12);
  EXPECT_EQ(s[0].gpus_allocated, 7);
  EXPECT_EQ(s[0].gpus_excluded, 1);
  EXPECT_EQ(s[0].gpus_free, 4);
  EXPECT_EQ(s[0].nodes, 2);
  EXPECT_EQ(s[0].nodes_ready, 1);
  EXPECT_EQ(s[0].jobs_running, 2);
  EXPECT_EQ(s[0].jobs_queued, 2);
  EXPECT_EQ(s[0].jobs_placed, 0);
  EXPECT_LT(s[0].mean_wait_s, 0);  // the first sample has nothing to compare with
  ASSERT_EQ(s[0].queues.size(), 2u);
  EXPECT_EQ(s[0].queues[0].name, "prod");
  EXPECT_EQ(s[0].queues[0].gpus_used, 7.25);
  EXPECT_EQ(s[0].queues[0].pending_jobs, 1);
  EXPECT_DOUBLE_EQ(s[0].queues[0].longest_wait_s, 90);
  EXPECT_EQ(s[0].queues[1].name, "dev");
  EXPECT_DOUBLE_EQ(s[0].queues[1].longest_wait_s, 0);
}

TEST(HistoryTest, JobsPlacedBetweenSamplesAndTheirMeanWait) {
  Cluster c;
  History h(absl::Seconds(10), absl::Minutes(10));
  PutStats(c.views, {5});
  h.Record(c.views, c.now);
  PutStats(c.views, {5, 2, 4});  // two more placed, after 2 s and 4 s
  h.Record(c.views, c.now + absl::Seconds(10));
  h.Record(c.views, c.now + absl::Seconds(20));  // none since
  std::vector<HistorySample> s = h.Since(0);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].jobs_placed, 2);
  EXPECT_DOUBLE_EQ(s[1].mean_wait_s, 3);
  EXPECT_EQ(s[2].jobs_placed, 0);
  EXPECT_LT(s[2].mean_wait_s, 0);
}

TEST(HistoryTest, TheRingKeepsTheRetentionAndDropsTheOldest) {
  Cluster c;
  History h(absl::Seconds(10), absl::Seconds(60));  // 6 samples
  EXPECT_EQ(h.capacity(), 6u);
  for (int i = 0; i < 20; ++i) h.Record(c.views, c.now + absl::Seconds(10 * i));
  std::vector<HistorySample> s = h.Since(0);
  ASSERT_EQ(s.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s[i].unix_ms, absl::ToUnixMillis(c.now + absl::Seconds(10 * (14 + i))));
  std::vector<HistorySample> later = h.Since(absl::ToUnixMillis(c.now + absl::Seconds(170)));
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[0].unix_ms, absl::ToUnixMillis(c.now + absl::Seconds(180)));
}

TEST(HistoryTest, TheSamplerRecordsEveryInterval) {
  Cluster c;
  History h(absl::Milliseconds(20), absl::Minutes(1));
  {
    HistorySampler sampler(&h, &c.views);
    WaitUntil([&] { return h.Since(0).size() >= 3; });  // the ASSERT below says if they came
  }
  std::vector<HistorySample> s = h.Since(0);
  ASSERT_GE(s.size(), 3u);
  EXPECT_EQ(s[0].gpus_allocated, 7);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_GT(s[i].unix_ms, s[i - 1].unix_ms);
  size_t stopped = s.size();
  absl::SleepFor(absl::Milliseconds(60));
  EXPECT_EQ(h.Since(0).size(), stopped);  // none after the sampler is gone
}

TEST(HistoryTest, TheRouteServesSamplesSinceATimeAndNamesBadParameters) {
  Cluster c;
  History h(absl::Seconds(10), absl::Minutes(30));
  h.Record(c.views, c.now);
  h.Record(c.views, c.now + absl::Seconds(10));
  auto server = std::move(*HttpServer::Bind(HttpOptions{}));
  AddHistoryRoute(*server, &h);
  server->Serve();
  httplib::Client client("http://" + server->address());

  auto r = client.Get("/api/v1/history");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  nlohmann::json body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body["interval_ms"], 10000);
  EXPECT_EQ(body["retention_ms"], 30 * 60 * 1000);
  ASSERT_EQ(body["samples"].size(), 2u);
  EXPECT_EQ(body["samples"][0]["gpus"]["allocated"], 7);
  EXPECT_EQ(body["samples"][0]["queues"][0]["name"], "prod");
  EXPECT_TRUE(body["samples"][0]["mean_wait_s"].is_null());

  r = client.Get("/api/v1/history?since=" + std::to_string(absl::ToUnixMillis(c.now)));
  ASSERT_TRUE(r);
  body = nlohmann::json::parse(r->body);
  ASSERT_EQ(body["samples"].size(), 1u);
  EXPECT_EQ(body["samples"][0]["unix_ms"], absl::ToUnixMillis(c.now + absl::Seconds(10)));

  r = client.Get("/api/v1/history?since=yesterday");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("since: 'yesterday' is not a time in Unix milliseconds"));
  r = client.Get("/api/v1/history?from=1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("from: not a parameter"));
  server->Stop();
}

// Shares of 0.1 and 0.2 on two nodes read 0.3 allocated, 1.7 free: the
// counts are summed in thousandths and divided once, not summed as doubles
// (which reads 0.30000000000000004).
TEST(HistoryTest, SharesOnSeveralNodesAddUpExactly) {
  ViewStore views;
  auto nodes = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  for (auto [name, milli] : {std::pair{"a", 100}, std::pair{"b", 200}}) {
    ViewStore::NodeEntry n = HistoryNode(name, 1, 1, false, v1::NODE_READY);
    v1::GpuShareView* share = std::const_pointer_cast<v1::NodeView>(n.view)->add_gpu_shares();
    share->set_gpu(0);
    share->set_used_milli(milli);
    nodes->push_back(n);
  }
  views.PutNodes(nodes);
  views.PutQueues(std::make_shared<v1::ListQueuesResponse>());
  PutStats(views, {});
  History h(absl::Seconds(10), absl::Minutes(10));
  h.Record(views, absl::FromUnixMillis(1'800'000'000'000));
  Answer r = GetHistory(&h, "/api/v1/history");
  ASSERT_EQ(r.status, 200);
  nlohmann::json gpus = nlohmann::json::parse(r.body)["samples"][0]["gpus"];
  EXPECT_EQ(gpus["allocated"].get<double>(), 0.3);
  EXPECT_EQ(gpus["free"].get<double>(), 1.7);
  EXPECT_THAT(r.body, HasSubstr("\"allocated\":0.3,"));
}

TEST(HistoryTest, AServerWithoutHistorySaysSo) {
  Answer r = GetHistory(nullptr, "/api/v1/history");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, HasSubstr("historyIntervalMs is 0"));
}

}  // namespace
}  // namespace trainyard::server::http
