// The control plane end to end: a server and two agents as separate
// processes, jobs submitted with the CLI, tasks that are real shell commands
// writing what they see to files.
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::string> ParseEnv(const std::string& text) {
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t eq = line.find('=');
    if (eq != absl::string_view::npos) env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return env;
}

TEST(ControlPlaneTest, TasksGetDistinctGpusMatchingEnvAndBindablePorts) {
  Cluster c;
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  // Each task records its environment and binds every port it was given.
  WriteFile(out + "/bind.py",
            "import socket, sys\n"
            "for p in sys.argv[1].split(','):\n"
            "    s = socket.socket()\n"
            "    s.bind(('127.0.0.1', int(p)))\n");
  std::string job = c.Submit(absl::StrCat(R"(
name: envcheck
replicas:
  worker:
    count: 3
    resources: {gpus: 2, ports: 2, cpu: 1, memory: 256Mi}
    env: {OUT: ")", out, R"("}
    command: [sh, -c, 'env > $OUT/$TRAINYARD_TASK_NAME.env && /usr/bin/python3 $OUT/bind.py $TRAINYARD_PORTS || exit 7']
)"));
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  nlohmann::json d = c.Describe(job);
  std::map<std::string, std::set<int>> gpus_by_node;
  std::set<std::string> ports_seen;
  for (const auto& t : d["tasks"]) {
    if (t["role"] != "worker") continue;
    auto env = ParseEnv(ReadFile(out + "/" + t["name"].get<std::string>() + ".env"));
    ASSERT_FALSE(env.empty()) << t["name"];
    uint64_t mask = t["gpu_mask"].get<uint64_t>();
    std::vector<std::string> want;
    for (int i = 0; i < 64; ++i) {
      if ((mask >> i) & 1) want.push_back(absl::StrCat(i));
    }
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], absl::StrJoin(want, ","));
    EXPECT_EQ(want.size(), 2u);
    for (const auto& g : want) {
      int gi = std::stoi(g);
      EXPECT_TRUE(gpus_by_node[t["node"]].insert(gi).second) << "GPU " << g << " given twice on " << t["node"];
    }
    EXPECT_EQ(env["TRAINYARD_JOB"], job);
    EXPECT_EQ(env["TRAINYARD_ROLE"], "worker");
    for (absl::string_view p : absl::StrSplit(env["TRAINYARD_PORTS"], ',')) {
      EXPECT_TRUE(ports_seen.insert(absl::StrCat(t["node"].get<std::string>(), ":", p)).second);
    }
  }
  EXPECT_EQ(ports_seen.size(), 6u);
}

TEST(ControlPlaneTest, OnFailureRestartsUntilSuccessAndLogsOfEveryAttemptStay) {
  Cluster c({.nodes = 1});
  std::string counter = c.dir() + "/count";
  std::string job = c.Submit(absl::StrCat(R"(
name: flaky
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 5
    command: [sh, -c, 'n=$(cat )", counter, R"( 2>/dev/null || echo 0); n=$((n+1)); echo $n > )", counter,
                                          R"(; echo "attempt $n"; [ $n -ge 3 ]']
)"));
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  nlohmann::json d = c.Describe(job);
  EXPECT_EQ(Task(d, "worker")["restarts"], 2);
  CommandResult logs = c.Cli({"logs", job, "worker/0"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("attempt 3"));
  CommandResult first = c.Cli({"logs", job, "worker/0", "--attempt", "0"});
  EXPECT_THAT(first.out, HasSubstr("attempt 1"));
}

TEST(ControlPlaneTest, MaxRestartsExhaustedFailsTheJobWithAReason) {
  Cluster c({.nodes = 1});
  std::string job = c.Submit(R"(
name: doomed
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 2
    command: [sh, -c, 'exit 3']
)");
  ASSERT_TRUE(c.WaitForState(job, "FAILED")) << c.Describe(job).dump(2);
  EXPECT_EQ(c.Describe(job)["reason"],
            "task doomed-worker-0 failed: exit code 3 after 3 attempts (FAILED; failure budget 0 of 2 left)");
  CommandResult jobs = c.Cli({"jobs", "--all"});
  EXPECT_THAT(jobs.out, HasSubstr("FAILED"));
}

TEST(ControlPlaneTest, KillStopsEveryProcessAndFreesTheGpus) {
  Cluster c({.nodes = 1});
  std::string pids = c.dir() + "/pids";
  ASSERT_EQ(mkdir(pids.c_str(), 0755), 0);
  std::string job = c.Submit(absl::StrCat(R"(
name: forever
replicas:
  worker:
    count: 2
    resources: {gpus: 4}
    command: [sh, -c, 'echo $$ > )", pids, R"(/$TRAINYARD_INDEX; exec sleep 600']
)"));
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(pids + "/1").empty(); }, absl::Seconds(10)));
  CommandResult k = c.Cli({"kill", job});
  EXPECT_EQ(k.exit_code, 0) << k.err;
  EXPECT_THAT(k.out, HasSubstr("KILLED"));
  for (int i = 0; i < 2; ++i) {
    int pid = std::stoi(ReadFile(pids + "/" + std::to_string(i)));
    EXPECT_TRUE(WaitUntil([&] { return kill(pid, 0) != 0; }, absl::Seconds(10))) << "task " << i << " still runs";
  }
  EXPECT_TRUE(WaitUntil([&] {
    auto nodes = c.Nodes();
    return nodes["nodes"][0]["free_gpu_mask"] == 255;
  }, absl::Seconds(10)));
}

TEST(ControlPlaneTest, LostNodeTasksAreRescheduledOnAnotherNode) {
  Cluster c({.nodes = 2, .node_timeout_ms = 1500});
  std::string pids = c.dir() + "/pids";
  ASSERT_EQ(mkdir(pids.c_str(), 0755), 0);
  std::string job = c.Submit(absl::StrCat(R"(
name: survivor
nodeName: node-0
relaxLocality: true
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 3
    command: [sh, -c, 'echo $$ > )", pids, R"(/$TRAINYARD_NODE; exec sleep 600']
)"));
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  ASSERT_EQ(Task(c.Describe(job), "worker")["node"], "node-0");
  c.agent(0).Kill();  // the task itself keeps running as an orphan; the node is gone
  ASSERT_TRUE(WaitUntil([&] { return Task(c.Describe(job), "worker")["node"] == "node-1"; }, absl::Seconds(20),
                      absl::Milliseconds(200)))
      << c.Describe(job).dump(2);
  EXPECT_TRUE(c.WaitForState(job, "RUNNING"));
  nlohmann::json d = c.Describe(job);
  bool moved = false;
  for (const auto& e : d["events"]) moved |= e["kind"] == "task_moved";
  EXPECT_TRUE(moved) << d.dump(2);
  c.Cli({"kill", job});
  // The task left behind on the lost node: stop it by the pid it wrote.
  int orphan = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pids + "/node-0")), &orphan));
  if (orphan > 1) kill(orphan, SIGKILL);
}

