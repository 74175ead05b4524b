// CUDA MPS per shared GPU, against a fake control program (a shell script
// this test writes) that records how it was called: its arguments, the GPU
// and directories in its environment, and what it read on its input. The
// daemon starts with a GPU's first share and stops with its last; the tasks
// get the MPS variables; whole-GPU tasks and other GPUs are left alone.
#include "agent/mps.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/supervisor.h"
#include "agent/test_util.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::RecordingListener;
using testing::TempDir;
using testing::kTimeout;

// Writes a fake nvidia-cuda-mps-control into `dir` that appends one line per
// call to dir/calls; returns its path.
std::string WriteFakeControl(const std::string& dir, int exit_code = 0) {
  std::string path = dir + "/nvidia-cuda-mps-control";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "input=''\n"
                      << "if [ \"$1\" != -d ]; then input=$(cat); fi\n"
                      << "echo \"args=$* gpu=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY "
                      << "log=$CUDA_MPS_LOG_DIRECTORY input=$input\" >> " << dir << "/calls\n"
                      << "exit " << exit_code << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

std::vector<std::string> Calls(const std::string& dir) {
  std::vector<std::string> calls = absl::StrSplit(ReadFileOrEmpty(dir + "/calls"), '\n', absl::SkipEmpty());
  return calls;
}

TEST(MpsDaemonsTest, OneDaemonPerGpuFromItsFirstShareToItsLast) {
  TempDir dir;
  std::string mps = dir.path() + "/mps";
  MpsDaemons daemons({.control = WriteFakeControl(dir.path()), .dir = mps});
  absl::StatusOr<MpsGpu> a = daemons.Join("j-worker-0", 3);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->pipe_dir, mps + "/gpu-3/pipe");
  EXPECT_EQ(a->log_dir, mps + "/gpu-3/log");
  EXPECT_TRUE(std::filesystem::is_directory(a->pipe_dir));
  ASSERT_TRUE(daemons.Join("j-worker-1", 3).ok());
  ASSERT_TRUE(daemons.Join("j-worker-1", 3).ok());  // the same holder again: nothing new
  ASSERT_TRUE(daemons.Join("k-worker-0", 5).ok());
  std::string start3 = absl::StrCat("args=-d gpu=3 pipe=", mps, "/gpu-3/pipe log=", mps, "/gpu-3/log input=");
  std::string start5 = absl::StrCat("args=-d gpu=5 pipe=", mps, "/gpu-5/pipe log=", mps, "/gpu-5/log input=");
  EXPECT_THAT(Calls(dir.path()), ElementsAre(start3, start5));
  EXPECT_THAT(daemons.Gpus(), ElementsAre(3, 5));

  daemons.Leave("j-worker-0");
  daemons.Leave("nobody");
  EXPECT_EQ(Calls(dir.path()).size(), 2u);  // GPU 3 still has a share
  daemons.Leave("j-worker-1");
  std::string quit3 = absl::StrCat("args= gpu=3 pipe=", mps, "/gpu-3/pipe log=", mps, "/gpu-3/log input=quit");
  EXPECT_THAT(Calls(dir.path()), ElementsAre(start3, start5, quit3));
  EXPECT_THAT(daemons.Gpus(), ElementsAre(5));
  // The next share of GPU 3 starts a daemon again.
  ASSERT_TRUE(daemons.Join("l-worker-0", 3).ok());
  EXPECT_EQ(Calls(dir.path()).back(), start3);
}

TEST(MpsDaemonsTest, ADaemonThatDoesNotStartFailsTheJoinWithItsOutput) {
  TempDir dir;
  MpsDaemons daemons({.control = WriteFakeControl(dir.path(), 3), .dir = dir.path() + "/mps"});
  absl::StatusOr<MpsGpu> joined = daemons.Join("j-worker-0", 1);
  ASSERT_FALSE(joined.ok());
  EXPECT_THAT(joined.status().message(), HasSubstr("-d (GPU 1) failed (exit code 3)"));
  EXPECT_THAT(joined.status().message(), HasSubstr(dir.path() + "/mps/gpu-1/log/control.out"));
  EXPECT_TRUE(daemons.Gpus().empty());
  daemons.Leave("j-worker-0");  // not a holder: no quit
  EXPECT_EQ(Calls(dir.path()).size(), 1u);
}

TEST(MpsDaemonsTest, ADaemonAlreadyRunningIsAdoptedNotStartedAgain) {
  TempDir dir;
  std::string mps = dir.path() + "/mps";
  std::filesystem::create_directories(mps + "/gpu-2/pipe");
  // An earlier agent's daemon: its pid file names a live process (this one).
  std::ofstream(mps + "/gpu-2/pipe/nvidia-cuda-mps-control.pid") << getpid() << "\n";
  MpsDaemons daemons({.control = WriteFakeControl(dir.path()), .dir = mps});
  ASSERT_TRUE(daemons.Join("j-worker-0", 2).ok());
  EXPECT_TRUE(Calls(dir.path()).empty());
  daemons.Leave("j-worker-0");
  ASSERT_EQ(Calls(dir.path()).size(), 1u);
  EXPECT_THAT(Calls(dir.path())[0], HasSubstr("input=quit"));
}

