// The server's data dir failing at run time, with real processes and real
// file systems: a small tmpfs that fills up, and an ext4 image that the
// kernel turns read-only under the running server (the way errors=remount-ro
// does after a disk error; `mount -o remount,ro` cannot do that to a file
// system with files open for writing: it fails with EBUSY). A submission the store cannot keep is refused
// with a message naming the data dir and the cause; everything acknowledged
// before stays listed and whole, also after a restart on a disk with room;
// the server keeps answering. The mounts need root (CAP_SYS_ADMIN): without
// it, or without loop devices / ext4 tools, the tests skip and say why.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// The path of a system tool (execv does not search PATH).
std::string Tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string path = dir + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return name;
}

// Runs a system tool (mount, mkfs.ext4, ...) to completion; its output goes
// to `output` for skip and failure messages. Returns its exit code, or -1
// when it did not exit by itself within 20 s (it is killed then).
int RunTool(const std::vector<std::string>& argv, std::string* output) {
  TempDir tmp;
  std::string log = tmp.path() + "/out";
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  bool done = WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, absl::Seconds(20));
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  *output = ReadFile(log);
  return done && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A file system mounted on `path` for one test; the destructor unmounts it
// (lazily, so a leftover open file cannot keep it mounted). Declare it after
// the TempDir holding `path` and before the Cluster using it, so processes
// stop before it is unmounted and it is gone before the directory is removed.
class TestMount {
 public:
  explicit TestMount(std::string path) : path_(std::move(path)) { mkdir(path_.c_str(), 0755); }
  ~TestMount() {
    if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  }
  // Mounts a tmpfs of `size` (e.g. "1m"); "" when done, else why not.
  std::string MountTmpfs(const std::string& size) {
    std::string opts = absl::StrCat("size=", size, ",mode=0755");
    if (mount("tmpfs", path_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      return absl::StrCat("mount -t tmpfs: ", std::strerror(errno));
    }
    mounted_ = true;
    return "";
  }
  // Gives the mounted tmpfs a new size, files open or not.
  bool ResizeTmpfs(const std::string& size) {
    std::string opts = absl::StrCat("size=", size);
    return mount(nullptr, path_.c_str(), nullptr, MS_REMOUNT, opts.c_str()) == 0;
  }
  // Mounts the ext4 image `image` through a loop device, errors=remount-ro;
  // "" when done, else why not.
  std::string MountExt4(const std::string& image) {
    std::string out;
    if (RunTool({Tool("mount"), "-o", "loop,errors=remount-ro", image, path_}, &out) != 0) {
      return absl::StrCat("mount -o loop: ", out);
    }
    mounted_ = true;
    return "";
  }
  // Unmounts now (files must be closed); true when done.
  bool Unmount() {
    if (!mounted_) return true;
    mounted_ = umount2(path_.c_str(), 0) != 0;
    return !mounted_;
  }
  // The block device under the mount, e.g. "loop3" ("" when unknown).
  std::string DeviceName() const {
    std::istringstream mounts(ReadFile("/proc/self/mounts"));
    std::string source, target, rest;
    while (mounts >> source >> target && std::getline(mounts, rest)) {
      if (target == path_) return std::filesystem::path(source).filename().string();
    }
    return "";
  }

 private:
  std::string path_;
  bool mounted_ = false;
};

// A job whose record is about `pad` bytes (an env value), so a few of them
// fill a small disk. It asks for 16 GPUs in one gang on a cluster of 8: it
// stays queued, so its record changes no more and no process runs.
std::string BigJob(int i, size_t pad) {
  std::string value(pad, 'a' + static_cast<char>(i % 26));
  return absl::StrCat("name: big-", i, "\nreplicas:\n  ps:\n    count: 2\n",
                      "    resources: {gpus: 8, cpu: 100m, memory: 64Mi}\n", "    env: {PAD: ", value, "}\n",
                      "    command: [sleep, '600']\n");
}

// What `describe` says about a job that must not change across a restart.
std::string Identity(const nlohmann::json& d) {
  std::string out;
  for (const char* field : {"name", "id", "user", "queue", "submit_time_unix_ms"}) {
    absl::StrAppend(&out, field, "=", d.contains(field) ? d[field].dump() : "?", " ");
  }
  for (const auto& t : d.value("tasks", nlohmann::json::array())) {
    absl::StrAppend(&out, "task=", t.contains("role") ? t["role"].dump() : "?", "/",
                    t.contains("index") ? t["index"].dump() : "?", " ");
  }
  return out;
}

// Submits `spec`; returns the CLI's result and the job name when accepted.
CommandResult SubmitSpec(Cluster& c, const std::string& spec, int n, std::string* job) {
  std::string path = absl::StrCat(c.dir(), "/spec-store-", n, ".yaml");
  WriteFile(path, spec);
  CommandResult r = c.Cli({"submit", path});
  job->clear();
  size_t a = r.out.find("job "), b = r.out.find(" submitted");
  if (r.exit_code == 0 && a != std::string::npos && b != std::string::npos) *job = r.out.substr(a + 4, b - a - 4);
  return r;
}

// Checks that the server answers `jobs`, `nodes` and `describe`, and that
// every job in `identities` is listed with the same identity.
void ExpectServesAndKeeps(Cluster& c, const std::map<std::string, std::string>& identities) {
  CommandResult jobs = c.Cli({"jobs", "--all"});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  CommandResult nodes = c.Cli({"nodes"});
  EXPECT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_THAT(nodes.out, HasSubstr("node-0"));
  for (const auto& [name, identity] : identities) {
    EXPECT_THAT(jobs.out, HasSubstr(name));
    EXPECT_EQ(Identity(c.Describe(name)), identity);
  }
}

// `trainyard server --check-store` on a stopped server's data dir passes.
void ExpectStoreChecks(const std::string& data_dir) {
  CommandResult check = RunCli({"server", "--check-store", "--data-dir", data_dir});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

TEST(StoreFailureTest, FullDiskRefusesSubmissionsClearlyAndKeepsWhatWasAcknowledged) {
  TempDir base;
  TestMount disk(base.path() + "/data");
  if (std::string why = disk.MountTmpfs("1m"); !why.empty()) GTEST_SKIP() << "needs root: " << why;
  Cluster c({.nodes = 1, .server_data_dir = base.path() + "/data"});
  ASSERT_TRUE(c.server().Running()) << ReadFile(c.dir() + "/server.log");

  std::map<std::string, std::string> acknowledged;  // job -> identity
  CommandResult refused;
  int n = 0;
  for (; n < 40; ++n) {  // 40 x 48 KB is twice the disk
    std::string job;
    CommandResult r = SubmitSpec(c, BigJob(n, 48 << 10), n, &job);
    if (r.exit_code != 0) {
      refused = r;
      break;
    }
    acknowledged[job] = Identity(c.Describe(job));
  }
  ASSERT_LT(n, 40) << "the 1 MiB disk never filled up";
  ASSERT_GT(acknowledged.size(), 3u) << refused.err;
  EXPECT_THAT(refused.err, AllOf(HasSubstr("the job was not accepted"), HasSubstr("disk full"),
                                 HasSubstr(base.path() + "/data"), HasSubstr("free space"),
                                 Not(HasSubstr("cannot reach"))));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, Not(HasSubstr("submitted")));
  EXPECT_TRUE(c.server().Running());
  ExpectServesAndKeeps(c, acknowledged);

  // Room again: the running server accepts without a restart.
  ASSERT_TRUE(disk.ResizeTmpfs("16m"));
  std::string job;
  CommandResult again = SubmitSpec(c, BigJob(n, 48 << 10), n, &job);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  acknowledged[job] = Identity(c.Describe(job));

  c.server().Stop();
  ExpectStoreChecks(c.server_data_dir());
  ASSERT_TRUE(c.RestartServer()) << ReadFile(c.dir() + "/server.log");
  ASSERT_TRUE(c.WaitNodesReady(1));
  ExpectServesAndKeeps(c, acknowledged);
}

// A 16 MiB ext4 image under `dir`, mounted on `disk`; "" when done, else why
// not.
std::string MountExt4Image(const std::string& dir, TestMount& disk) {
  std::string image = dir + "/disk.img", out;
  WriteFile(image, "");
  std::error_code ec;
  std::filesystem::resize_file(image, 16 << 20, ec);
  if (ec) return absl::StrCat("cannot make ", image, ": ", ec.message());
  if (RunTool({Tool("mkfs.ext4"), "-q", "-F", image}, &out) != 0) return "mkfs.ext4: " + out;
  return disk.MountExt4(image);
}

TEST(StoreFailureTest, DataDirTurnedReadOnlyRefusesSubmissionsClearlyAndLosesNothing) {
  TempDir base;
  TestMount disk(base.path() + "/data");
  if (std::string why = MountExt4Image(base.path(), disk); !why.empty()) {
    GTEST_SKIP() << "needs root, loop devices and mkfs.ext4: " << why;
  }
  std::string trigger = absl::StrCat("/sys/fs/ext4/", disk.DeviceName(), "/trigger_fs_error");
  if (access(trigger.c_str(), W_OK) != 0) GTEST_SKIP() << "no " << trigger << " to make the file system fail";
  std::string data_dir = base.path() + "/data/server";
  Cluster c({.nodes = 1, .server_data_dir = data_dir});
  ASSERT_TRUE(c.server().Running()) << ReadFile(c.dir() + "/server.log");
  std::map<std::string, std::string> acknowledged;  // job -> identity
  for (int i = 0; i < 3; ++i) {
    std::string job;
    CommandResult r = SubmitSpec(c, BigJob(i, 64), i, &job);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    acknowledged[job] = Identity(c.Describe(job));
  }
  // What ext4 does on a disk error with errors=remount-ro: read-only at once,
  // under the server's open files.
  WriteFile(trigger, "1");
  // A kill is answered once its write is durable: here the write fails, and
  // the user is told so (the tasks are stopped all the same; after a restart
  // the job is back as it was last recorded). From then on the store refuses
  // every write, submissions included.
  size_t log_start = ReadFile(c.dir() + "/server.log").size();
  CommandResult kill = c.Cli({"kill", acknowledged.begin()->first});
  EXPECT_EQ(kill.exit_code, 1) << kill.err;
  EXPECT_THAT(kill.err, AllOf(HasSubstr("is being stopped, but the server cannot record it"), HasSubstr("read-only"),
                              HasSubstr(data_dir)));
  EXPECT_TRUE(WaitUntil([&] {
    return ReadFile(c.dir() + "/server.log").find("store write failed", log_start) != std::string::npos;
  }, absl::Seconds(10))) << ReadFile(c.dir() + "/server.log");
  std::string job;
  CommandResult refused = SubmitSpec(c, BigJob(3, 64), 3, &job);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_THAT(refused.err, AllOf(HasSubstr("the job was not accepted"), HasSubstr("read-only"), HasSubstr(data_dir),
                                 HasSubstr("make the data dir writable"), HasSubstr("restart the server"),
                                 Not(HasSubstr("cannot reach"))));
  EXPECT_TRUE(c.server().Running());
  ExpectServesAndKeeps(c, acknowledged);
  c.server().Stop();

  // The disk repaired and mounted again: the same jobs, whole.
  ASSERT_TRUE(disk.Unmount());
  std::string out;
  RunTool({Tool("e2fsck"), "-f", "-y", base.path() + "/disk.img"}, &out);
  ASSERT_EQ(disk.MountExt4(base.path() + "/disk.img"), "");
  ExpectStoreChecks(data_dir);
  ASSERT_TRUE(c.RestartServer()) << ReadFile(c.dir() + "/server.log");
  ASSERT_TRUE(c.WaitNodesReady(1));
  ExpectServesAndKeeps(c, acknowledged);
}

}  // namespace
}  // namespace trainyard::testing
