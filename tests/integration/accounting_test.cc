// Accounting on a real cluster, as a user reads it: `trainyard history`
// lists finished jobs with their times, GPU-hours and exit codes (deleted
// ones too, and after a server restart), `trainyard usage` sums them per
// user and per queue, -o json/csv print them for scripts, the REST routes
// answer the same, and bad input is refused naming the flag.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// The accounts `history -o json` prints, by name.
std::map<std::string, json> History(Cluster& c, std::vector<std::string> args = {}) {
  args.insert(args.begin(), "history");
  args.insert(args.end(), {"-o", "json"});
  CommandResult r = c.Cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, json> out;
  json j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.contains("jobs")) return out;
  for (const json& a : j["jobs"]) out[a["name"].get<std::string>()] = a;
  return out;
}

TEST(AccountingTest, HistoryAndUsageShowFinishedJobsDeletedOnesAndSurviveARestart) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string go = c.dir() + "/go";
  std::string train = c.dir() + "/train.yaml";
  WriteFile(train, absl::StrCat("name: train\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 2}\n"
                                "    command: [sh, -c, '",
                                WaitForFile(go), "']\n"));
  ASSERT_EQ(c.Cli({"submit", train}).exit_code, 0);
  std::string bad = c.dir() + "/bad.yaml";
  WriteFile(bad, "name: bad\nreplicas:\n  worker:\n    command: [sh, -c, 'exit 3']\n");
  ASSERT_EQ(c.Cli({"submit", bad}).exit_code, 0);
  ASSERT_TRUE(c.WaitForState("bad", "FAILED"));
  ASSERT_TRUE(c.WaitForState("train", "RUNNING"));
  EXPECT_EQ(History(c).count("train"), 0u) << "a running job is not in the history yet";
  WriteFile(go, "");
  ASSERT_TRUE(c.WaitForState("train", "SUCCEEDED"));

  // Both, as they ended; the stopping tasks' charge is in once settled.
  std::map<std::string, json> h;
  ASSERT_TRUE(WaitUntil([&] {
    h = History(c);
    return h.count("train") && h.count("bad") && h["train"]["settled"].get<bool>() && h["bad"]["settled"].get<bool>();
  }, absl::Seconds(30))) << json(h).dump(2);
  const json t = h["train"];
  EXPECT_EQ(t["state"], "SUCCEEDED");
  EXPECT_EQ(t["tasks"], 2);
  EXPECT_EQ(t["gpus"], 4.0);
  EXPECT_EQ(t["attempts"], 2);
  const double elapsed_s = t["elapsed_ms"].get<double>() / 1000.0;
  EXPECT_GT(elapsed_s, 0.0);
  // Four GPUs held at least while it ran, and no longer than from submit to now.
  const double gpu_s = t["gpu_hours"].get<double>() * 3600.0;
  EXPECT_GT(gpu_s, 0.0);
  EXPECT_GE(gpu_s, 4 * elapsed_s * 0.99) << t.dump(2);
  EXPECT_LE(gpu_s, 4 * (t["wait_ms"].get<double>() / 1000.0 + elapsed_s + 30)) << t.dump(2);
  EXPECT_EQ(h["bad"]["state"], "FAILED");
  EXPECT_EQ(h["bad"]["exit_code"], 3);
  EXPECT_EQ(h["bad"]["exit_task"], "bad-worker-0");
  EXPECT_EQ(h["bad"]["deleted"], false);

  // The table a person reads.
  CommandResult table = c.Cli({"history"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("GPU-HOURS"));
  EXPECT_THAT(table.out, HasSubstr("3 (bad-worker-0)"));

  // Deleted: gone from the live views, kept in the history.
  ASSERT_EQ(c.Cli({"delete", "bad"}).exit_code, 0);
  EXPECT_NE(c.Cli({"describe", "bad"}).exit_code, 0);
  h = History(c, {"--state", "failed"});
  ASSERT_EQ(h.size(), 1u) << json(h).dump(2);
  EXPECT_EQ(h["bad"]["deleted"], true);

  // A spreadsheet's rows: a header and one row per job.
  CommandResult csv = c.Cli({"history", "-o", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::vector<std::string> rows = absl::StrSplit(csv.out, "\r\n", absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 3u) << csv.out;
  EXPECT_THAT(rows[0], ::testing::StartsWith("id,name,user,queue,priority,state,"));

  // Usage per user and per queue.
  CommandResult u = c.Cli({"usage", "--since", "1h", "-o", "json"});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  json usage = json::parse(u.out);
  EXPECT_EQ(usage["total"]["jobs"], 2);
  EXPECT_EQ(usage["total"]["succeeded"], 1);
  EXPECT_EQ(usage["total"]["failed"], 1);
  EXPECT_NEAR(usage["total"]["gpu_hours"].get<double>(), t["gpu_hours"].get<double>(), 1e-9);
  ASSERT_EQ(usage["rows"].size(), 1u);
  CommandResult by_queue = c.Cli({"usage", "--by", "queue"});
  ASSERT_EQ(by_queue.exit_code, 0) << by_queue.err;
  EXPECT_THAT(by_queue.out, HasSubstr("QUEUE"));
  EXPECT_THAT(by_queue.out, HasSubstr("TOTAL"));

  // The REST routes answer the same.
  HttpResult rest = HttpGet(c.http_address(), "/api/v1/accounting/jobs?state=failed");
  ASSERT_EQ(rest.status, 200) << rest.body;
  ASSERT_EQ(rest.json["jobs"].size(), 1u) << rest.body;
  EXPECT_EQ(rest.json["jobs"][0]["name"], "bad");
  HttpResult rest_usage = HttpGet(c.http_address(), "/api/v1/accounting/usage?by=queue");
  ASSERT_EQ(rest_usage.status, 200) << rest_usage.body;
  EXPECT_EQ(rest_usage.json["total"]["jobs"], 2);
  EXPECT_EQ(HttpGet(c.http_address(), "/api/v1/accounting/jobs?state=running").status, 400);

  // Bad input names the flag.
  CommandResult since = c.Cli({"history", "--since", "yesterday"});
  EXPECT_EQ(since.exit_code, 2);
  EXPECT_THAT(since.err, HasSubstr("--since 'yesterday'"));
  CommandResult old = c.Cli({"history", "--until", "2020-01-01", "-o", "json"});
  EXPECT_EQ(old.exit_code, 0) << old.err << " (a day before --until, not the day before now)";
  CommandResult running = c.Cli({"history", "--state", "running"});
  EXPECT_EQ(running.exit_code, 2);
  EXPECT_THAT(running.err, HasSubstr("'running' is not one of SUCCEEDED"));

  // A restart reads them back from the store, the deleted one too.
  ASSERT_TRUE(c.RestartServer());
  std::map<std::string, json> back;
  ASSERT_TRUE(WaitUntil([&] {
    back = History(c);
    return back.size() == 2;
  }, absl::Seconds(30))) << json(back).dump(2);
  EXPECT_EQ(back["bad"]["deleted"], true);
  EXPECT_NEAR(back["train"]["gpu_hours"].get<double>(), t["gpu_hours"].get<double>(), 1e-9);
}

}  // namespace
}  // namespace trainyard::testing
