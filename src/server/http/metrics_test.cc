// /metrics rendered from published views: the values a scrape shows, the
// text format's escaping, and job counts that follow each job's state.
#include "server/http/metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ViewStore::NodeEntry MetricsNode(const std::string& name, int gpus, uint64_t free, uint64_t excluded = 0) {
  auto n = std::make_shared<v1::NodeView>();
  n->mutable_info()->set_name(name);
  n->mutable_info()->set_state(v1::NODE_READY);
  n->mutable_info()->mutable_topology()->set_gpu_count(gpus);
  n->mutable_info()->set_excluded_gpus(excluded);
  n->set_free_gpu_mask(free);
  return ViewStore::NodeEntry{n, 0};
}

void MetricsPutJob(ViewStore& views, const std::string& name, v1::JobState state, int tasks, v1::TaskState task_state) {
  auto v = std::make_shared<v1::JobView>();
  v->set_name(name);
  v->set_queue("research");
  v->set_state(state);
  for (int i = 0; i < tasks; ++i) v->add_tasks()->set_state(task_state);
  ViewStore::JobEntry e;
  e.view = v;
  views.PutJob(name, e);
}

std::string Render(const ViewStore& views) {
  MetricsSources src;
  src.views = &views;
  src.now = absl::FromUnixSeconds(1000);
  return RenderMetrics(src);
}

