// The event-order property test: a few thousand seeded random scripts of
// events (submissions, rounds, launches delivered or lost, task statuses
// incl. those of older attempts, heartbeats, nodes paused, lost and back,
// agents reconnecting twice or crashing, kills, deletes, job master
// verdicts, drains, server restarts from the store) through ControlState,
// its invariants checked after every event (control_harness.h). A failure
// prints the seed and the trace of events that led to it.
#include "server/control/control_harness.h"

#include "common/logging.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

constexpr int kScripts = 3000;
constexpr int kSteps = 150;

TEST(ControlHarnessTest, RandomEventOrdersNeverAbortAndKeepEveryTaskInExactlyOnePlace) {
  SetLogLevel(LogLevel::kError);  // each script logs every node lost and task moved
  for (uint64_t seed = 1; seed <= kScripts; ++seed) {
    std::string script = RandomControlScript(seed, kSteps);
    absl::Status st = RunControlScript(script);
    if (!st.ok()) {
      std::string trace;
      (void)RunControlScript(script, &trace);  // the same failure again, for its trace
      FAIL() << "seed " << seed << ": " << st.message() << "\nevents:\n" << trace;
    }
  }
  SetLogLevel(LogLevel::kInfo);
}

TEST(ControlHarnessTest, AnyBytesAreAScript) {
  SetLogLevel(LogLevel::kError);
  EXPECT_TRUE(RunControlScript("").ok());
  EXPECT_TRUE(RunControlScript(std::string(64, '\xff')).ok());
  EXPECT_TRUE(RunControlScript(std::string(64, '\0')).ok()) << "64 submissions, capped";
  SetLogLevel(LogLevel::kInfo);
}

}  // namespace
}  // namespace trainyard::server
