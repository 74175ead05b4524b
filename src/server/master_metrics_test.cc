// JobMasterMetrics: the masters' figures summed with no job label, a
// barrier histogram that never goes down as masters stop or restart, and
// bad figures refused naming the field.
#include "server/master_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

v1::JobMasterSummary Summary(const std::string& job, std::vector<int32_t> workers, int connections,
                             std::vector<double> barriers) {
  v1::JobMasterSummary s;
  s.set_job(job);
  s.set_master_address("127.0.0.2:20000");
  for (int32_t n : workers) s.add_workers_by_state(n);
  s.set_connections(connections);
  Histogram h = LatencyHistogram();
  for (double b : barriers) h.Observe(b);
  for (int i = 0; i < h.buckets(); ++i) s.add_barrier_bounds_seconds(h.bound(i));
  for (int i = 0; i <= h.buckets(); ++i) s.add_barrier_buckets(h.in_bucket(i));
  s.set_barrier_seconds_sum(h.sum());
  return s;
}

const absl::Time kMasterMetricsT0 = absl::FromUnixSeconds(1000);

TEST(JobMasterMetricsTest, MastersAreSummed) {
  JobMasterMetrics m;
  ASSERT_TRUE(m.Report(Summary("a", {0, 1, 3, 0, 0}, 4, {0.002}), kMasterMetricsT0).ok());
  ASSERT_TRUE(m.Report(Summary("b", {0, 0, 2, 1, 1}, 2, {0.02, 0.3}), kMasterMetricsT0).ok());
  JobMasterTotals t = m.Totals(kMasterMetricsT0 + absl::Seconds(1));
  EXPECT_EQ(t.reporting, 2);
  EXPECT_EQ(t.workers[v1::RUNNING], 5);
  EXPECT_EQ(t.workers[v1::STARTING], 1);
  EXPECT_EQ(t.workers[v1::ERROR], 1);
  EXPECT_EQ(t.connections, 6);
  EXPECT_EQ(t.barrier_seconds.count(), 3);
  // A newer summary of a master replaces its earlier one.
  ASSERT_TRUE(m.Report(Summary("a", {0, 0, 4, 0, 0}, 4, {0.002, 0.004}), kMasterMetricsT0 + absl::Seconds(2)).ok());
  t = m.Totals(kMasterMetricsT0 + absl::Seconds(2));
  EXPECT_EQ(t.workers[v1::RUNNING], 6);
  EXPECT_EQ(t.barrier_seconds.count(), 4);
}

TEST(JobMasterMetricsTest, StoppedSilentAndRestartedMastersKeepTheirBarriers) {
  JobMasterMetrics m;
  ASSERT_TRUE(m.Report(Summary("a", {0, 0, 2, 0, 0}, 2, {0.1, 0.2}), kMasterMetricsT0).ok());
  ASSERT_TRUE(m.Report(Summary("b", {0, 0, 2, 0, 0}, 2, {0.1}), kMasterMetricsT0).ok());
  ASSERT_TRUE(m.Report(Summary("c", {0, 0, 2, 0, 0}, 2, {0.5, 0.5}), kMasterMetricsT0).ok());
  // a stops; b restarts at the same address (its count starts again).
  v1::JobMasterSummary last = Summary("a", {0, 0, 0, 2, 0}, 0, {0.1, 0.2, 0.3});
  last.set_final(true);
  ASSERT_TRUE(m.Report(last, kMasterMetricsT0 + absl::Seconds(1)).ok());
  ASSERT_TRUE(m.Report(Summary("b", {0, 1, 0, 0, 0}, 1, {}), kMasterMetricsT0 + absl::Seconds(1)).ok());
  ASSERT_TRUE(m.Report(Summary("c", {0, 0, 2, 0, 0}, 2, {0.5, 0.5}), kMasterMetricsT0 + absl::Seconds(1)).ok());
  JobMasterTotals t = m.Totals(kMasterMetricsT0 + absl::Seconds(2));
  EXPECT_EQ(t.reporting, 2);
  EXPECT_EQ(t.workers[v1::COMPLETED], 0) << "a stopped master counts no more";
  EXPECT_EQ(t.barrier_seconds.count(), 3 + 1 + 2);
  // c goes silent: it stops counting, its barriers stay.
  ASSERT_TRUE(m.Report(Summary("b", {0, 0, 1, 0, 0}, 1, {0.1}), kMasterMetricsT0 + absl::Seconds(12)).ok());
  t = m.Totals(kMasterMetricsT0 + absl::Seconds(12));
  EXPECT_EQ(t.reporting, 1);
  EXPECT_EQ(t.connections, 1);
  EXPECT_EQ(t.barrier_seconds.count(), 3 + 1 + 2 + 1);
  // c was only silent: its next summary replaces its own, not adds to it.
  v1::JobMasterSummary c_last = Summary("c", {0, 0, 0, 2, 0}, 0, {0.5, 0.5, 0.1});
  c_last.set_final(true);
  ASSERT_TRUE(m.Report(c_last, kMasterMetricsT0 + absl::Seconds(13)).ok());
  EXPECT_EQ(m.Totals(kMasterMetricsT0 + absl::Seconds(13)).barrier_seconds.count(), 3 + 1 + 3 + 1);
  // b, silent past kForget, is taken as stopped; its barrier stays.
  t = m.Totals(kMasterMetricsT0 + absl::Seconds(12) + JobMasterMetrics::kForget);
  EXPECT_EQ(t.reporting, 0);
  EXPECT_EQ(t.barrier_seconds.count(), 3 + 1 + 3 + 1);
}

TEST(JobMasterMetricsTest, BadFiguresNameTheirField) {
  JobMasterMetrics m;
  v1::JobMasterSummary s = Summary("a", {0, 0, 1, 0, 0, 7}, 1, {});
  EXPECT_THAT(m.Report(s, kMasterMetricsT0).message(), HasSubstr("workers_by_state: 6 entries"));
  s = Summary("a", {0, -1}, 1, {});
  EXPECT_THAT(m.Report(s, kMasterMetricsT0).message(), HasSubstr("workers_by_state: a count is negative"));
  s = Summary("a", {}, -3, {});
  EXPECT_THAT(m.Report(s, kMasterMetricsT0).message(), HasSubstr("connections: negative"));
  s = Summary("a", {}, 0, {});
  s.set_barrier_bounds_seconds(0, 0.7);
  EXPECT_THAT(m.Report(s, kMasterMetricsT0).message(), HasSubstr("barrier_bounds_seconds: "));
  s = Summary("a", {}, 0, {});
  s.add_barrier_buckets(1);
  EXPECT_THAT(m.Report(s, kMasterMetricsT0).message(), HasSubstr("barrier_buckets: 16 entries, not 15"));
  s = Summary("a", {}, 0, {});
  s.set_barrier_seconds_sum(-1);
  EXPECT_THAT(m.Report(s, kMasterMetricsT0).message(), HasSubstr("barrier_seconds_sum"));
  s.set_job("");
  EXPECT_THAT(m.Report(s, kMasterMetricsT0).message(), HasSubstr("job: must be set"));
  EXPECT_EQ(m.Totals(kMasterMetricsT0).reporting, 0);
}

}  // namespace
}  // namespace trainyard::server