TEST(ControlPlaneTest, BadSpecsAreRefusedWithFieldPaths) {
  Cluster c({.nodes = 1});
  WriteFile(c.dir() + "/bad.yaml", "name: bad\nreplicas:\n  worker:\n    resources: {gpus: 9}\n    command: [x]\n    colour: red\n");
  CommandResult r = c.Cli({"submit", c.dir() + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("replicas.worker.colour: unknown field"));
  WriteFile(c.dir() + "/big.yaml", "name: big\nreplicas:\n  worker:\n    resources: {gpus: 9}\n    command: [x]\n");
  r = c.Cli({"submit", c.dir() + "/big.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("replicas.worker.resources.gpus: 9 is above the maximum allocation 8"));
  EXPECT_EQ(c.Cli({"jobs", "--all", "-o", "json"}).out.find("big"), std::string::npos);
}

TEST(ControlPlaneTest, SecondAgentWithATakenNameIsRefused) {
  Cluster c({.nodes = 1});
  // With node-0's own certificate: the name is taken while its agent is
  // connected, whoever holds the credential.
  std::vector<std::string> argv = {TrainyardBin(), "agent", "--server", c.address(), "--agent-server", c.agent_address(), "--name", "node-0", "--data-dir",
                                   c.dir() + "/dup", "--simulate-gpus", "2"};
  for (const std::string& flag : AgentTlsFlags("node-0")) argv.push_back(flag);
  Process dup(argv, c.dir() + "/dup.log");
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(dup.log()).find("already in use") != std::string::npos; },
                      absl::Seconds(10)))
      << ReadFile(dup.log());
  dup.Stop();
}

TEST(ControlPlaneTest, AgentWithARelativeDataDirRunsTasksInIt) {
  Cluster c({.nodes = 1});
  // node-0 again, now started as `trainyard agent --data-dir node-0` from the
  // cluster's directory, on the ports it had.
  nlohmann::json ports = c.Nodes()["nodes"][0]["info"]["capacity"]["ports"][0];
  std::string range = absl::StrCat("[", ports.value("begin", 0), "-", ports.value("end", 0), "]");
  c.agent(0).Stop();
  Process agent({"/bin/sh", "-c",
                 absl::StrCat("cd '", c.dir(), "' && exec '", TrainyardBin(), "' agent --server ", c.address(), " --agent-server ", c.agent_address(),
                              " --name node-0 --data-dir node-0 --simulate-gpus 2 --memory-mb 4096 --vcores 4",
                              " --port-range '", range, "' --address 127.0.0.1 --kill-tasks-on-exit",
                              // Tasks run as the test's own uid, as the cluster's agents do.
                              " --task-user-map '", c.dir(), "/node-0-task-users'",
                              getuid() == 0 ? " --allow-root-tasks" : "", " ",
                              absl::StrJoin(AgentTlsFlags("node-0"), " "))},
                c.dir() + "/node-0-relative.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(agent.log()).find("registered with") != std::string::npos; },
                      absl::Seconds(20)))
      << ReadFile(agent.log());
  std::string job = c.Submit(R"(
name: reldir
replicas:
  worker:
    command: [sh, -c, 'pwd -P > where']
)");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2) << ReadFile(agent.log());
  // It ran in its own directory under the data dir, which it was given whole.
  std::string task_dir = absl::StrCat(c.dir(), "/node-0/work/job_", c.Describe(job).value("id", 0), "/worker-0");
  std::error_code ec;
  EXPECT_EQ(ReadFile(task_dir + "/where"), std::filesystem::canonical(task_dir, ec).string() + "\n");
  agent.Stop();
}

TEST(ControlPlaneTest, ClientSpeakingToTheWrongPortGetsAClearError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  // Nothing answers gRPC there.
  std::thread acceptor([fd] {
    int c = accept(fd, nullptr, nullptr);
    if (c >= 0) {
      const char junk[] = "HTTP/1.0 200 OK\r\n\r\nnot trainyard";
      (void)!write(c, junk, sizeof(junk));
      close(c);
    }
  });
  CommandResult r = RunCli({"jobs", "--server", address}, absl::Seconds(60));
  shutdown(fd, SHUT_RDWR);
  close(fd);
  acceptor.join();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("cannot reach a Trainyard server at " + address));
}

}  // namespace
}  // namespace trainyard::testing
