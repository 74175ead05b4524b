// Tasks run as their users, confined, end to end: a real server and an agent
// running as root, with cluster users mapped to unprivileged accounts
// (alice to `nobody`, bob to the bare uid 65533). Each test is a probe a
// task could try, and asserts what its owner would see: its identity, files
// it cannot read or write, another job's checkpoints it cannot reach, a
// cgroup it cannot leave, a fork bomb that stops at the agent's pids limit.
//
// TRAINYARD_IT_TASKS_AS_ROOT=1 runs the same probes with every user mapped to
// root (--allow-root-tasks), no pids limit and every workingDir allowed: each
// assertion then fails,
// which shows it tests the confinement and not something else.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

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
using ::testing::Not;

bool ConfinementOff() { return getenv("TRAINYARD_IT_TASKS_AS_ROOT") != nullptr; }

class TaskConfinementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "running tasks as other accounts needs an agent that is root";
    ClusterOptions options{.nodes = 1};
    if (ConfinementOff()) {
      options.task_user_map = "\"*\": 0\n";
      options.agent_flags = {"--allow-root-tasks", "--task-pids-max", "0", "--task-workdir-roots", "/"};
    } else {
      options.task_user_map = "alice: nobody\nbob: 65533\n";
      options.agent_flags = {"--task-pids-max", "64"};
    }
    cluster_ = std::make_unique<Cluster>(options);
    // The test's directory is mkdtemp's 0700: let the tasks' accounts pass
    // through to the agent's data dir and the checkpoint root, as a real
    // node's /var/lib would.
    chmod(cluster_->dir().c_str(), 0711);
  }
  void TearDown() override { cluster_.reset(); }

  // Submits a one-task job of `user` running `script` and waits until it
  // has ended; returns its name.
  std::string RunJob(const std::string& name, const std::string& user, const std::string& script,
                     const std::string& extra = "") {
    std::string job = cluster_->Submit(absl::StrCat("name: ", name, "\nuser: ", user, "\nreplicas:\n  worker:\n",
                                                    extra, "    command: [sh, -c, '", script, "']\n"));
    EXPECT_FALSE(job.empty()) << "submit of " << name << " failed";
    WaitUntil([&] {
      std::string state = cluster_->JobState(job);
      return state == "SUCCEEDED" || state == "FAILED" || state == "KILLED";
    }, absl::Seconds(60), absl::Milliseconds(100));
    return job;
  }
  std::string Logs(const std::string& job) { return cluster_->Cli({"logs", job, "worker/0"}).out; }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(TaskConfinementTest, ATaskRunsAsItsUsersAccountWithNoNewPrivs) {
  std::string job = RunJob("ident", "alice", "id -u; id -g; grep NoNewPrivs /proc/self/status");
  EXPECT_EQ(cluster_->JobState(job), "SUCCEEDED") << cluster_->Describe(job).dump(2);
  EXPECT_EQ(Logs(job), "65534\n65534\nNoNewPrivs:\t1\n");
  std::string bob = RunJob("ident-bob", "bob", "id -u; id -G");
  EXPECT_EQ(Logs(bob), "65533\n65533\n");
}

TEST_F(TaskConfinementTest, AUserWithNoAccountFailsBeforeItStartsNamingTheUser) {
  if (ConfinementOff()) GTEST_SKIP() << "everyone maps to root here";
  std::string job = RunJob("nobody-here", "mallory", "touch /tmp/mallory-was-here");
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr("user 'mallory': no local account 'mallory'"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/mallory-was-here"));
}

TEST_F(TaskConfinementTest, ATaskCannotReadShadow) {
  std::string job = RunJob("shadow", "alice", "if cat /etc/shadow >/dev/null 2>&1; then echo read; else echo denied; fi");
  EXPECT_EQ(Logs(job), "denied\n");
}

TEST_F(TaskConfinementTest, TheServersDataDirIsNeitherAWorkingDirNorWritable) {
  std::string data = cluster_->server_data_dir();
  std::string job = RunJob("in-server-dir", "alice", "touch planted", absl::StrCat("    workingDir: ", data, "\n"));
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr("workingDir " + data));
  EXPECT_FALSE(std::filesystem::exists(data + "/planted"));
  std::string direct = RunJob("into-server-dir", "alice",
                              absl::StrCat("if touch ", data, "/planted 2>/dev/null; then echo wrote; else echo denied; fi"));
  EXPECT_EQ(Logs(direct), "denied\n");
  EXPECT_FALSE(std::filesystem::exists(data + "/planted"));
}

