// The dashboard in a real headless browser (Debian's chromium, driven by
// playwright-core from tests/browser/) against a real cluster: a server and
// two agents. This side places one job, queues another behind it, and
// hands what the REST API says of them to tests/browser/dashboard_test.mjs,
// which checks the pages show the same: the placed job's GPUs on its node,
// a GPU held 0.25 by one job and 0.5 by another drawn 75 % full with both
// named, the other node cordoned with its reason,
// the queued job's pending reason, the overview's charts over time, new log lines within a second, no
// serious accessibility violations, and Kill taking the job off the
// running list, after which the history page lists it. Screenshots are kept under
// build/<preset>/test-artifacts/dashboard/ (or $TRAINYARD_TEST_ARTIFACTS).
//
// Skips only where chromium, node or the npm packages are missing, and
// never under CI (CI=true), where scripts/setup installs them.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

// Prints a tick with the time it printed it (Unix ms), five times a second.
constexpr char kTicking[] = R"yaml(name: ticking
user: ana
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi, gpus: 3}
    command: [sh, -c, 'while true; do echo "tick $(date +%s%3N)"; sleep 0.2; done']
)yaml";

// GPU shares: a quarter of a GPU and a half, which the placement packs
// onto one GPU of the ticking job's node (the other is cordoned then).
std::string ShareJob(const std::string& name, const std::string& gpus) {
  return absl::StrCat("name: ", name, "\nuser: cy\nreplicas:\n  worker:\n    count: 1\n    resources: {cpu: 100m, ",
                      "memory: 64Mi, gpus: ", gpus, "}\n    command: [sleep, '300']\n");
}

// Needs every GPU of both nodes: waits while the ticking job holds three.
constexpr char kWaiting[] = R"(name: waiting
user: bo
replicas:
  worker:
    count: 2
    resources: {cpu: 100m, memory: 64Mi, gpus: 8}
    command: [sleep, '300']
)";

std::string SourceDir() {
  const char* s = getenv("TRAINYARD_SOURCE_DIR");
  return s ? s : ".";
}

