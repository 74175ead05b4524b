// LinkState's rules with explicit time: what waits while no stream is
// registered, the order of the replay, and how long ends are repeated.
#include "api/link_state.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

v1::AgentMessage Report(const std::string& role, v1::TaskState state) {
  v1::AgentMessage msg;
  msg.mutable_status()->set_job("j");
  msg.mutable_status()->set_role(role);
  msg.mutable_status()->set_state(state);
  return msg;
}

std::vector<std::string> Roles(const std::deque<v1::AgentMessage>& msgs) {
  std::vector<std::string> out;
  for (const auto& m : msgs) out.push_back(m.status().role());
  return out;
}

std::vector<std::string> Roles(const v1::Heartbeat& hb) {
  std::vector<std::string> out;
  for (const auto& t : hb.tasks()) out.push_back(t.role());
  return out;
}

TEST(LinkStateTest, ReportsWaitWhileNoStreamIsRegisteredAndGoFirstInOrderOnTheNext) {
  LinkState link(100);
  EXPECT_FALSE(link.OnStatus(Report("a", v1::TASK_RUNNING), false));
  EXPECT_FALSE(link.OnStatus(Report("b", v1::TASK_RUNNING), false));
  link.Registered();
  // A report during the replay waits behind it: none overtakes an older one.
  EXPECT_FALSE(link.OnStatus(Report("c", v1::TASK_RUNNING), false));
  EXPECT_EQ(Roles(link.TakeReplay()), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(link.OnStatus(Report("d", v1::TASK_RUNNING), false)) << "the replay is not over until it finds none";
  EXPECT_EQ(Roles(link.TakeReplay()), (std::vector<std::string>{"d"}));
  EXPECT_TRUE(link.TakeReplay().empty());
  EXPECT_TRUE(link.OnStatus(Report("e", v1::TASK_RUNNING), false)) << "replay over: written at once";
  link.Disconnected();
  EXPECT_FALSE(link.OnStatus(Report("f", v1::TASK_RUNNING), false));
  EXPECT_EQ(link.buffered(), 1u);
}

TEST(LinkStateTest, AReplayTheStreamBrokeKeepsTheRestAheadOfNewerReports) {
  LinkState link(100);
  for (const char* r : {"a", "b", "c"}) link.OnStatus(Report(r, v1::TASK_RUNNING), false);
  link.Registered();
  std::deque<v1::AgentMessage> replay = link.TakeReplay();
  replay.pop_front();  // "a" was written, then the stream broke
  EXPECT_FALSE(link.OnStatus(Report("d", v1::TASK_RUNNING), false));
  link.ReplayBroke(std::move(replay));
  link.Disconnected();
  link.Registered();
  EXPECT_EQ(Roles(link.TakeReplay()), (std::vector<std::string>{"b", "c", "d"}));
}

TEST(LinkStateTest, AWriteThatFailedWaitsForTheNextStreamAndTheOldestGoFirstWhenFull) {
  LinkState link(3);
  link.Registered();
  EXPECT_TRUE(link.TakeReplay().empty());
  ASSERT_TRUE(link.OnStatus(Report("a", v1::TASK_RUNNING), false));
  link.WriteFailed(Report("a", v1::TASK_RUNNING));
  link.Disconnected();
  for (const char* r : {"b", "c", "d"}) link.OnStatus(Report(r, v1::TASK_RUNNING), false);
  EXPECT_EQ(link.buffered(), 3u);
  link.Registered();
  EXPECT_EQ(Roles(link.TakeReplay()), (std::vector<std::string>{"b", "c", "d"})) << "bounded: the oldest dropped";
}

TEST(LinkStateTest, AnEndIsRepeatedInEachStreamsHeartbeatsForFifteenSecondsFromItsFirstThere) {
  LinkState link(100);
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  link.Registered();
  link.TakeReplay();
  EXPECT_TRUE(link.OnStatus(Report("early", v1::TASK_SUCCEEDED), true));
  EXPECT_TRUE(link.OnStatus(Report("live", v1::TASK_RUNNING), false));
  v1::Heartbeat hb;
  link.AddRecentEnds(1, t0, &hb);
  EXPECT_EQ(Roles(hb), std::vector<std::string>{"early"}) << "ends only";
  EXPECT_TRUE(link.OnStatus(Report("late", v1::TASK_FAILED), true));
  hb.Clear();
  link.AddRecentEnds(1, t0 + absl::Seconds(10), &hb);  // "late"'s first heartbeat on this stream
  EXPECT_EQ(Roles(hb), (std::vector<std::string>{"early", "late"}));
  hb.Clear();
  link.AddRecentEnds(1, t0 + LinkState::kRepeatEndsFor + absl::Milliseconds(1), &hb);
  EXPECT_EQ(Roles(hb), std::vector<std::string>{"late"})
      << "15 s from its first heartbeat on this stream, not from the last one";
  // The stream breaks; the server is away five minutes. The next stream
  // repeats what was left for 15 s from its own first heartbeat.
  link.Disconnected();
  link.Registered();
  const absl::Time t1 = t0 + absl::Minutes(5);
  hb.Clear();
  link.AddRecentEnds(2, t1, &hb);
  EXPECT_EQ(Roles(hb), std::vector<std::string>{"late"});
  hb.Clear();
  link.AddRecentEnds(2, t1 + LinkState::kRepeatEndsFor, &hb);
  EXPECT_EQ(hb.tasks_size(), 1);
  hb.Clear();
  link.AddRecentEnds(2, t1 + LinkState::kRepeatEndsFor + absl::Milliseconds(1), &hb);
  EXPECT_EQ(hb.tasks_size(), 0);
  EXPECT_EQ(link.recent_ends(), 0u);
}

TEST(LinkStateTest, AtMostTheBoundOfEndsIsKeptTheOldestDroppedFirst) {
  LinkState link(2);
  for (const char* r : {"a", "b", "c"}) link.OnStatus(Report(r, v1::TASK_SUCCEEDED), true);
  v1::Heartbeat hb;
  link.AddRecentEnds(1, absl::FromUnixSeconds(1'800'000'000), &hb);
  EXPECT_EQ(Roles(hb), (std::vector<std::string>{"b", "c"}));
}

}  // namespace
}  // namespace trainyard::api