TEST_F(TaskConfinementTest, AnotherJobsCheckpointsAreOutOfReach) {
  std::string bob = RunJob("bob-ckpt", "bob",
                           "echo bob-secret > \"$TRAINYARD_CHECKPOINT_DIR/model\"; basename \"$TRAINYARD_CHECKPOINT_DIR\"");
  ASSERT_EQ(cluster_->JobState(bob), "SUCCEEDED") << cluster_->Describe(bob).dump(2);
  std::string bob_dir = std::string(absl::StripSuffix(Logs(bob), "\n"));
  ASSERT_FALSE(bob_dir.empty());
  std::string probe = absl::StrCat(
      "up=\"$TRAINYARD_CHECKPOINT_DIR/..\"; ",
      "if ls \"$up\" >/dev/null 2>&1; then echo listed; else echo not-listed; fi; ",
      "if cat \"$up/", bob_dir, "/model\" 2>/dev/null; then :; else echo not-read; fi; ",
      "if echo evil > \"$up/", bob_dir, "/model\" 2>/dev/null; then echo overwrote; else echo not-written; fi");
  std::string alice = RunJob("alice-probe", "alice", probe);
  EXPECT_EQ(Logs(alice), "not-listed\nnot-read\nnot-written\n");
  std::string model = ReadFile(absl::StrCat(cluster_->dir(), "/checkpoints/", bob_dir, "/model"));
  EXPECT_EQ(model, "bob-secret\n");
  struct stat st;
  ASSERT_EQ(stat(absl::StrCat(cluster_->dir(), "/checkpoints/", bob_dir).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(TaskConfinementTest, ATaskCannotMoveItselfOutOfItsCgroup) {
  // The parent of the task's own cgroup: v1's memory hierarchy, else v2's.
  std::string job = RunJob("escape", "alice",
                           "p=$(grep -E \"^[0-9]+:memory:\" /proc/self/cgroup | cut -d: -f3); d=/sys/fs/cgroup/memory; "
                           "if [ -z \"$p\" ]; then p=$(grep \"^0::\" /proc/self/cgroup | cut -d: -f3); d=/sys/fs/cgroup; fi; "
                           "if echo $$ > \"$d$p/../cgroup.procs\" 2>/dev/null; then echo escaped; else echo stayed; fi");
  EXPECT_EQ(Logs(job), "stayed\n");
}

TEST_F(TaskConfinementTest, AForkBombStopsAtThePidsLimit) {
  std::string job = RunJob("forkbomb", "alice",
                           "i=0; while [ $i -lt 200 ]; do sleep 300 & i=$((i+1)); echo $i; done; echo all-forked");
  std::string logs = Logs(job);
  EXPECT_THAT(logs, Not(HasSubstr("all-forked")));
  int forked = 0;  // the last count the shell printed before a fork failed
  for (absl::string_view line : absl::StrSplit(logs, '\n', absl::SkipEmpty())) {
    int n = 0;
    if (absl::SimpleAtoi(line, &n)) forked = std::max(forked, n);
  }
  EXPECT_GT(forked, 0) << logs;
  EXPECT_LT(forked, 64) << logs;
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
}

// What a running task leaves on disk (its record holds its env values, its
// logs what it printed, the store its spec) is readable by its daemon only.
TEST_F(TaskConfinementTest, TheStoreTaskRecordsAndLogsAreTheDaemonsAlone) {
  std::string job = cluster_->Submit(
      "name: rest\nuser: alice\nreplicas:\n  worker:\n    env: {TOKEN: s3cr3t}\n"
      "    command: [sh, -c, 'echo started; exec sleep 120']\n");
  ASSERT_TRUE(WaitUntil([&] { return Logs(job) == "started\n"; }, absl::Seconds(30))) << cluster_->Describe(job).dump(2);
  std::string agent = cluster_->dir() + "/node-0";
  std::vector<std::string> checked;
  for (const std::string& root : {cluster_->server_data_dir(), agent + "/tasks", agent + "/logs"}) {
    struct stat st;
    ASSERT_EQ(stat(root.c_str(), &st), 0) << root;
    // The server's data dir may be passed through (0711) to reach the login
    // socket, never listed or written.
    bool server_dir = root == cluster_->server_data_dir();
    EXPECT_EQ(st.st_mode & (server_dir ? 066 : 077), 0u) << root << " is open to others";
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
      if (server_dir && e.path().filename() == "login.sock" && S_ISSOCK(st.st_mode)) continue;  // open by design
      EXPECT_EQ(st.st_mode & 077, 0u) << e.path() << " is open to others";
      checked.push_back(e.path().string());
    }
  }
  int id = cluster_->Describe(job).value("id", 0);
  EXPECT_THAT(absl::StrJoin(checked, "\n"), HasSubstr(absl::StrCat("/tasks/job_", id, "/worker-0.json")));
  cluster_->Cli({"kill", job});
}

}  // namespace
}  // namespace trainyard::testing