TEST(MetricsTest, NodeGpusAreAllocatedFreeOrExcluded) {
  ViewStore views;
  auto nodes = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  nodes->push_back(MetricsNode("a", 8, 0b11110000));           // 4 used
  nodes->push_back(MetricsNode("b", 4, 0b0011, /*excluded=*/0b1000));  // 1 used, 1 excluded
  views.PutNodes(nodes);
  std::string m = Render(views);
  EXPECT_THAT(m, HasSubstr("trainyard_node_gpus_allocated{node=\"a\"} 4\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_node_gpus_free{node=\"a\"} 4\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_node_gpus_allocated{node=\"b\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_node_gpus_free{node=\"b\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_gpus{state=\"allocated\"} 5\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_gpus{state=\"excluded\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_nodes{state=\"READY\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("# TYPE trainyard_node_gpus_allocated gauge\n"));
}

TEST(MetricsTest, AGpuShareCountsAsItsFraction) {
  ViewStore views;
  auto nodes = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  // GPU 0 whole, GPU 1 split 0.25 + 0.5, GPUs 2 and 3 free.
  ViewStore::NodeEntry n = MetricsNode("a", 4, 0b1100);
  auto split = std::const_pointer_cast<v1::NodeView>(n.view);
  v1::GpuShareView* share = split->add_gpu_shares();
  share->set_gpu(1);
  share->set_used_milli(750);
  nodes->push_back(n);
  views.PutNodes(nodes);
  auto queues = std::make_shared<v1::ListQueuesResponse>();
  v1::QueueView* q = queues->add_queues();
  q->set_name("research");
  q->mutable_used()->set_gpus(1);
  q->mutable_used()->set_gpu_milli(1750);
  views.PutQueues(queues);
  auto job = std::make_shared<v1::JobView>();
  job->set_name("shares");
  job->set_queue("research");
  job->set_user("alice");
  job->set_state(v1::JOB_RUNNING);
  for (int milli : {250, 500}) {
    v1::TaskView* t = job->add_tasks();
    t->set_state(v1::TASK_RUNNING);
    t->set_node("a");
    t->set_gpu_mask(0b10);
    t->set_gpu_milli(milli);
  }
  ViewStore::JobEntry e;
  e.view = job;
  views.PutJob("shares", e);
  auto waits = std::make_shared<v1::JobView>();  // bob's job waits: he holds no GPU
  waits->set_name("waits");
  waits->set_id(job->id() + 1);
  waits->set_queue("research");
  waits->set_user("bob");
  waits->set_state(v1::JOB_QUEUED);
  waits->add_tasks()->set_state(v1::TASK_PENDING);
  e.view = waits;
  views.PutJob("waits", e);
  std::string m = Render(views);
  EXPECT_THAT(m, HasSubstr("trainyard_node_gpus_allocated{node=\"a\"} 1.75\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_node_gpus_free{node=\"a\"} 2.25\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_gpus{state=\"allocated\"} 1.75\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_queue_gpus_allocated{queue=\"research\"} 1.75\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_user_gpus_allocated{queue=\"research\",user=\"alice\"} 0.75\n"));
  // A user who holds no GPU has no series: the labels stay bounded by the
  // users holding GPUs.
  EXPECT_THAT(m, Not(HasSubstr("user=\"bob\"")));
}

TEST(MetricsTest, JobCountsFollowEachJobsState) {
  ViewStore views;
  MetricsPutJob(views, "a", v1::JOB_QUEUED, 2, v1::TASK_PENDING);
  MetricsPutJob(views, "b", v1::JOB_QUEUED, 1, v1::TASK_PENDING);
  MetricsPutJob(views, "a", v1::JOB_RUNNING, 2, v1::TASK_RUNNING);  // a moved on
  std::string m = Render(views);
  EXPECT_THAT(m, HasSubstr("trainyard_jobs{queue=\"research\",state=\"QUEUED\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_jobs{queue=\"research\",state=\"RUNNING\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_tasks{state=\"PENDING\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_tasks{state=\"RUNNING\"} 2\n"));
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  ViewStore views;
  auto nodes = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  nodes->push_back(MetricsNode("we\"ird\\na\nme", 1, 1));
  views.PutNodes(nodes);
  EXPECT_THAT(Render(views), HasSubstr("trainyard_node_gpus_free{node=\"we\\\"ird\\\\na\\nme\"} 1\n"));
}

TEST(MetricsTest, HistogramsAreCumulativeWithSumAndCount) {
  ViewStore views;
  auto stats = std::make_shared<PublishedStats>();
  stats->round_seconds.Observe(0.0002);
  stats->round_seconds.Observe(0.003);
  stats->manager.restarts_node_lost = 3;
  views.PutStats(stats);
  std::string m = Render(views);
  EXPECT_THAT(m, HasSubstr("trainyard_scheduling_round_duration_seconds_bucket{le=\"0.0005\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_scheduling_round_duration_seconds_bucket{le=\"0.005\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_scheduling_round_duration_seconds_bucket{le=\"+Inf\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_scheduling_round_duration_seconds_count 2\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_task_restarts_total{cause=\"node_lost\"} 3\n"));
  EXPECT_THAT(m, Not(HasSubstr("nan")));
}

TEST(MetricsTest, JobMasterFiguresAreSummedWithoutAJobLabel) {
  ViewStore views;
  JobMasterMetrics masters;
  for (const char* job : {"train", "train-2"}) {
    v1::JobMasterSummary s;
    s.set_job(job);
    for (int n : {0, 1, 2, 0, 0}) s.add_workers_by_state(n);
    s.set_connections(3);
    Histogram h = LatencyHistogram();
    h.Observe(0.03);
    for (int i = 0; i < h.buckets(); ++i) s.add_barrier_bounds_seconds(h.bound(i));
    for (int i = 0; i <= h.buckets(); ++i) s.add_barrier_buckets(h.in_bucket(i));
    s.set_barrier_seconds_sum(h.sum());
    ASSERT_TRUE(masters.Report(s, absl::FromUnixSeconds(999)).ok());
  }
  MetricsSources src;
  src.views = &views;
  src.masters = &masters;
  src.now = absl::FromUnixSeconds(1000);
  std::string m = RenderMetrics(src);
  EXPECT_THAT(m, HasSubstr("trainyard_jobmasters_reporting 2\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_jobmaster_workers{state=\"RUNNING\"} 4\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_jobmaster_workers{state=\"STARTING\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_jobmaster_workers{state=\"ERROR\"} 0\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_jobmaster_connections 6\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_jobmaster_barrier_duration_seconds_bucket{le=\"0.05\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("trainyard_jobmaster_barrier_duration_seconds_count 2\n"));
  EXPECT_THAT(m, Not(HasSubstr("train-2")));
}

}  // namespace
}  // namespace trainyard::server::http
