// The reconcile rule alone, beat by beat: a launch the agent has shown is
// gone after kMissingBeats beats without it; one it never showed is sent
// again after kUnackedBeats, never taken as gone (unless its job is being
// stopped); a listed or ended task's count starts again.
#include "server/control/reconcile_rule.h"

#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

TEST(ReconcileRuleTest, AnAcknowledgedTaskIsGoneAfterThreeBeatsWithoutIt) {
  TaskRt rt;
  Acknowledge(rt);
  EXPECT_EQ(OnBeat(rt, {}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {.listed = true}), Unlisted::kWait);  // listed: counted from 0 again
  EXPECT_EQ(OnBeat(rt, {}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {}), Unlisted::kGone);
}

TEST(ReconcileRuleTest, ALaunchInFlightIsNeverGoneAndIsSentAgainAfterTenBeats) {
  TaskRt rt;  // launched; the agent has not shown it
  for (int i = 1; i < kUnackedBeats; ++i) {
    EXPECT_EQ(OnBeat(rt, {.launching = true}), Unlisted::kWait) << "beat " << i;
  }
  EXPECT_EQ(OnBeat(rt, {.launching = true}), Unlisted::kLaunchAgain);
  // Shown at last (a status): beats before that no longer count.
  Acknowledge(rt);
  EXPECT_EQ(rt.missing_beats, 0);
  EXPECT_EQ(OnBeat(rt, {}), Unlisted::kWait);
}

TEST(ReconcileRuleTest, ATaskOfAStoppingJobThatItsAgentDoesNotHaveIsGoneAcknowledgedOrNot) {
  TaskRt rt;
  EXPECT_EQ(OnBeat(rt, {.stopping = true, .launching = true}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {.stopping = true, .launching = true}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {.stopping = true, .launching = true}), Unlisted::kGone);
}

TEST(ReconcileRuleTest, AnUnacknowledgedTaskPastLaunchingIsNeitherGoneNorLaunchedAgain) {
  TaskRt rt;  // RUNNING from a status of an older launch, say: not this launch's
  for (int i = 0; i < 2 * kUnackedBeats; ++i) EXPECT_EQ(OnBeat(rt, {}), Unlisted::kWait) << "beat " << i;
}

TEST(ReconcileRuleTest, AnAcknowledgedTaskOfAStoppingJobIsGoneAfterThreeBeats) {
  TaskRt rt;
  Acknowledge(rt);
  EXPECT_EQ(OnBeat(rt, {.stopping = true}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {.stopping = true}), Unlisted::kWait);
  EXPECT_EQ(OnBeat(rt, {.stopping = true}), Unlisted::kGone);
}

TEST(ReconcileRuleTest, AnEndedTaskIsNeverMissing) {
  TaskRt rt;
  Acknowledge(rt);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(OnBeat(rt, {.ended = true}), Unlisted::kWait);
  EXPECT_EQ(rt.missing_beats, 0);
}

}  // namespace
}  // namespace trainyard::server
