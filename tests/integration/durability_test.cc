// Durability and fault tolerance with real processes killed for real: the
// server SIGKILLed under load and restarted on the same store, a server
// restart that must not disturb running tasks, an agent restart with running
// tasks, a node lost and coming back, and a corrupt store. Tasks are shell
// loops that append their pid to a file, so "not restarted" is checked as
// "one pid, still alive". TRAINYARD_DURABILITY_ITERATIONS raises the crash
// loop's 20 iterations for a longer run.
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// The pids a task appended to `path`, one a line.
std::vector<pid_t> Pids(const std::string& path) {
  std::vector<pid_t> out;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid)) out.push_back(pid);
  }
  return out;
}

// A worker that records its pid, runs until `OUT/NAME.stop` exists, then
// exits with `code`.
std::string LoopingJob(const std::string& name, const std::string& out, int count, int code,
                       const std::string& extra = "") {
  return absl::StrCat("name: ", name, "\nreplicas:\n  worker:\n    count: ", count, "\n", extra,
                      "    resources: {gpus: 1, ports: 1, cpu: 0.5, memory: 64Mi}\n"
                      "    command: [sh, -c, 'echo $$ >> ", out, "/$TRAINYARD_TASK_NAME.pid; while [ ! -f ", out, "/",
                      name, ".stop ]; do sleep 0.05; done; exit ", code, "']\n");
}

std::string TaskPidFile(const std::string& out, const nlohmann::json& task) {
  return absl::StrCat(out, "/", task["name"].get<std::string>(), ".pid");
}

bool WaitDead(pid_t pid, absl::Duration timeout = absl::Seconds(20)) {
  return WaitUntil([&] { return !Alive(pid); }, timeout, absl::Milliseconds(50));
}

TEST(DurabilityTest, ServerRestartAdoptsRunningTasksAppliesMissedExitsAndKillsUnknownTasks) {
  Cluster c({.nodes = 2, .node_timeout_ms = 5000});
  std::string out = MakeOut(c);
  std::string keep = c.Submit(LoopingJob("keep", out, 2, 0));
  std::string quick = c.Submit(LoopingJob("quick", out, 1, 5));
  ASSERT_FALSE(keep.empty());
  ASSERT_FALSE(quick.empty());
  ASSERT_TRUE(c.WaitForState(keep, "RUNNING")) << c.Describe(keep).dump(2);
  ASSERT_TRUE(c.WaitForState(quick, "RUNNING")) << c.Describe(quick).dump(2);
  nlohmann::json kd = c.Describe(keep);
  std::vector<std::string> keep_files = {TaskPidFile(out, Task(kd, "worker", 0)), TaskPidFile(out, Task(kd, "worker", 1))};
  std::string quick_file = TaskPidFile(out, Task(c.Describe(quick), "worker", 0));
  ASSERT_TRUE(WaitUntil([&] { return Pids(keep_files[0]).size() == 1 && Pids(keep_files[1]).size() == 1 &&
                                   Pids(quick_file).size() == 1; }, absl::Seconds(10)));

  // A copy of the store as it was before "ghost" existed.
  c.KillServer();
  ASSERT_EQ(system(absl::StrCat("cp -a ", c.server_data_dir(), " ", c.dir(), "/old-store").c_str()), 0);
  ASSERT_TRUE(c.RestartServer());
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string ghost = c.Submit(LoopingJob("ghost", out, 1, 0));
  ASSERT_TRUE(c.WaitForState(ghost, "RUNNING")) << c.Describe(ghost).dump(2);
  std::string ghost_file = TaskPidFile(out, Task(c.Describe(ghost), "worker", 0));
  ASSERT_TRUE(WaitUntil([&] { return Pids(ghost_file).size() == 1; }, absl::Seconds(10)));

  // Down again; "quick" exits with 5 meanwhile; the server comes back on the
  // old store, which knows nothing of "ghost".
  c.KillServer();
  WriteFile(out + "/quick.stop", "");
  ASSERT_TRUE(WaitDead(Pids(quick_file)[0]));
  ASSERT_EQ(system(absl::StrCat("rm -rf ", c.server_data_dir(), " && mv ", c.dir(), "/old-store ", c.server_data_dir())
                       .c_str()),
            0);
  ASSERT_TRUE(c.RestartServer()) << ReadFile(c.dir() + "/server.log");
  ASSERT_TRUE(c.WaitNodesReady(2));

  ASSERT_TRUE(c.WaitForState(quick, "FAILED")) << c.Describe(quick).dump(2);
  EXPECT_EQ(Task(c.Describe(quick), "worker", 0)["last_exit"]["exit_code"], 5) << c.Describe(quick).dump(2);
  EXPECT_TRUE(WaitDead(Pids(ghost_file)[0])) << "a task the store has no record of still runs";
  EXPECT_EQ(c.JobState(keep), "RUNNING");
  for (const auto& f : keep_files) {
    std::vector<pid_t> pids = Pids(f);
    ASSERT_EQ(pids.size(), 1u) << f << ": the task was restarted";
    EXPECT_TRUE(Alive(pids[0])) << f;
  }
  // It schedules again.
  std::string after = c.Submit(LoopingJob("after", out, 1, 0));
  ASSERT_FALSE(after.empty());
  WriteFile(out + "/after.stop", "");
  EXPECT_TRUE(c.WaitForState(after, "SUCCEEDED")) << c.Describe(after).dump(2);
  WriteFile(out + "/keep.stop", "");
  EXPECT_TRUE(c.WaitForState(keep, "SUCCEEDED")) << c.Describe(keep).dump(2);
  for (const auto& f : keep_files) EXPECT_EQ(Pids(f).size(), 1u) << f;
}

