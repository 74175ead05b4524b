// A job master crash on a real cluster: the master task's process is
// SIGKILLed while the workers (shell scripts running `trainyard worker
// barrier` in a loop) wait in a barrier. The agent restarts the master on
// the same node and port, the workers' barrier commands reconnect, register
// again with their ids and enter the same barrier (by generation), and the
// job runs to its end without any worker restarting.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kWorkers = 3;
constexpr int kBarriers = 6;
// Worker 0 waits for the test's go-ahead before this barrier, so the others
// are in it when the master is killed.
constexpr int kKillAt = 3;

// The parent pid in /proc/PID/stat (the field after the state, which follows
// the command name in parentheses), or 0.
int ParentPid(int pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  int ppid = 0;
  return fields.size() > 1 && absl::SimpleAtoi(fields[1], &ppid) ? ppid : 0;
}

// The first child of `parent` found under /proc, or 0.
int ChildOf(int parent) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  int child = 0;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (absl::SimpleAtoi(e->d_name, &pid) && ParentPid(pid) == parent) {
      child = pid;
      break;
    }
  }
  closedir(proc);
  return child;
}

// The agent's record of the job's master task (under the job's id); "" when
// it is not placed.
std::string MasterRecord(Cluster& c, const std::string& job) {
  nlohmann::json d = c.Describe(job);
  nlohmann::json t = Task(d, "jobmaster");
  if (!t.contains("node") || !t["node"].is_string()) return "";
  return ReadFile(absl::StrCat(c.dir(), "/", t["node"].get<std::string>(), "/tasks/job_", d.value("id", 0),
                               "/jobmaster-0.json"));
}

// The job master's process, from the agent's state: the agent's record of
// the task names the pid of the task's keeper, and the master (the task's
// `sh -c 'exec trainyard jobmaster ...'`) is the keeper's child. 0 if none.
int JobMasterPid(Cluster& c, const std::string& job) {
  std::string record = MasterRecord(c, job);
  nlohmann::json j = nlohmann::json::parse(record, nullptr, false);
  if (j.is_discarded() || !j.contains("pid")) return 0;
  return ChildOf(j["pid"].get<int>());
}

std::string Cmdline(int pid) {
  std::string s = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  for (char& ch : s) ch = ch == '\0' ? ' ' : ch;
  return s;
}

// The job's secret for its master, from the agent's record of the master
// task (the test reads it as the agent's owner would); "" if none yet.
std::string JobSecret(Cluster& c, const std::string& job) {
  std::string record = MasterRecord(c, job);
  nlohmann::json j = nlohmann::json::parse(record, nullptr, false);
  if (j.is_discarded() || !j.contains("launch") || !j["launch"].contains("env")) return "";
  return j["launch"]["env"].value("TRAINYARD_JOB_SECRET", "");
}

// How many workers wait in barrier kKillAt, from `trainyard worker list`
// against the master at `address` as worker 0 (with the job's `secret`); -1
// when the list fails.
int InBarrier(const std::string& address, const std::string& secret) {
  setenv("TRAINYARD_JOB_MASTER", address.c_str(), 1);
  setenv("TRAINYARD_WORKER_ID", "0", 1);
  setenv("TRAINYARD_JOB_SECRET", secret.c_str(), 1);
  CommandResult r = RunCli({"worker", "list", "--output", "json"}, absl::Seconds(15));
  unsetenv("TRAINYARD_JOB_MASTER");
  unsetenv("TRAINYARD_WORKER_ID");
  unsetenv("TRAINYARD_JOB_SECRET");
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (r.exit_code != 0 || j.is_discarded() || j.value("barrier_generation", -1) != kKillAt) return -1;
  int in = 0;
  for (const auto& w : j["workers"]) in += w.value("in_barrier", false) ? 1 : 0;
  return in;
}

// Worker i's progress file: "enter N" before barrier N, "passed N" after.
std::string Progress(const std::string& out, int i) { return ReadFile(absl::StrCat(out, "/progress-", i)); }

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

