// The server's book of task resource samples: what it keeps and for how
// long, its bound, and the job answer built from it.
#include "server/resource_book.h"

#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

v1::TaskResources Task(const std::string& role, int index, int attempt, int32_t cpu, int64_t memory,
                       uint64_t job_id = 7, int64_t limit = 0) {
  v1::TaskResources t;
  t.set_job("j");
  t.set_job_id(job_id);
  t.set_role(role);
  t.set_index(index);
  t.set_attempt(attempt);
  t.set_memory_limit_bytes(limit);
  t.set_source("cgroup v2");
  t.mutable_sample()->set_cpu_milli(cpu);
  t.mutable_sample()->set_memory_bytes(memory);
  t.mutable_sample()->set_gpu_busy_milli(cpu / 2);
  return t;
}

TEST(ResourceBookTest, KeepsEachTasksSamplesForItsWindowStampedOnArrival) {
  ResourceBook book({.keep_for = absl::Minutes(1), .max_tasks = 100});
  for (int i = 0; i < 10; ++i) book.Record("n1", Task("w", 0, 0, 100 * i, 1000), kT0 + absl::Seconds(10 * i));
  auto job = book.Job(7, absl::InfinitePast());
  ASSERT_EQ(job.size(), 1u);
  const ResourceBook::TaskSeries& s = job.at({"w", 0});
  EXPECT_EQ(s.node, "n1");
  // 90 s: those of the last minute are kept.
  ASSERT_EQ(s.samples.size(), 7u);
  EXPECT_EQ(s.samples.front().time_unix_ms, absl::ToUnixMillis(kT0 + absl::Seconds(30)));
  EXPECT_EQ(s.samples.back().cpu_milli, 900);
  EXPECT_EQ(book.Job(7, kT0 + absl::Seconds(85)).at({"w", 0}).samples.size(), 1u);
  EXPECT_TRUE(book.Job(8, absl::InfinitePast()).empty());

  // A report of an attempt since replaced is not taken.
  book.Record("n1", Task("w", 0, 1, 5, 1), kT0 + absl::Seconds(100));
  book.Record("n1", Task("w", 0, 0, 6, 1), kT0 + absl::Seconds(101));
  job = book.Job(7, absl::InfinitePast());
  EXPECT_EQ(job.at({"w", 0}).attempt, 1);
  EXPECT_EQ(job.at({"w", 0}).samples.back().cpu_milli, 5);

  // A task sampled no more leaves once its newest sample is past the window.
  book.Prune(kT0 + absl::Seconds(200));
  EXPECT_TRUE(book.Job(7, absl::InfinitePast()).empty());
  EXPECT_EQ(book.counts().tasks, 0);
  EXPECT_EQ(book.counts().samples, 0);
}

TEST(ResourceBookTest, KeepsAtMostMaxTasksAndCountsWhatItRefused) {
  ResourceBook book({.keep_for = absl::Minutes(15), .max_tasks = 2});
  book.Record("n", Task("w", 0, 0, 1, 1), kT0);
  book.Record("n", Task("w", 1, 0, 1, 1), kT0);
  book.Record("n", Task("w", 2, 0, 1, 1), kT0);
  book.Record("n", Task("w", 0, 0, 1, 1), kT0 + absl::Seconds(1));  // a task kept goes on
  ResourceBook::Counts c = book.counts();
  EXPECT_EQ(c.tasks, 2);
  EXPECT_EQ(c.samples, 3);
  EXPECT_EQ(c.refused, 1);
}

TEST(ResourceBookTest, NowSumsEachJobsFreshSamplesAndCountsTasksNearTheirLimit) {
  ResourceBook book;
  book.Record("n", Task("w", 0, 0, 1000, 95, 7, 100), kT0);
  book.Record("n", Task("w", 1, 0, 500, 10, 7, 100), kT0);
  book.Record("n", Task("w", 2, 0, 300, 10, 7, 100), kT0 - absl::Minutes(2));  // stale: not counted
  book.Record("n", Task("ps", 0, 0, 200, 50, 9), kT0);
  std::vector<ResourceBook::JobNow> now = book.Now(kT0, absl::Seconds(30));
  ASSERT_EQ(now.size(), 2u);
  const ResourceBook::JobNow& j = now[0].job_id == 7 ? now[0] : now[1];
  EXPECT_EQ(j.tasks, 2);
  EXPECT_EQ(j.cpu_milli, 1500);
  EXPECT_EQ(j.memory_bytes, 105);
  EXPECT_EQ(j.gpu_busy_milli, 750);
  EXPECT_EQ(j.near_memory_limit, 1);
  EXPECT_TRUE(ResourceBook::NearLimit(90, 100));
  EXPECT_FALSE(ResourceBook::NearLimit(89, 100));
  EXPECT_FALSE(ResourceBook::NearLimit(1000, 0)) << "no limit: never near it";
}

TEST(ResourceBookTest, TheJobAnswerHasEveryTaskOfTheViewAndSumsPerInterval) {
  ResourceBook book;
  book.Record("n1", Task("w", 0, 0, 1000, 95, 7, 100), kT0);
  book.Record("n2", Task("w", 1, 0, 500, 10, 7, 100), kT0 + absl::Milliseconds(300));
  book.Record("n1", Task("w", 0, 0, 800, 96, 7, 100), kT0 + absl::Seconds(10));
  v1::JobView view;
  view.set_name("j");
  view.set_id(7);
  for (int i = 0; i < 3; ++i) {
    v1::TaskView* t = view.add_tasks();
    t->set_name("j-w-" + std::to_string(i));
    t->set_role("w");
    t->set_index(i);
    t->set_node(i == 0 ? "n1" : "n2");
    t->set_state(v1::TASK_RUNNING);
    t->set_memory_mb(1);
    t->set_vcores_milli(2000);
    t->set_gpu_mask(i == 0 ? 0b11 : 0);
  }
  v1::JobResourcesResponse r = BuildJobResources(view, book.Job(7, absl::InfinitePast()), 10000);
  EXPECT_EQ(r.job(), "j");
  EXPECT_EQ(r.sample_interval_ms(), 10000);
  ASSERT_EQ(r.tasks_size(), 3);
  EXPECT_EQ(r.tasks(0).samples_size(), 2);
  EXPECT_EQ(r.tasks(0).memory_limit_bytes(), 100) << "the limit the agent reported";
  EXPECT_EQ(r.tasks(0).gpu_milli(), 2000);
  EXPECT_TRUE(r.tasks(0).near_memory_limit());
  EXPECT_EQ(r.tasks(1).samples_size(), 1);
  EXPECT_FALSE(r.tasks(1).near_memory_limit());
  EXPECT_EQ(r.tasks(2).samples_size(), 0) << "not sampled yet, still listed";
  EXPECT_EQ(r.tasks(2).memory_limit_bytes(), 1 << 20) << "the limit it asked for";
  // Two intervals: both tasks in the first, w-0 alone in the second.
  ASSERT_EQ(r.totals_size(), 2);
  EXPECT_EQ(r.totals(0).cpu_milli(), 1500);
  EXPECT_EQ(r.totals(0).memory_bytes(), 105);
  EXPECT_EQ(r.totals(0).time_unix_ms(), absl::ToUnixMillis(kT0 + absl::Milliseconds(300)));
  EXPECT_EQ(r.totals(1).cpu_milli(), 800);
}

}  // namespace
}  // namespace trainyard::server
