#include "agent/oci_bundle.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/process_spawn.h"
#include "agent/test_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace trainyard::agent {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using nlohmann::json;

BundleSpec OciBundleSpec() {
  return {.rootfs = "/var/lib/trainyard/images/sha256-ab/rootfs",
          .args = {"python3", "train.py"},
          .env = {"PATH=/usr/bin", "RANK=0"},
          .cwd = "/workspace",
          .uid = 1001,
          .gid = 1002,
          .groups = {1003},
          .binds = {{"/var/lib/trainyard/work/job_1/worker-0", "/var/lib/trainyard/work/job_1/worker-0", false},
                    {"/datasets", "/data", true}},
          .cgroups_path = "ab_job.1_worker-0_a0",
          .devices = {"/dev/null", "/dev/nonexistent-gpu"}};
}

json MountAt(const json& config, const std::string& dest) {
  for (const json& m : config["mounts"]) {
    if (m["destination"] == dest) return m;
  }
  return json();
}

TEST(OciBundleTest, TheContainerRunsTheTaskAsItsAccountOnAReadOnlyImageWithItsDirectories) {
  absl::StatusOr<std::string> text = BundleConfigJson(OciBundleSpec());
  ASSERT_TRUE(text.ok()) << text.status();
  json c = json::parse(*text);
  EXPECT_EQ(c["root"]["path"], "/var/lib/trainyard/images/sha256-ab/rootfs");
  EXPECT_EQ(c["root"]["readonly"], true);
  const json& p = c["process"];
  EXPECT_EQ(p["args"], json({"python3", "train.py"}));
  EXPECT_EQ(p["env"], json({"PATH=/usr/bin", "RANK=0"}));
  EXPECT_EQ(p["cwd"], "/workspace");
  EXPECT_EQ(p["user"]["uid"], 1001);
  EXPECT_EQ(p["user"]["gid"], 1002);
  EXPECT_EQ(p["user"]["additionalGids"], json({1003}));
  EXPECT_EQ(p["noNewPrivileges"], true);
  EXPECT_EQ(p["user"]["umask"], 077) << "the agent's, as for a task without an image";
  EXPECT_TRUE(p["capabilities"]["bounding"].empty()) << "no capabilities";
  // Only a mount namespace: the node's network (ports, peers), PIDs, IPC.
  EXPECT_EQ(c["linux"]["namespaces"], json::array({json{{"type", "mount"}}}));
  EXPECT_EQ(c["linux"]["cgroupsPath"], "ab_job.1_worker-0_a0") << "relative: under the attempt's cgroup";
  json work = MountAt(c, "/var/lib/trainyard/work/job_1/worker-0");
  EXPECT_EQ(work["source"], "/var/lib/trainyard/work/job_1/worker-0");
  EXPECT_THAT(work["options"], Contains("rw"));
  json data = MountAt(c, "/data");
  EXPECT_EQ(data["source"], "/datasets");
  std::vector<std::string> options = data["options"].get<std::vector<std::string>>();
  EXPECT_TRUE(std::count(options.begin(), options.end(), "rro") + std::count(options.begin(), options.end(), "ro") == 1)
      << data.dump() << ": read-only (the mounts below it too where the kernel can)";
  EXPECT_THAT(data["options"], Contains("nosuid"));
  EXPECT_THAT(data["options"], Contains("nodev"));
  EXPECT_EQ(MountAt(c, "/tmp")["type"], "tmpfs");
  EXPECT_EQ(MountAt(c, "/proc")["type"], "proc");
  EXPECT_EQ(MountAt(c, "/dev/shm")["source"], "/dev/shm") << "shared memory with the node's other tasks (NCCL)";
}

TEST(OciBundleTest, DevicesThatExistAreGivenAndAllowedTheRestLeftOut) {
  json c = json::parse(*BundleConfigJson(OciBundleSpec()));
  ASSERT_EQ(c["linux"]["devices"].size(), 1u) << c["linux"]["devices"].dump();
  const json& d = c["linux"]["devices"][0];
  EXPECT_EQ(d["path"], "/dev/null");
  EXPECT_EQ(d["type"], "c");
  EXPECT_EQ(d["major"], 1);
  EXPECT_EQ(d["minor"], 3);
  const json& allowed = c["linux"]["resources"]["devices"];
  EXPECT_EQ(allowed[0], json({{"allow", false}, {"access", "rwm"}})) << "everything else is denied";
}

TEST(OciBundleTest, RefusesWhatARuntimeWouldNotRun) {
  BundleSpec s = OciBundleSpec();
  s.args.clear();
  EXPECT_THAT(BundleConfigJson(s).status().message(), HasSubstr("no entrypoint or cmd"));
  s = OciBundleSpec();
  s.cwd = "work";
  EXPECT_THAT(BundleConfigJson(s).status().message(), HasSubstr("workingDir: 'work' must be an absolute path"));
  s = OciBundleSpec();
  s.binds.push_back({"rel", "/x", false});
  EXPECT_THAT(BundleConfigJson(s).status().message(), HasSubstr("paths must be absolute"));
}

TEST(OciBundleTest, AGpusNodesAreItsOwnAndTheDriversShared) {
  EXPECT_EQ(GpuDeviceNodes({0, 3}, "/dev"),
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm",
                                      "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}));
}

TEST(OciBundleTest, AContainersFirstProcessIsReadFromTheRuntimesStateAndCheckedAlive) {
  testing::TempDir dir;
  uint64_t start = ProcessStartTime(getpid()).value();
  mkdir((dir.path() + "/runc-id").c_str(), 0700);
  std::ofstream(dir.path() + "/runc-id/state.json")
      << absl::StrCat("{\"id\": \"runc-id\", \"init_process_pid\": ", getpid(), ", \"init_process_start\": ", start, "}");
  EXPECT_EQ(ContainerInitPid(dir.path(), "runc-id").value_or(-1), getpid());
  mkdir((dir.path() + "/crun-id").c_str(), 0700);
  std::ofstream(dir.path() + "/crun-id/status")
      << absl::StrCat("{\"pid\": ", getpid(), ", \"process-start-time\": ", start, "}");
  EXPECT_EQ(ContainerInitPid(dir.path(), "crun-id").value_or(-1), getpid());
  // No start time: not taken for the container's.
  mkdir((dir.path() + "/bare").c_str(), 0700);
  std::ofstream(dir.path() + "/bare/status") << absl::StrCat("{\"pid\": ", getpid(), "}");
  EXPECT_FALSE(ContainerInitPid(dir.path(), "bare").ok());
  // A pid reused by another process since is not the container's.
  mkdir((dir.path() + "/reused").c_str(), 0700);
  std::ofstream(dir.path() + "/reused/state.json")
      << absl::StrCat("{\"init_process_pid\": ", getpid(), ", \"init_process_start\": ", start + 1, "}");
  EXPECT_THAT(ContainerInitPid(dir.path(), "reused").status().message(), HasSubstr("has ended"));
  EXPECT_THAT(ContainerInitPid(dir.path(), "none").status().message(), HasSubstr("no state of container none"));
}

}  // namespace
}  // namespace trainyard::agent