TEST(DurabilityTest, AgentRestartKeepsTasksAndReportsExitsThatHappenedWhileItWasDown) {
  Cluster c({.nodes = 1, .node_timeout_ms = 10000, .agents_kill_tasks_on_exit = false});
  std::string out = MakeOut(c);
  std::string keep = c.Submit(LoopingJob("keep", out, 1, 0));
  std::string brief = c.Submit(LoopingJob("brief", out, 1, 7));
  ASSERT_TRUE(c.WaitForState(keep, "RUNNING")) << c.Describe(keep).dump(2);
  ASSERT_TRUE(c.WaitForState(brief, "RUNNING")) << c.Describe(brief).dump(2);
  std::string keep_file = TaskPidFile(out, Task(c.Describe(keep), "worker", 0));
  std::string brief_file = TaskPidFile(out, Task(c.Describe(brief), "worker", 0));
  ASSERT_TRUE(WaitUntil([&] { return Pids(keep_file).size() == 1 && Pids(brief_file).size() == 1; },
                      absl::Seconds(10)));

  c.agent(0).Kill();
  WriteFile(out + "/brief.stop", "");
  ASSERT_TRUE(WaitDead(Pids(brief_file)[0]));
  c.RestartAgent(0);
  ASSERT_TRUE(c.WaitNodesReady(1));

  ASSERT_TRUE(c.WaitForState(brief, "FAILED")) << c.Describe(brief).dump(2);
  EXPECT_EQ(Task(c.Describe(brief), "worker", 0)["last_exit"]["exit_code"], 7) << c.Describe(brief).dump(2);
  EXPECT_EQ(c.JobState(keep), "RUNNING");
  ASSERT_EQ(Pids(keep_file).size(), 1u) << "the task was restarted";
  EXPECT_TRUE(Alive(Pids(keep_file)[0]));
  WriteFile(out + "/keep.stop", "");
  EXPECT_TRUE(c.WaitForState(keep, "SUCCEEDED")) << c.Describe(keep).dump(2);
  EXPECT_EQ(Pids(keep_file).size(), 1u);
}

TEST(DurabilityTest, LostNodeTaskIsRescheduledAndTheOldCopyKilledWhenTheNodeReturns) {
  Cluster c({.nodes = 2, .node_timeout_ms = 1500, .agents_kill_tasks_on_exit = false});
  std::string out = MakeOut(c);
  std::string job = c.Submit(LoopingJob("mover", out, 1, 0, "    restartPolicy: OnFailure\n    maxRestarts: 3\n"));
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);
  nlohmann::json t = Task(c.Describe(job), "worker", 0);
  std::string file = TaskPidFile(out, t);
  std::string first_node = t["node"];
  int index = first_node == "node-0" ? 0 : 1;
  ASSERT_TRUE(WaitUntil([&] { return Pids(file).size() == 1; }, absl::Seconds(10)));
  pid_t first = Pids(file)[0];

  // The node goes silent (its agent frozen; its task keeps running).
  kill(c.agent(index).pid(), SIGSTOP);
  ASSERT_TRUE(WaitUntil([&] {
    nlohmann::json now = Task(c.Describe(job), "worker", 0);
    return now.value("node", "") != first_node && now.value("state", "") == "RUNNING" && Pids(file).size() == 2;
  }, absl::Seconds(30), absl::Milliseconds(100))) << c.Describe(job).dump(2);
  pid_t second = Pids(file)[1];
  EXPECT_TRUE(Alive(first));  // two copies until the node is heard from again

  kill(c.agent(index).pid(), SIGCONT);
  EXPECT_TRUE(WaitDead(first)) << "the copy on the returned node still runs";
  EXPECT_TRUE(Alive(second));
  EXPECT_TRUE(c.WaitNodesReady(2)) << c.Nodes().dump(2);
  WriteFile(out + "/mover.stop", "");
  EXPECT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
}

