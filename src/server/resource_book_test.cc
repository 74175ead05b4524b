// The server's book of task resource samples: what it keeps and for how
// long, its bound, and the job answer built from it.
#include "server/resource_book.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

const absl::Time kResourceBookT0 = absl::FromUnixSeconds(1700000000);

v1::TaskResources ResourceBookTask(const std::string& role, int index, int attempt, int32_t cpu, int64_t memory,
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
  for (int i = 0; i < 10; ++i) book.Record("n1", ResourceBookTask("w", 0, 0, 100 * i, 1000), kResourceBookT0 + absl::Seconds(10 * i));
  auto job = book.Job(7, absl::InfinitePast());
  ASSERT_EQ(job.size(), 1u);
  const ResourceBook::TaskSeries& s = job.at({"w", 0});
  EXPECT_EQ(s.node, "n1");
  // 90 s: those of the last minute are kept.
  ASSERT_EQ(s.samples.size(), 7u);
  EXPECT_EQ(s.samples.front().time_unix_ms, absl::ToUnixMillis(kResourceBookT0 + absl::Seconds(30)));
  EXPECT_EQ(s.samples.back().cpu_milli, 900);
  EXPECT_EQ(book.Job(7, kResourceBookT0 + absl::Seconds(85)).at({"w", 0}).samples.size(), 1u);
  EXPECT_TRUE(book.Job(8, absl::InfinitePast()).empty());

  // A report of an attempt since replaced is not taken.
  book.Record("n1", ResourceBookTask("w", 0, 1, 5, 1), kResourceBookT0 + absl::Seconds(100));
  book.Record("n1", ResourceBookTask("w", 0, 0, 6, 1), kResourceBookT0 + absl::Seconds(101));
  job = book.Job(7, absl::InfinitePast());
  EXPECT_EQ(job.at({"w", 0}).attempt, 1);
  EXPECT_EQ(job.at({"w", 0}).samples.back().cpu_milli, 5);

  // A task sampled no more leaves once its newest sample is past the window.
  book.Prune(kResourceBookT0 + absl::Seconds(200));
  EXPECT_TRUE(book.Job(7, absl::InfinitePast()).empty());
  EXPECT_EQ(book.counts().tasks, 0);
  EXPECT_EQ(book.counts().samples, 0);
}

TEST(ResourceBookTest, KeepsAtMostMaxTasksAndCountsWhatItRefused) {
  ResourceBook book({.keep_for = absl::Minutes(15), .max_tasks = 2});
  book.Record("n", ResourceBookTask("w", 0, 0, 1, 1), kResourceBookT0);
  book.Record("n", ResourceBookTask("w", 1, 0, 1, 1), kResourceBookT0);
  book.Record("n", ResourceBookTask("w", 2, 0, 1, 1), kResourceBookT0);
  book.Record("n", ResourceBookTask("w", 0, 0, 1, 1), kResourceBookT0 + absl::Seconds(10));  // a task kept goes on
  ResourceBook::Counts c = book.counts();
  EXPECT_EQ(c.tasks, 2);
  EXPECT_EQ(c.samples, 3);
  EXPECT_EQ(c.refused, 1);
  // Full: a task sampled no more (w-1, for over three intervals) makes room.
  book.Record("n", ResourceBookTask("w", 0, 0, 1, 1), kResourceBookT0 + absl::Seconds(40));
  book.Record("n", ResourceBookTask("w", 2, 0, 1, 1), kResourceBookT0 + absl::Seconds(41));
  c = book.counts();
  EXPECT_EQ(c.tasks, 2);
  EXPECT_EQ(c.refused, 1);
  EXPECT_EQ(book.Job(7, absl::InfinitePast()).count({"w", 1}), 0u);
  EXPECT_EQ(book.Job(7, absl::InfinitePast()).count({"w", 2}), 1u);
}

