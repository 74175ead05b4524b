// The barrier record: a master writes how many barriers its job passed, and
// a master started with that count (a restart) refuses generations past it.
#include "jobmaster/barrier_record.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobmaster/sim_fleet.h"
#include "jobmaster/test_master.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

absl::Time Deadline() { return absl::Now() + absl::Seconds(20); }

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid());
}

TEST(BarrierRecord, ReadsWhatWasWrittenAndNamesWhatIsWrong) {
  std::string path = TempPath("record");
  EXPECT_EQ(ReadBarrierRecord(path).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteBarrierRecord(path, 7).ok());
  EXPECT_EQ(*ReadBarrierRecord(path), 7);
  std::ofstream(path, std::ios::trunc) << "seven\n";
  absl::StatusOr<int64_t> bad = ReadBarrierRecord(path);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("holds 'seven\n', not a count of barriers"));
  std::remove(path.c_str());
}

pb::JobMasterRequest Barrier(int64_t generation) {
  pb::JobMasterRequest r;
  r.mutable_barrier()->set_generation(generation);
  return r;
}

// Two barriers pass on the first master, which records them; the next
// master starts from the record: a retry of barrier 1 is answered at once,
// generation 3 is refused, and barrier 2 is the one that waits.
TEST(BarrierRecord, AMasterStartedFromTheRecordKnowsWhatTheJobPassed) {
  std::string path = TempPath("jobmaster-barriers");
  JobMasterConfig config;
  config.job_name = "bert";
  config.num_workers = 2;
  config.barrier_record = path;
  {
    TestMaster first(config);
    ASSERT_TRUE(first.status().ok()) << first.status();
    SimFleet fleet("127.0.0.1", first.port());
    ASSERT_TRUE(fleet.Connect(2, Deadline()).ok());
    ASSERT_TRUE(fleet.RegisterAll({0, 1}, Deadline()).ok());
    for (int g = 0; g < 2; ++g) {
      for (int i = 0; i < 2; ++i) fleet.Queue(i, Barrier(g));
      ASSERT_TRUE(fleet.Exchange(2, Deadline()).ok());
    }
  }
  absl::StatusOr<int64_t> passed = ReadBarrierRecord(path);
  ASSERT_TRUE(passed.ok()) << passed.status();
  EXPECT_EQ(*passed, 2);
  config.passed_barriers = *passed;
  TestMaster second(config);
  SimFleet fleet("127.0.0.1", second.port());
  ASSERT_TRUE(fleet.Connect(2, Deadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll({0, 1}, Deadline()).ok());
  EXPECT_EQ(fleet.Last(0).registered().barrier_generation(), 2);
  fleet.Queue(0, Barrier(1));
  fleet.Queue(1, Barrier(3));
  ASSERT_TRUE(fleet.Exchange(2, Deadline()).ok());
  EXPECT_EQ(fleet.Last(0).barrier().generation(), 1) << fleet.Last(0).DebugString();
  EXPECT_THAT(fleet.Last(1).error().message(),
              HasSubstr("barrier generation 3 is ahead of job bert: it has passed 2"));
  for (int i = 0; i < 2; ++i) fleet.Queue(i, Barrier(2));
  ASSERT_TRUE(fleet.Exchange(2, Deadline()).ok());
  EXPECT_EQ(fleet.Last(1).barrier().generation(), 2);
  EXPECT_EQ(*ReadBarrierRecord(path), 3);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace trainyard::jobmaster