TEST(DurabilityTest, CorruptOrForeignStoreIsRefusedWithAClearError) {
  Cluster c({.nodes = 1});
  std::string out = MakeOut(c);
  std::string job = c.Submit(LoopingJob("some", out, 1, 0));
  ASSERT_FALSE(job.empty());
  c.server().Stop();
  std::string db = c.server_data_dir() + "/state.db";
  // A torn header: the first bytes of the file overwritten.
  ASSERT_EQ(system(absl::StrCat("printf 'torn-write-garbage' | dd of=", db, " bs=1 seek=0 conv=notrunc 2>/dev/null")
                       .c_str()),
            0);
  EXPECT_FALSE(c.RestartServer());
  std::string log = ReadFile(c.dir() + "/server.log");
  EXPECT_THAT(log, HasSubstr("state.db"));
  EXPECT_THAT(log, HasSubstr("not an SQLite database"));
  CommandResult check = RunCli({"server", "--check-store", "--data-dir", c.server_data_dir()});
  EXPECT_NE(check.exit_code, 0);
  EXPECT_THAT(check.err, HasSubstr("state.db"));

  // A data dir that is someone else's files.
  std::string foreign = c.dir() + "/foreign";
  mkdir(foreign.c_str(), 0755);
  WriteFile(foreign + "/notes.txt", "mine\n");
  CommandResult r = RunCli({"server", "--listen", "127.0.0.1:0", "--data-dir", foreign}, absl::Seconds(20));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr(foreign));
}

// One round of the crash loop's clients: submit and kill at random until
// `stop`, recording what the server acknowledged.
struct Load {
  std::string address;
  std::string dir;
  std::mutex mu;
  std::vector<std::string> acked;
  std::atomic<bool> stop{false};
  std::atomic<int> seq{0};

  void Client(unsigned seed) {
    std::mt19937 rng(seed);
    while (!stop) {
      if (rng() % 10 < 7) {
        int n = seq++;
        std::string path = absl::StrCat(dir, "/load-", n, ".yaml");
        int code = rng() % 8 == 0 ? 1 : 0;
        WriteFile(path, absl::StrCat("name: load\nreplicas:\n  worker:\n    count: ", 1 + rng() % 2,
                                     "\n    resources: {gpus: ", rng() % 3, ", ports: 1, cpu: 0.5, memory: 64Mi}\n",
                                     "    command: [sh, -c, 'sleep 0.", rng() % 5, "; exit ", code, "']\n"));
        CommandResult r = RunCli({"submit", path, "--server", address}, absl::Seconds(10));
        size_t a = r.out.find("job "), b = r.out.find(" submitted");
        if (r.exit_code == 0 && a != std::string::npos && b != std::string::npos) {
          std::lock_guard<std::mutex> lock(mu);
          acked.push_back(r.out.substr(a + 4, b - a - 4));
        }
      } else {
        std::string victim;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!acked.empty()) victim = acked[rng() % acked.size()];
        }
        if (!victim.empty()) RunCli({"kill", victim, "--server", address}, absl::Seconds(10));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80));
    }
  }
};

bool Live(const std::string& task_state) {
  return task_state == "LAUNCHING" || task_state == "RUNNING" || task_state == "RESTARTING";
}

