// api/accounting: what a held allocation adds to a job's usage, a finished
// job's account from its record, and usage summed per user.
#include "api/accounting.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(AccountingTest, UsageCountsWholeGpusAndSharesForTheTimeHeld) {
  v1::JobUsage u;
  v1::Resource whole;
  whole.set_gpus(2);
  whole.set_vcores_milli(1500);
  whole.set_memory_mb(2048);
  AddUsage(whole, 1000, &u);
  EXPECT_EQ(u.gpu_milli_ms(), 2000 * 1000);
  EXPECT_EQ(u.cpu_milli_ms(), 1500 * 1000);
  EXPECT_EQ(u.memory_mb_ms(), 2048 * 1000);
  v1::Resource share;
  share.set_gpu_milli(250);
  share.set_gpu_mask(1);
  AddUsage(share, 4000, &u);
  EXPECT_EQ(u.gpu_milli_ms(), 2000 * 1000 + 250 * 4000) << "a quarter GPU counts a quarter";
  v1::Resource mask;
  mask.set_gpu_mask(0b1011);
  EXPECT_EQ(GpuMilliOf(mask), 3000);
  AddUsage(whole, -5, &u);
  EXPECT_EQ(u.gpu_milli_ms(), 2000 * 1000 + 250 * 4000) << "a clock stepped back adds nothing";
}

TEST(AccountingTest, AnAccountSaysHowTheJobEndedWhatItHeldAndWhetherItsTasksStillStop) {
  v1::JobRecord rec;
  rec.set_id(42);
  rec.set_name("train#42");
  rec.set_deleted_time_ms(9000);
  rec.set_state(v1::JOB_FAILED);
  rec.set_submit_time_ms(1000);
  rec.set_start_time_ms(4000);
  rec.set_end_time_ms(3604000);
  rec.mutable_spec()->set_user("ann");
  auto* rs = rec.mutable_spec()->add_replicas();
  rs->set_role("worker");
  rs->set_count(2);
  rs->mutable_resources()->set_gpus(4);
  rec.mutable_usage()->set_gpu_milli_ms(int64_t{8000} * 3600 * 1000);
  for (int i = 0; i < 2; ++i) {
    v1::TaskRecord* t = rec.add_tasks();
    t->set_role("worker");
    t->set_index(i);
    t->set_state(v1::TASK_FAILED);
    t->set_attempt(1);
    t->set_restart_count(1);
    t->add_launches()->set_attempt(0);
    t->add_attempts()->set_attempt_class(v1::ATTEMPT_OOM_KILLED);
    t->mutable_exit()->set_exit_code(i == 0 ? 1 : 137);
  }
  v1::JobAccount a = AccountOf(rec);
  EXPECT_EQ(a.name(), "train");
  EXPECT_TRUE(a.deleted());
  EXPECT_EQ(a.wait_ms(), 3000);
  EXPECT_EQ(a.elapsed_ms(), 3600000);
  EXPECT_DOUBLE_EQ(a.gpus(), 8.0);
  EXPECT_DOUBLE_EQ(a.gpu_hours(), 8.0);
  EXPECT_EQ(a.attempts(), 2) << "ended attempts";
  EXPECT_EQ(a.restarts(), 2);
  ASSERT_EQ(a.attempt_classes_size(), 1);
  EXPECT_EQ(a.attempt_classes(0).count(), 2);
  EXPECT_EQ(a.exit_code(), 137);
  EXPECT_EQ(a.exit_task(), "train-worker-1");
  rec.mutable_tasks(1)->mutable_exit()->set_exit_code(-1);  // signalled
  rec.mutable_tasks(1)->mutable_exit()->set_signal(9);
  EXPECT_EQ(AccountOf(rec).exit_code(), 1) << "an exit code ranks above a signal";
  rec.mutable_tasks(0)->mutable_exit()->set_exit_code(0);
  EXPECT_EQ(AccountOf(rec).exit_signal(), 9);
  EXPECT_EQ(AccountOf(rec).exit_task(), "train-worker-1");
  EXPECT_TRUE(a.settled());
  rec.mutable_tasks(1)->set_state(v1::TASK_RUNNING);
  EXPECT_FALSE(AccountOf(rec).settled());

  v1::JobRecord never;
  never.set_state(v1::JOB_KILLED);
  never.set_submit_time_ms(1000);
  never.set_end_time_ms(61000);
  v1::JobAccount n = AccountOf(never);
  EXPECT_EQ(n.wait_ms(), 60000) << "a job that never ran waited until its end";
  EXPECT_EQ(n.elapsed_ms(), 0);
}

}  // namespace
}  // namespace trainyard::api
