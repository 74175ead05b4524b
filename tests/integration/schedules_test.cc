// Scheduled jobs on a real cluster, as a user drives them: `trainyard
// schedule create` with a cron (seconds first, so the test need not wait
// for minutes), runs that are the creator's jobs and succeed, the history
// in `schedule describe`, skip and replace while a run goes on, pause and
// a run by hand, another user refused, a server restart that keeps them,
// the REST routes, and bad input named.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

json Describe(Cluster& c, const std::string& name) {
  CommandResult r = c.Cli({"schedule", "describe", name, "-o", "json"});
  if (r.exit_code != 0) return json();
  return json::parse(r.out, nullptr, false);
}

// The runs of a schedule's history with this outcome.
std::vector<json> Runs(const json& view, const std::string& outcome) {
  std::vector<json> out;
  if (!view.contains("schedule") || !view["schedule"].contains("runs")) return out;
  for (const json& r : view["schedule"]["runs"]) {
    if (r.value("outcome", "") == outcome) out.push_back(r);
  }
  return out;
}

// A cron with seconds, every 2 s: the server's minimum interval lowered.
const std::vector<std::string> kFastSchedules = {"--schedule-min-interval-seconds", "1"};

TEST(SchedulesTest, RunsComeDueAsTheCreatorsJobsAndTheScheduleSurvivesARestart) {
  Cluster c({.nodes = 1, .server_flags = kFastSchedules});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string quick = c.dir() + "/quick.yaml";
  WriteFile(quick, "name: ignored\nreplicas:\n  worker:\n    command: [sh, -c, 'echo tick']\n");
  std::string ana = c.UserToken("ana");
  CommandResult made = c.CliAs(ana, {"schedule", "create", "ticker", "--cron", "*/2 * * * * *", quick});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_THAT(made.out, HasSubstr("schedule ticker created; next run "));

  // Two runs, each ana's job, each succeeded.
  json view;
  ASSERT_TRUE(WaitUntil([&] {
    view = Describe(c, "ticker");
    std::vector<json> runs = Runs(view, "submitted");
    if (runs.size() < 2) return false;
    for (const json& r : runs) {
      if (!c.WaitForState(r["job"].get<std::string>(), "SUCCEEDED", absl::Seconds(1))) return false;
    }
    return true;
  }, absl::Seconds(60))) << view.dump(2);
  const std::string job = Runs(view, "submitted")[0]["job"];
  EXPECT_THAT(job, ::testing::StartsWith("ticker-"));
  EXPECT_EQ(c.Describe(job)["user"], "ana");
  EXPECT_EQ(view["schedule"]["user"], "ana");

  // The tables a person reads.
  CommandResult list = c.Cli({"schedule", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("ticker"));
  EXPECT_THAT(list.out, HasSubstr("*/2 * * * * *"));
  EXPECT_THAT(list.out, HasSubstr("ACTIVE"));
  CommandResult text = c.Cli({"schedule", "describe", "ticker"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("Concurrency:  skip"));
  EXPECT_THAT(text.out, HasSubstr(job));

  // Another user may not pause it or run it; its owner may.
  CommandResult stranger = c.CliAs(c.UserToken("bo"), {"schedule", "pause", "ticker"});
  EXPECT_NE(stranger.exit_code, 0);
  EXPECT_THAT(stranger.err, HasSubstr("may not pause schedule ticker: it belongs to 'ana'"));
  CommandResult stranger_run = c.CliAs(c.UserToken("bo"), {"schedule", "run", "ticker"});
  EXPECT_THAT(stranger_run.err, HasSubstr("may not run schedule ticker: its runs are 'ana''s jobs"));
  // The views show no spec (its env, its commands), as a job's show none.
  EXPECT_TRUE(view["schedule"]["spec"].value("replicas", json::array()).empty()) << view.dump(2);
  EXPECT_EQ(view["schedule"]["spec"].value("queue", ""), "default");
  CommandResult pause = c.CliAs(ana, {"schedule", "pause", "ticker"});
  ASSERT_EQ(pause.exit_code, 0) << pause.err;
  json paused = Describe(c, "ticker");
  EXPECT_EQ(paused["schedule"].value("paused", false), true);
  EXPECT_EQ(paused.value("next_run_unix_ms", 0), 0) << paused.dump(2);
  CommandResult run = c.CliAs(ana, {"schedule", "run", "ticker"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Named by the time; -2 when a scheduled run took that name this second.
  EXPECT_THAT(run.out, ::testing::MatchesRegex("job ticker-[0-9]+(-[0-9]+)? submitted\n"));

  // A restart reads it back, paused, with its history.
  auto newest_due = [](const json& view) -> int64_t {
    if (!view.contains("schedule") || view["schedule"]["runs"].empty()) return 0;
    const json& t = view["schedule"]["runs"].back()["time_unix_ms"];
    return t.is_string() ? std::stoll(t.get<std::string>()) : t.get<int64_t>();
  };
  const int64_t before = newest_due(Describe(c, "ticker"));
  ASSERT_TRUE(c.RestartServer());
  json back;
  ASSERT_TRUE(WaitUntil([&] {
    back = Describe(c, "ticker");
    return back.contains("schedule");
  }, absl::Seconds(30)));
  EXPECT_EQ(back["schedule"].value("paused", false), true);
  EXPECT_EQ(newest_due(back), before) << "paused: nothing came due meanwhile";
  ASSERT_EQ(c.CliAs(ana, {"schedule", "resume", "ticker"}).exit_code, 0);
  ASSERT_TRUE(WaitUntil([&] { return newest_due(Describe(c, "ticker")) > before; }, absl::Seconds(30)));

  // The REST routes.
  HttpResult rest = HttpGet(c.http_address(), "/api/v1/schedules");
  ASSERT_EQ(rest.status, 200) << rest.body;
  ASSERT_EQ(rest.json["schedules"].size(), 1u) << rest.body;
  EXPECT_EQ(rest.json["schedules"][0]["name"], "ticker");
  EXPECT_EQ(rest.json["schedules"][0]["concurrency"], "skip");
  HttpResult one = HttpGet(c.http_address(), "/api/v1/schedules/ticker");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_FALSE(one.json["runs"].empty());
  EXPECT_EQ(HttpGet(c.http_address(), "/api/v1/schedules/nosuch").status, 404);

  // Deleted: gone; its jobs stay.
  ASSERT_EQ(c.CliAs(ana, {"schedule", "delete", "ticker"}).exit_code, 0);
  EXPECT_NE(c.Cli({"schedule", "describe", "ticker"}).exit_code, 0);
  EXPECT_EQ(c.Describe(job)["state"], "SUCCEEDED");
}

TEST(SchedulesTest, ARunDueWhileTheLastGoesOnIsSkippedOrReplacesIt) {
  Cluster c({.nodes = 1, .server_flags = kFastSchedules});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string slow = c.dir() + "/slow.yaml";
  WriteFile(slow, "name: ignored\nreplicas:\n  worker:\n    command: [sleep, '600']\n");
  ASSERT_EQ(c.Cli({"schedule", "create", "skipper", "--cron", "*/2 * * * * *", slow}).exit_code, 0);
  ASSERT_EQ(c.Cli({"schedule", "create", "replacer", "--cron", "*/2 * * * * *", "--concurrency", "replace", slow})
                .exit_code,
            0);
  json skipper, replacer;
  ASSERT_TRUE(WaitUntil([&] {
    skipper = Describe(c, "skipper");
    replacer = Describe(c, "replacer");
    return !Runs(skipper, "skipped").empty() && Runs(replacer, "submitted").size() >= 2;
  }, absl::Seconds(60))) << skipper.dump(2) << replacer.dump(2);
  EXPECT_EQ(Runs(skipper, "submitted").size(), 1u) << skipper.dump(2);
  EXPECT_THAT(Runs(skipper, "skipped")[0].value("message", ""), HasSubstr("has not ended (concurrency: skip)"));
  const std::string first = Runs(replacer, "submitted")[0]["job"];
  EXPECT_THAT(Runs(replacer, "submitted")[1].value("message", ""), HasSubstr("replaced " + first));
  EXPECT_TRUE(c.WaitForState(first, "KILLED"));
  ASSERT_EQ(c.Cli({"schedule", "delete", "skipper"}).exit_code, 0);
  ASSERT_EQ(c.Cli({"schedule", "delete", "replacer"}).exit_code, 0);
}

TEST(SchedulesTest, BadInputIsRefusedNamingTheFlagOrField) {
  Cluster c({.nodes = 1});
  std::string spec = c.dir() + "/spec.yaml";
  WriteFile(spec, "name: ignored\nreplicas:\n  worker:\n    command: [true]\n");
  CommandResult cron = c.Cli({"schedule", "create", "bad", "--cron", "0 25 * * *", spec});
  EXPECT_NE(cron.exit_code, 0);
  EXPECT_THAT(cron.err, HasSubstr("cron: field 2 (hour): 25 is outside 0-23"));
  CommandResult zone = c.Cli({"schedule", "create", "bad", "--cron", "@daily", "--time-zone", "Mars/Base", spec});
  EXPECT_THAT(zone.err, HasSubstr("time_zone: time zone 'Mars/Base' is not known here"));
  CommandResult fast = c.Cli({"schedule", "create", "fast", "--cron", "*/10 * * * * *", spec});
  EXPECT_THAT(fast.err, HasSubstr("comes due 10s apart; this server runs a schedule at most once every 1m"));
  CommandResult name = c.Cli({"schedule", "create", "Bad_Name", "--cron", "@daily", spec});
  EXPECT_THAT(name.err, HasSubstr("name: 'Bad_Name' must be"));
  std::string wrong = c.dir() + "/wrong.yaml";
  WriteFile(wrong, "name: x\nreplicas:\n  worker:\n    count: -2\n    command: [true]\n");
  CommandResult field = c.Cli({"schedule", "create", "bad", "--cron", "@daily", wrong});
  EXPECT_THAT(field.err, HasSubstr("replicas.worker.count"));
  CommandResult policy = c.Cli({"schedule", "create", "bad", "--cron", "@daily", "--concurrency", "sometimes", spec});
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_THAT(policy.err, HasSubstr("--concurrency"));
  EXPECT_NE(c.Cli({"schedule", "pause", "nosuch"}).exit_code, 0);
  CommandResult list = c.Cli({"schedule", "list", "-o", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(json::parse(list.out).value("schedules", json::array()).size(), 0u) << "nothing was made";
}

}  // namespace
}  // namespace trainyard::testing