// Runs `argv` (a full path first) in its own process group, its output to
// files, and waits up to `timeout`; then kills the whole group (node and the
// browser it started).
CommandResult RunProgram(const std::vector<std::string>& argv, absl::Duration timeout) {
  TempDir tmp;
  std::string out = tmp.path() + "/out", err = tmp.path() + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  CommandResult r;
  int status = 0;
  bool done = WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout);
  if (!done) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    r.exit_code = -2;
  } else {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

bool Executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

// Why the browser test cannot run here ("" when it can).
std::string MissingTools() {
  const char* chromium = getenv("TRAINYARD_CHROMIUM");
  if (!Executable(chromium ? chromium : "") && !Executable("/usr/lib/chromium/chromium") &&
      !Executable("/usr/bin/chromium")) {
    return "no chromium (scripts/setup installs it)";
  }
  if (!Executable("/usr/bin/node")) return "no node (scripts/setup installs nodejs)";
  for (const char* pkg : {"playwright-core", "axe-core"}) {
    if (!std::filesystem::exists(absl::StrCat(SourceDir(), "/tests/browser/node_modules/", pkg))) {
      return absl::StrCat("no ", pkg, " in tests/browser/node_modules (scripts/setup runs npm ci there)");
    }
  }
  return "";
}

std::string ArtifactsDir() {
  const char* set = getenv("TRAINYARD_TEST_ARTIFACTS");
  std::string dir = set ? std::string(set) + "/dashboard"
                        : (std::filesystem::path(TrainyardBin()).parent_path() / "test-artifacts" / "dashboard").string();
  std::filesystem::create_directories(dir);
  return dir;
}

// The JSON of job `name` from the REST API once `ready` holds of it.
nlohmann::json WaitForJob(const Cluster& c, const std::string& name,
                          const std::function<bool(const nlohmann::json&)>& ready) {
  nlohmann::json job;
  WaitUntil(
      [&] {
        HttpResult r = HttpGet(c.http_address(), "/api/v1/jobs/" + name);
        if (r.status != 200) return false;
        job = r.json;
        return ready(job);
      },
      absl::Seconds(30));
  return job;
}

TEST(DashboardBrowserTest, PagesShowWhatTheClusterHolds) {
  if (std::string why = MissingTools(); !why.empty()) {
    if (getenv("CI")) FAIL() << "CI must run the browser test: " << why;
    GTEST_SKIP() << why;
  }
  // A sample for the overview's charts every 250 ms, of the tasks' resources
  // every 500 ms.
  Cluster c({.nodes = 2, .server_flags = {"--history-interval-ms", "250", "--task-sample-interval-ms", "500"}});
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string ticking = c.Submit(kTicking);
  nlohmann::json placed = WaitForJob(c, ticking, [](const nlohmann::json& j) {
    for (const auto& t : j["tasks"]) {
      if (t["role"] == "worker" && t["state"] == "RUNNING" && t["gpus"].size() == 3) return true;
    }
    return false;
  });
  nlohmann::json worker;
  for (const auto& t : placed["tasks"]) {
    if (t["role"] == "worker") worker = t;
  }
  ASSERT_EQ(worker["gpus"].size(), 3u) << placed.dump(1);
  // The other node cordoned by an admin (before the waiting job, whose
  // reason then says so for good).
  const std::string other = worker["node"] == "node-0" ? "node-1" : "node-0";
  CommandResult cordon = c.Cli({"cordon", other, "--reason", "disk check"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.out << cordon.err;
  ASSERT_TRUE(WaitUntil([&] { return HttpGet(c.http_address(), "/api/v1/nodes/" + other).json["state"] == "CORDONED"; },
                      absl::Seconds(10)));
  // Its GPU 7 found faulty by its agent: a double-bit ECC error the driver
  // logged (docs/gpu-health.md; simulated GPU 7 is on PCI bus 08).
  {
    std::ofstream events(c.dir() + "/" + other + "/gpu-events", std::ios::app);
    events << "NVRM: Xid (PCI:0000:08:00): 48, pid=1, name=python3, DBE (0x1)\n";
  }
  ASSERT_TRUE(WaitUntil([&] {
    nlohmann::json n = HttpGet(c.http_address(), "/api/v1/nodes/" + other).json;
    return n.contains("gpus") && n["gpus"].size() == 8 && !n["gpus"][7]["fault"].is_null();
  }, absl::Seconds(20)));
  // Two shares of one GPU on the ticking job's node: 0.25 and 0.5.
  std::string quarter = c.Submit(ShareJob("quarter", "0.25"));
  nlohmann::json quarter_job = WaitForJob(c, quarter, [](const nlohmann::json& j) { return j["state"] == "RUNNING"; });
  std::string half = c.Submit(ShareJob("half", "0.5"));
  nlohmann::json half_job = WaitForJob(c, half, [](const nlohmann::json& j) { return j["state"] == "RUNNING"; });
  auto worker_of = [](const nlohmann::json& job) {
    for (const auto& t : job["tasks"]) {
      if (t["role"] == "worker") return t;
    }
    return nlohmann::json();
  };
  const nlohmann::json q_task = worker_of(quarter_job), h_task = worker_of(half_job);
  ASSERT_EQ(q_task["gpus"].size(), 1u) << quarter_job.dump(1);
  ASSERT_EQ(q_task["node"], h_task["node"]) << quarter_job.dump(1) << half_job.dump(1);
  ASSERT_EQ(q_task["gpus"], h_task["gpus"]) << "the shares pack onto one GPU: " << quarter_job.dump(1)
                                            << half_job.dump(1);
  // A service (a page of its own in its task dir) on its job's page.
  std::string web = c.Submit(
      "name: web\nreplicas:\n  site:\n    kind: service\n    resources: {cpu: 100m, memory: 64Mi}\n"
      "    command: [sh, -c, 'echo served by the service > index.html && exec /usr/bin/python3 -m http.server "
      "--bind \"$TRAINYARD_NODE_ADDRESS\" \"$TRAINYARD_SERVICE_PORT\"']\n");
  WaitForJob(c, web, [](const nlohmann::json& j) { return j["state"] == "RUNNING"; });
  // A task that fails once (exit 3) and runs again (OnFailure, 2 restarts).
  std::string flaky = c.Submit(
      "name: flaky\nreplicas:\n  worker:\n    restartPolicy: OnFailure\n    maxRestarts: 2\n"
      "    resources: {cpu: 100m, memory: 64Mi}\n"
      "    command: [sh, -c, 'if [ ! -e \"$TRAINYARD_CHECKPOINT_DIR/once\" ]; then touch \"$TRAINYARD_CHECKPOINT_DIR/once\"; "
      "exit 3; fi; exec sleep 300']\n");
  nlohmann::json flaky_worker;
  WaitForJob(c, flaky, [&](const nlohmann::json& j) {
    for (const auto& t : j["tasks"]) {
      if (t["role"] == "worker" && t["restarts"] == 1 && t["state"] == "RUNNING") flaky_worker = t;
    }
    return !flaky_worker.is_null();
  });
  ASSERT_FALSE(flaky_worker.is_null()) << HttpGet(c.http_address(), "/api/v1/jobs/" + flaky).json.dump(1);
  std::string waiting = c.Submit(kWaiting);
  nlohmann::json queued = WaitForJob(c, waiting, [](const nlohmann::json& j) {
    return j["state"] == "QUEUED" && !j["pending_reason"].get<std::string>().empty();
  });
  ASSERT_EQ(queued["state"], "QUEUED") << queued.dump(1);

  // A schedule, paused so no run of it changes what the pages show.
  std::string nightly = c.dir() + "/nightly.yaml";
  WriteFile(nightly, "name: n\nreplicas:\n  worker:\n    command: [\"true\"]\n");
  CommandResult made = c.Cli({"schedule", "create", "nightly", "--cron", "0 2 * * *", "--time-zone", "Europe/Berlin", nightly});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  ASSERT_EQ(c.Cli({"schedule", "pause", "nightly"}).exit_code, 0);

  nlohmann::json expect = {
      {"schedule", {{"name", "nightly"}, {"cron", "0 2 * * * (Europe/Berlin)"}}},
      {"placed", {{"job", ticking}, {"user", "ana"}, {"node", worker["node"]}, {"gpus", worker["gpus"]}, {"task", worker["name"]}}},
      {"queued", {{"job", waiting}, {"reason", queued["pending_reason"]}}},
      {"shared", {{"node", q_task["node"]}, {"gpu", q_task["gpus"][0]}, {"jobs", {quarter, half}}, {"percent", 75}, {"user", "cy"}}},
      {"service", {{"job", web}}},
      {"restarted", {{"job", flaky}, {"task", flaky_worker["name"]}}},
      {"held", 3.75},
      {"server", c.address()},
      {"cordoned", {{"node", other}, {"reason", "disk check"}}},
      {"faulty", {{"node", other}, {"gpu", 7}, {"xid", 48}}},
      {"charts", {{"allocated", 3.75}, {"total", 16}, {"queue", queued["queue"]}}}};
  std::string out = ArtifactsDir();
  CommandResult r = RunProgram({"/usr/bin/node", SourceDir() + "/tests/browser/dashboard_test.mjs", "--url",
                                "http://" + c.http_address(), "--token", AdminToken(), "--out", out, "--expect",
                                expect.dump()},
                               absl::Seconds(150));
  std::cout << r.out << r.err << "screenshots: " << out << "\n";
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: nodes page shows"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: cordoned"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: faulty GPU: " + other + " GPU 7: faulty"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: a shared GPU"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: queues page: 3.75 GPUs used in the queue, 0.75 by cy"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: heat map"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: pages of one node"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: the state filter shows only"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: queued"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: overview charts"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: overview: 3.75 GPUs used in the queue, 0.75 by cy"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: log viewer shows new lines"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: the schedules page lists nightly"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: axe-core"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: a service opens from its job page in a sandbox"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: attempt classes: " + flaky_worker["name"].get<std::string>() +
                                          " shows 1 FAILED, failure budget 1 of 2 left"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("ok: Kill on the job page"));
  // The kill the browser made is the cluster's.
  EXPECT_EQ(HttpGet(c.http_address(), "/api/v1/jobs/" + ticking).json["state"], "KILLED");
}

}  // namespace
}  // namespace trainyard::testing