TEST(ResourceBookTest, WhatAnAgentSendsIsBoundedAndClamped) {
  ResourceBook book;
  // Faster than the interval: each takes the last one's place.
  for (int i = 0; i < 1000; ++i) book.Record("n", ResourceBookTask("w", 0, 0, i, 1), kResourceBookT0 + absl::Milliseconds(i));
  auto job = book.Job(7, absl::InfinitePast());
  ASSERT_EQ(job.at({"w", 0}).samples.size(), 1u);
  EXPECT_EQ(job.at({"w", 0}).samples.back().cpu_milli, 999);
  // At the interval for hours: the last kMaxSamples.
  for (int i = 1; i <= 500; ++i) book.Record("n", ResourceBookTask("w", 0, 0, i, 1), kResourceBookT0 + absl::Seconds(10 * i));
  EXPECT_EQ(book.Job(7, absl::InfinitePast()).at({"w", 0}).samples.size(), ResourceBook::kMaxSamples);
  // Figures past any task's: clamped, so no sum overflows.
  v1::TaskResources huge = ResourceBookTask("w", 1, 0, INT32_MAX, INT64_MAX, 7, INT64_MAX);
  huge.mutable_sample()->set_gpu_busy_milli(-5);
  huge.mutable_sample()->set_gpu_memory_bytes(-1);
  book.Record("n", huge, kResourceBookT0 + absl::Seconds(5000));
  book.Record("n", huge, kResourceBookT0 + absl::Seconds(5010));
  ResourceBook::Sample s = book.Job(7, absl::InfinitePast()).at({"w", 1}).samples.back();
  EXPECT_EQ(s.cpu_milli, ResourceBook::kMaxMilli);
  EXPECT_EQ(s.memory_bytes, ResourceBook::kMaxBytes);
  EXPECT_EQ(s.gpu_busy_milli, -1) << "not known";
  EXPECT_EQ(s.gpu_memory_bytes, 0);
  EXPECT_TRUE(ResourceBook::NearLimit(INT64_MAX, INT64_MAX));
}

TEST(ResourceBookTest, StampsNeverGoBackSoAReaderOfTheNewestMissesNone) {
  ResourceBook book;
  book.Record("n1", ResourceBookTask("w", 0, 0, 1, 1), kResourceBookT0 + absl::Seconds(20));
  // A report that was on its way with an earlier time: stamped no earlier.
  book.Record("n2", ResourceBookTask("w", 1, 0, 2, 1), kResourceBookT0 + absl::Seconds(19));
  auto since = book.Job(7, kResourceBookT0 + absl::Seconds(20));
  ASSERT_EQ(since.at({"w", 1}).samples.size(), 1u);
  EXPECT_EQ(since.at({"w", 1}).samples[0].time_unix_ms, absl::ToUnixMillis(kResourceBookT0 + absl::Seconds(20)));
  // The newest comes always, however late `since` is; alone with newest_only.
  book.Record("n1", ResourceBookTask("w", 0, 0, 3, 1), kResourceBookT0 + absl::Seconds(30));
  EXPECT_EQ(book.Job(7, kResourceBookT0 + absl::Hours(1)).at({"w", 1}).samples.size(), 1u);
  auto newest = book.Job(7, absl::InfinitePast(), /*newest_only=*/true);
  ASSERT_EQ(newest.at({"w", 0}).samples.size(), 1u);
  EXPECT_EQ(newest.at({"w", 0}).samples[0].cpu_milli, 3);
}

TEST(ResourceBookTest, NowSumsEachJobsFreshSamplesAndCountsTasksNearTheirLimit) {
  ResourceBook book;
  book.Record("n", ResourceBookTask("w", 2, 0, 300, 10, 7, 100), kResourceBookT0 - absl::Minutes(2));  // stale: not counted
  book.Record("n", ResourceBookTask("w", 0, 0, 1000, 95, 7, 100), kResourceBookT0);
  book.Record("n", ResourceBookTask("w", 1, 0, 500, 10, 7, 100), kResourceBookT0);
  book.Record("n", ResourceBookTask("ps", 0, 0, 200, 50, 9), kResourceBookT0);
  std::vector<ResourceBook::JobNow> now = book.Now(kResourceBookT0, absl::Seconds(30));
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
  book.Record("n1", ResourceBookTask("w", 0, 0, 1000, 95, 7, 100), kResourceBookT0);
  book.Record("n2", ResourceBookTask("w", 1, 0, 500, 10, 7, 100), kResourceBookT0 + absl::Milliseconds(300));
  book.Record("n1", ResourceBookTask("w", 0, 0, 800, 96, 7, 100), kResourceBookT0 + absl::Seconds(10));
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
  // Two intervals: both tasks in the first; in the second w-0's new sample
  // and w-1's from the first (it sent none since, but recently).
  ASSERT_EQ(r.totals_size(), 2);
  EXPECT_EQ(r.totals(0).cpu_milli(), 1500);
  EXPECT_EQ(r.totals(0).memory_bytes(), 105);
  EXPECT_EQ(r.totals(0).time_unix_ms(), absl::ToUnixMillis(kResourceBookT0 + absl::Milliseconds(300)));
  EXPECT_EQ(r.totals(1).cpu_milli(), 1300);
  // Only the newest: each task's last sample and the last sums.
  v1::JobResourcesResponse newest = BuildJobResources(view, book.Job(7, absl::InfinitePast(), true), 10000, true);
  EXPECT_EQ(newest.tasks(0).samples_size(), 1);
  ASSERT_EQ(newest.totals_size(), 1);
  EXPECT_EQ(newest.totals(0).cpu_milli(), 1300);
}

}  // namespace
}  // namespace trainyard::server