// Workers that run kKillAt barriers, the last ones after `out`/go exists for
// worker 0, each barrier by its generation, then report COMPLETED.
std::string Spec(const std::string& out) {
  std::string bin = TrainyardBin();
  std::string script = absl::StrCat(
      "i=0; while [ $i -lt ", kBarriers, " ]; do ",
      "if [ $i -eq ", kKillAt, " ] && [ $TRAINYARD_INDEX -eq 0 ]; then ",
      "while [ ! -e ", out, "/go ]; do sleep 0.02; done; fi; ",
      "echo enter $i >> ", out, "/progress-$TRAINYARD_INDEX; ",
      bin, " worker barrier --generation $i --timeout 40 || exit 1; ",
      "echo passed $i >> ", out, "/progress-$TRAINYARD_INDEX; ",
      "i=$((i+1)); done; ", bin, " worker state COMPLETED");
  return absl::StrCat(R"(
name: jmcrash
replicas:
  worker:
    count: )", kWorkers, R"(
    restartPolicy: OnFailure
    maxRestarts: 3
    command: [sh, -c, ')", script, R"(']
)");
}

// What a failed wait shows: the job and every task's log.
std::string Dump(Cluster& c, const std::string& job) {
  std::string text = c.Describe(job).dump(2);
  for (const std::string task : {"jobmaster/0", "worker/0", "worker/1", "worker/2"}) {
    CommandResult logs = c.Cli({"logs", job, task});
    absl::StrAppend(&text, "\n--- ", task, " ---\n", logs.out, logs.err);
  }
  return text;
}

TEST(JobMasterFailureTest, MasterKilledMidBarrierIsRestartedAndTheJobContinues) {
  Cluster c({.nodes = 1});
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string job = c.Submit(Spec(out));
  ASSERT_FALSE(job.empty());
  // Workers 1.. are in barrier kKillAt; worker 0 is held before it.
  std::string entered = absl::StrCat("enter ", kKillAt);
  ASSERT_TRUE(WaitUntil(
      [&] {
        bool in = Has(Progress(out, 0), absl::StrCat("passed ", kKillAt - 1));
        for (int i = 1; i < kWorkers; ++i) in = in && Has(Progress(out, i), entered);
        return in;
      },
      absl::Seconds(30), absl::Milliseconds(20)))
      << Dump(c, job);
  // ... as the master sees it (`trainyard worker list`, as worker 0 would).
  std::string master = c.Describe(job).value("job_master", "");
  ASSERT_FALSE(master.empty());
  ASSERT_TRUE(WaitUntil([&] { return InBarrier(master, JobSecret(c, job)) == kWorkers - 1; }, absl::Seconds(10)));
  int pid = JobMasterPid(c, job);
  ASSERT_GT(pid, 1) << Dump(c, job);
  ASSERT_THAT(Cmdline(pid), HasSubstr(" jobmaster --job " + job));
  absl::Time killed = absl::Now();
  ASSERT_EQ(kill(pid, SIGKILL), 0);

  // The agent restarts the master (a new process); the workers come back to it.
  ASSERT_TRUE(WaitUntil([&] { return Task(c.Describe(job), "jobmaster").value("restarts", 0) >= 1; },
                      absl::Seconds(15), absl::Milliseconds(50)))
      << Dump(c, job);
  WriteFile(out + "/go", "");
  std::string passed = absl::StrCat("passed ", kKillAt);
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < kWorkers; ++i) {
          if (!Has(Progress(out, i), passed)) return false;
        }
        return true;
      },
      absl::Seconds(20), absl::Milliseconds(10)))
      << Dump(c, job);
  std::cout << "barrier " << kKillAt << " passed " << absl::FormatDuration(absl::Now() - killed)
            << " after the master's SIGKILL\n";

  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(30))) << Dump(c, job);
  // The workers waiting when the master died entered the barrier again.
  for (int i = 1; i < kWorkers; ++i) {
    CommandResult logs = c.Cli({"logs", job, absl::StrCat("worker/", i)});
    EXPECT_THAT(logs.out + logs.err, HasSubstr("; entering the barrier again")) << "worker " << i;
  }
  nlohmann::json d = c.Describe(job);
  EXPECT_GE(Task(d, "jobmaster").value("restarts", 0), 1);
  for (int i = 0; i < kWorkers; ++i) {
    EXPECT_EQ(Task(d, "worker", i).value("restarts", -1), 0) << "worker " << i;
    std::string progress = Progress(out, i);
    for (int b = 0; b < kBarriers; ++b) {
      EXPECT_TRUE(Has(progress, absl::StrCat("passed ", b))) << "worker " << i << ":\n" << progress;
    }
  }
}

}  // namespace
}  // namespace trainyard::testing