// `jobs -a -o json` by job name.
std::map<std::string, nlohmann::json> AllJobs(Cluster& c) {
  std::map<std::string, nlohmann::json> by_name;
  CommandResult r = c.Cli({"jobs", "-a", "-o", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json jobs = nlohmann::json::parse(r.out, nullptr, false);
  if (jobs.is_discarded()) return by_name;
  for (const auto& j : jobs.value("jobs", nlohmann::json::array())) by_name[j["name"]] = j;
  return by_name;
}

// The live tasks with GPUs: "JOB/TASK@node#attempt" -> GPU mask.
std::map<std::string, uint64_t> LiveGpuTasks(const std::map<std::string, nlohmann::json>& jobs) {
  std::map<std::string, uint64_t> out;
  for (const auto& [name, j] : jobs) {
    for (const auto& t : j["tasks"]) {
      uint64_t mask = t["gpu_mask"].get<uint64_t>();
      if (!Live(t["state"]) || t["node"] == "" || mask == 0) continue;
      out[absl::StrCat(t["name"].get<std::string>(), "@", t["node"].get<std::string>(), "#",
                       t["attempt"].get<int>())] = mask;
    }
  }
  return out;
}

// Every acknowledged job is there and whole; no GPU is given to two live
// tasks; the nodes view agrees with the jobs view. The views are read one
// after the other, so a task counts as holding its GPUs during the nodes read
// when it is live, on the same node and attempt, in the jobs read before and
// in the one after.
void CheckInvariants(Cluster& c, const std::vector<std::string>& acked) {
  std::map<std::string, nlohmann::json> before = AllJobs(c);
  for (const auto& name : acked) {
    auto it = before.find(name);
    ASSERT_NE(it, before.end()) << "acknowledged job " << name << " is gone";
    ASSERT_GE(it->second["tasks"].size(), 2u) << "job " << name << " is half-written: " << it->second.dump(2);
  }
  std::map<std::string, uint64_t> used;  // node -> GPUs of live tasks
  for (const auto& [key, mask] : LiveGpuTasks(before)) {
    std::string node = key.substr(key.find('@') + 1, key.find('#') - key.find('@') - 1);
    EXPECT_EQ(used[node] & mask, 0u) << "GPU given twice on " << node << " (" << key << ")";
    used[node] |= mask;
  }
  nlohmann::json nodes = c.Nodes();
  std::map<std::string, uint64_t> after = LiveGpuTasks(AllJobs(c));
  std::map<std::string, uint64_t> held;
  for (const auto& [key, mask] : LiveGpuTasks(before)) {
    if (after.count(key)) held[key.substr(key.find('@') + 1, key.find('#') - key.find('@') - 1)] |= mask;
  }
  for (const auto& n : nodes.value("nodes", nlohmann::json::array())) {
    uint64_t free = n["free_gpu_mask"].get<uint64_t>();
    std::string name = n["info"]["name"];
    EXPECT_EQ(free & held[name], 0u) << "nodes view: GPUs of live tasks show free on " << name << ": free " << free
                                     << ", held " << held[name];
  }
}

TEST(DurabilityTest, ServerCrashLoopLosesNothingAcknowledged) {
  int iterations = 20;
  if (const char* env = std::getenv("TRAINYARD_DURABILITY_ITERATIONS")) (void)absl::SimpleAtoi(env, &iterations);
  Cluster c({.nodes = 2, .node_timeout_ms = 10000});
  std::vector<std::string> acked;
  for (int it = 0; it < iterations; ++it) {
    SCOPED_TRACE(absl::StrCat("iteration ", it, " (seed ", 1000 + it, ")"));
    std::mt19937 rng(1000 + it);
    Load load;
    load.address = c.address();
    load.dir = c.dir();
    load.seq = it * 1000;
    std::vector<std::thread> clients;
    for (int k = 0; k < 3; ++k) clients.emplace_back([&load, it, k] { load.Client(it * 10 + k); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 900));  // the load runs, then the crash
    c.KillServer();
    load.stop = true;
    for (auto& t : clients) t.join();
    acked.insert(acked.end(), load.acked.begin(), load.acked.end());
    CommandResult check = RunCli({"server", "--check-store", "--data-dir", c.server_data_dir()});
    ASSERT_EQ(check.exit_code, 0) << check.out << check.err;
    ASSERT_TRUE(c.RestartServer()) << ReadFile(c.dir() + "/server.log");
    ASSERT_TRUE(c.WaitNodesReady(2));
    CheckInvariants(c, acked);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(acked.size(), static_cast<size_t>(iterations));
  // What the server holds converges with what the agents run: every job ends
  // once killed, and every GPU is free again — also for a task whose end its
  // agent reported but the server had not yet written when it died (the agent
  // no longer lists it), and for a job killed while its tasks were stopping.
  for (const auto& [name, j] : AllJobs(c)) {
    if (j["state"] != "SUCCEEDED" && j["state"] != "FAILED" && j["state"] != "KILLED") c.Cli({"kill", name});
  }
  EXPECT_TRUE(WaitUntil([&] {
    nlohmann::json nodes = c.Nodes();
    if (!nodes.contains("nodes")) return false;
    for (const auto& n : nodes["nodes"]) {
      if (n["free_gpu_mask"] != 255) return false;
    }
    return true;
  }, absl::Seconds(30), absl::Milliseconds(200))) << c.Nodes().dump(2) << "\n" << [&] {
    std::string live;
    for (const auto& [name, j] : AllJobs(c)) {
      if (j["state"] != "SUCCEEDED" && j["state"] != "FAILED" && j["state"] != "KILLED") live += j.dump(2);
    }
    return live;
  }();
}

}  // namespace
}  // namespace trainyard::testing