TEST(ChooseMpsControlTest, OffAutoAndOn) {
  TempDir dir;
  std::string fake = WriteFakeControl(dir.path());
  EXPECT_EQ(*ChooseMpsControl("off", fake, false), "");
  EXPECT_EQ(*ChooseMpsControl("auto", fake, false), fake);
  EXPECT_EQ(*ChooseMpsControl("auto", fake, true), "");  // simulated GPUs: only when asked
  EXPECT_EQ(*ChooseMpsControl("on", fake, true), fake);
  EXPECT_EQ(*ChooseMpsControl("auto", dir.path() + "/missing", false), "");
  absl::StatusOr<std::string> missing = ChooseMpsControl("on", dir.path() + "/missing", true);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--mps on: the MPS control program"));
  EXPECT_THAT(missing.status().message(), HasSubstr("is not an executable file"));
  EXPECT_THAT(ChooseMpsControl("sometimes", fake, true).status().message(),
              HasSubstr("--mps: 'sometimes' is not one of off, auto, on"));
}

// Through the supervisor: two quarter shares of GPU 1 run as clients of one
// daemon with their limits; a whole-GPU task gets none of it; the daemon
// stops when the second share ends.
TEST(MpsSupervisorTest, SharesRunAsClientsOfTheirGpusDaemon) {
  TempDir dir;
  FakeClock clock;
  RecordingListener listener;
  std::string mps = dir.path() + "/data/mps";
  MpsDaemons daemons({.control = WriteFakeControl(dir.path()), .dir = mps});
  auto supervisor = Supervisor::Create(
      {.data_dir = dir.path() + "/data", .clock = &clock, .listener = &listener, .mps = &daemons});
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  auto launch = [&](const std::string& role, core::GpuSet gpus, int32_t milli, int64_t memory_mb) {
    TaskLaunch l;
    l.key = {.job = absl::StrCat("t", getpid(), "-mps"), .role = role};
    std::string file = absl::StrCat(dir.path(), "/", role);
    l.command = {"sh", "-c", absl::StrCat("env > ", file, ".tmp && mv ", file, ".tmp ", file, ".env; while [ ! -e ",
                                          dir.path(), "/go ]; do sleep 0.02; done")};
    l.gpus = gpus;
    l.gpu_milli = milli;
    l.gpu_memory_mb = memory_mb;
    EXPECT_TRUE((*supervisor)->Launch(l).ok());
    return l.key;
  };
  TaskKey a = launch("a", core::GpuSet(0b10), 250, 2048);
  TaskKey b = launch("b", core::GpuSet(0b10), 250, 0);
  TaskKey whole = launch("whole", core::GpuSet(0b100), 0, 0);
  for (const char* role : {"a", "b", "whole"}) {
    ASSERT_TRUE(testing::WaitUntil([&] { return !ReadFileOrEmpty(dir.path() + "/" + role + ".env").empty(); },
                                   kTimeout))
        << role;
  }
  std::string env_a = ReadFileOrEmpty(dir.path() + "/a.env");
  EXPECT_THAT(env_a, HasSubstr(absl::StrCat("\nCUDA_MPS_PIPE_DIRECTORY=", mps, "/gpu-1/pipe\n")));
  EXPECT_THAT(env_a, HasSubstr(absl::StrCat("\nCUDA_MPS_LOG_DIRECTORY=", mps, "/gpu-1/log\n")));
  EXPECT_THAT(env_a, HasSubstr("\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"));
  EXPECT_THAT(env_a, HasSubstr("\nCUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M\n"));
  // The daemon shows the clients only its GPU, as device 0.
  EXPECT_THAT(env_a, HasSubstr("\nCUDA_VISIBLE_DEVICES=0\n"));
  std::string env_b = ReadFileOrEmpty(dir.path() + "/b.env");
  EXPECT_THAT(env_b, HasSubstr("\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"));
  EXPECT_THAT(env_b, ::testing::Not(HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")));
  std::string env_whole = ReadFileOrEmpty(dir.path() + "/whole.env");
  EXPECT_THAT(env_whole, ::testing::Not(HasSubstr("CUDA_MPS_")));
  EXPECT_THAT(env_whole, HasSubstr("\nCUDA_VISIBLE_DEVICES=2\n"));
  EXPECT_EQ(Calls(dir.path()).size(), 1u);  // one daemon, for GPU 1

  ASSERT_TRUE((*supervisor)->Kill(a).ok());
  auto ended = [](const TaskStatus& s) { return IsFinal(s.state); };
  ASSERT_TRUE((*supervisor)->WaitFor(a, ended, kTimeout).has_value());
  EXPECT_EQ(Calls(dir.path()).size(), 1u);  // b still holds a share
  std::ofstream(dir.path() + "/go");
  for (const TaskKey& k : {b, whole}) {
    ASSERT_TRUE((*supervisor)->WaitFor(k, ended, kTimeout).has_value());
  }
  ASSERT_EQ(Calls(dir.path()).size(), 2u);
  EXPECT_THAT(Calls(dir.path())[1], HasSubstr("gpu=1"));
  EXPECT_THAT(Calls(dir.path())[1], HasSubstr("input=quit"));
  EXPECT_TRUE(daemons.Gpus().empty());
}

}  // namespace
}  // namespace trainyard::agent
