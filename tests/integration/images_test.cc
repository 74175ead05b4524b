// Tasks with an image on a real cluster, as a user runs them
// (docs/images.md): a role's `image:` (an OCI image layout, or a tar of one,
// built here from busybox-static by tests/images/make-test-image) runs its
// tasks in containers through the node's OCI runtime (runc), as the job's
// user, with the image's files and environment, its task and checkpoint
// directories and its volumes; `trainyard exec` runs in the container; a
// kill ends the container's processes; a wrong image fails the job with the
// reason.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

class ImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "an OCI runtime runs containers for an agent that is root";
    // alice's tasks run as nobody, as on a shared node.
    cluster_ = std::make_unique<Cluster>(ClusterOptions{.nodes = 1, .task_user_map = "alice: nobody\n"});
    // The test's directory is mkdtemp's 0700: let nobody through to the
    // image and the agent's data dir, as a real node's /srv and /var/lib.
    chmod(cluster_->dir().c_str(), 0711);
    layout_ = cluster_->dir() + "/layout";
    CommandResult made = RunCommandLine(
        {absl::StrCat(TRAINYARD_SOURCE_DIR, "/tests/images/make-test-image"), layout_, "v1"}, absl::Seconds(60));
    ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
    ASSERT_TRUE(cluster_->WaitNodesReady(1));
  }
  void TearDown() override { cluster_.reset(); }

  // Submits `name` of alice with one worker: `image` and the role's other
  // lines (`role`, indented by four); waits until it ended.
  std::string Run(const std::string& name, const std::string& image, const std::string& role) {
    std::string job = cluster_->Submit(absl::StrCat("name: ", name, "\nuser: alice\nreplicas:\n  worker:\n    image: ",
                                                    image, "\n    resources: {cpu: 100m, memory: 64Mi}\n", role));
    EXPECT_FALSE(job.empty()) << "submit of " << name << " failed";
    WaitUntil([&] {
      std::string state = cluster_->JobState(job);
      return state == "SUCCEEDED" || state == "FAILED" || state == "KILLED";
    }, absl::Seconds(90), absl::Milliseconds(100));
    return job;
  }
  std::string Logs(const std::string& job) { return cluster_->Cli({"logs", job, "worker/0"}).out; }
  // Its stderr, for a failure's message.
  std::string Errors(const std::string& job) { return cluster_->Cli({"logs", job, "worker/0"}).err; }

  std::unique_ptr<Cluster> cluster_;
  std::string layout_;
};

TEST_F(ImagesTest, ATaskRunsInItsImageAsItsUserWithItsDirectoriesAndVolumes) {
  std::string data = cluster_->dir() + "/data";
  ASSERT_EQ(mkdir(data.c_str(), 0755), 0);
  WriteFile(data + "/shared.txt", "shared with the container\n");
  chmod((data + "/shared.txt").c_str(), 0644);
  std::string job = Run("boxed", "oci:" + layout_ + ":v1",
                        "    volumes: [{hostPath: " + data + ", path: /data, readOnly: true}]\n"
                        "    command: [sh, -c, 'cat /image-marker; id -u; echo $IMAGE_VAR; pwd; cat /data/shared.txt; "
                        "touch /data/x 2>/dev/null || echo volume read-only; touch /bin/x 2>/dev/null || echo root "
                        "read-only; test -e /etc/debian_version || echo no node files; grep NoNewPrivs /proc/self/status; "
                        "touch /tmp/t && echo tmp writable; echo saved > $TRAINYARD_CHECKPOINT_DIR/ckpt; echo $HOME > $TRAINYARD_TASK_DIR/home']\n");
  nlohmann::json view = cluster_->Describe(job);
  ASSERT_EQ(view["state"], "SUCCEEDED") << Logs(job) << Errors(job);
  EXPECT_EQ(Logs(job),
            "in the test image\n65534\nfrom-the-image\n/srv\nshared with the container\nvolume read-only\n"
            "root read-only\nno node files\nNoNewPrivs:\t1\ntmp writable\n");
  // What it wrote to its checkpoint dir is on the node, as nobody's.
  std::string ckpt = view["checkpoint_dir"].get<std::string>() + "/ckpt";
  EXPECT_EQ(ReadFile(ckpt), "saved\n");
  struct stat st;
  ASSERT_EQ(stat(ckpt.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);

  // The node shows its runtime and the image it unpacked.
  nlohmann::json info;
  EXPECT_TRUE(WaitUntil([&] {
    info = cluster_->Nodes()["nodes"][0]["info"];
    return info.contains("images") && info["images"] == nlohmann::json::array({"oci:" + layout_ + ":v1"});
  }, absl::Seconds(30))) << info.dump(2);
  EXPECT_THAT(info.value("oci_runtime", ""), ::testing::EndsWith("/runc"));

  // The image's shared root is as unpacked: the mount points of this
  // task's directories and volume were made in a layer of its own.
  int roots = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cluster_->dir() + "/node-0/images")) {
    if (entry.path().filename().string().rfind("sha256-", 0) != 0) continue;
    ++roots;
    EXPECT_FALSE(std::filesystem::exists(entry.path() / "rootfs/data")) << entry.path();
    EXPECT_FALSE(std::filesystem::exists(entry.path() / "rootfs" / cluster_->dir().substr(1))) << entry.path();
  }
  EXPECT_EQ(roots, 1);
}

TEST_F(ImagesTest, TheImagesCommandRunsWhenTheRoleGivesNoneAndExitCodesAndKillsReachTheContainer) {
  // No command: the image's Cmd, in its WorkingDir.
  std::string job = Run("default", "oci:" + layout_ + ":v1", "");
  EXPECT_EQ(cluster_->JobState(job), "SUCCEEDED") << cluster_->Describe(job).dump(2);
  EXPECT_EQ(Logs(job), "default command in /srv\n");

  // A tar of the layout runs the same image.
  std::string tar = cluster_->dir() + "/image.tar";
  ASSERT_EQ(RunCommandLine({"/bin/tar", "-cf", tar, "-C", layout_, "."}, absl::Seconds(30)).exit_code, 0);
  chmod(tar.c_str(), 0644);
  job = Run("archived", "oci-archive:" + tar + ":v1", "    command: [cat, /image-marker]\n");
  EXPECT_EQ(cluster_->JobState(job), "SUCCEEDED") << cluster_->Describe(job).dump(2);
  EXPECT_EQ(Logs(job), "in the test image\n");

  // The command's exit code is the task's.
  job = Run("three", "oci:" + layout_ + ":v1", "    command: [sh, -c, 'exit 3']\n");
  nlohmann::json view = cluster_->Describe(job);
  EXPECT_EQ(view["state"], "FAILED");
  EXPECT_THAT(view.dump(), HasSubstr("exited with code 3")) << view.dump(2);

  // A kill's SIGTERM reaches the container's process group (the runtime
  // passes it on to the first process only), and what ignores it ends too.
  job = cluster_->Submit("name: sleeper\nuser: alice\nreplicas:\n  worker:\n    image: oci:" + layout_ +
                         ":v1\n    resources: {cpu: 100m, memory: 64Mi}\n"
                         "    command: [sh, -c, 'trap \"\" TERM; (trap \"echo got TERM > $TRAINYARD_CHECKPOINT_DIR/term; "
                         "exit 0\" TERM; while :; do sleep 0.1; done) & echo $$ > $TRAINYARD_CHECKPOINT_DIR/pid; "
                         "exec sleep 600']\n");
  ASSERT_TRUE(cluster_->WaitForState(job, "RUNNING"));
  std::string pid_file = cluster_->Describe(job)["checkpoint_dir"].get<std::string>() + "/pid";
  int pid = 0;
  ASSERT_TRUE(WaitUntil([&] { return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pid_file)), &pid); },
                        absl::Seconds(30)));
  ASSERT_GT(pid, 1);
  EXPECT_EQ(kill(pid, 0), 0) << "the container's sleep runs on the node";
  // `trainyard exec` runs in the container, as the task runs.
  CommandResult exec = RunCli({"exec", "--server", cluster_->address(), job, "worker", "--", "sh", "-c",
                               "cat /image-marker; id -u; pwd; echo $IMAGE_VAR; exit 4"},
                              absl::Seconds(60));
  EXPECT_EQ(exec.exit_code, 4) << exec.err;
  EXPECT_EQ(exec.out, "in the test image\n65534\n/srv\nfrom-the-image\n");
  ASSERT_EQ(cluster_->Cli({"kill", job}).exit_code, 0);
  ASSERT_TRUE(cluster_->WaitForState(job, "KILLED", absl::Seconds(60)));
  EXPECT_TRUE(WaitUntil([&] { return kill(pid, 0) != 0 && errno == ESRCH; }, absl::Seconds(30)))
      << "pid " << pid << " outlived its job";
  EXPECT_EQ(ReadFile(absl::StrCat(std::string(absl::StripSuffix(pid_file, "/pid")), "/term")), "got TERM\n")
      << "the container's group had the SIGTERM";
}

TEST_F(ImagesTest, AContainerPastItsMemoryLimitIsOomKilledAndAnotherKillIsNot) {
  // dd's 256 MiB block against a 64 MiB limit.
  std::string job = Run("hog", "oci:" + layout_ + ":v1",
                        "    command: [dd, if=/dev/zero, of=/dev/null, bs=256M, count=1]\n");
  nlohmann::json view = cluster_->Describe(job);
  EXPECT_EQ(view["state"], "FAILED");
  bool oom = false;
  for (const auto& t : view["tasks"]) {
    if (t["role"] == "worker") oom = t["last_exit"].value("oom_killed", false);
  }
  EXPECT_TRUE(oom) << view.dump(2);

  // A SIGKILL below its limit is no OOM kill.
  job = Run("nine", "oci:" + layout_ + ":v1", "    command: [sh, -c, 'kill -9 $$']\n");
  view = cluster_->Describe(job);
  EXPECT_EQ(view["state"], "FAILED");
  for (const auto& t : view["tasks"]) {
    if (t["role"] == "worker") {
      EXPECT_FALSE(t["last_exit"].value("oom_killed", true)) << view.dump(2);
    }
  }
}

// The read side of a registry (the OCI distribution API a pull uses: /v2/,
// a manifest by tag or digest, a blob by digest), over plain HTTP on a free
// port, serving an OCI image layout.
class LayoutRegistry {
 public:
  LayoutRegistry(std::string layout, int port) : layout_(std::move(layout)), port_(port) {
    server_.Get("/v2/", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    server_.Get(R"(/v2/(.+)/manifests/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      nlohmann::json index = nlohmann::json::parse(ReadFile(layout_ + "/index.json"));
      std::string ref = req.matches[2];
      for (const auto& m : index["manifests"]) {
        std::string digest = m.value("digest", "");
        nlohmann::json annotations = m.value("annotations", nlohmann::json::object());
        if (digest != ref && annotations.value("org.opencontainers.image.ref.name", "") != ref) continue;
        res.set_header("Docker-Content-Digest", digest);
        res.set_content(ReadFile(layout_ + "/blobs/sha256/" + digest.substr(7)), m.value("mediaType", ""));
        if (req.method == "GET") ++manifests_;
        return;
      }
      res.status = 404;
    });
    server_.Get(R"(/v2/(.+)/blobs/sha256:([0-9a-f]{64}))", [this](const httplib::Request& req, httplib::Response& res) {
      std::string blob = ReadFile(layout_ + "/blobs/sha256/" + std::string(req.matches[2]));
      if (blob.empty()) {
        res.status = 404;
        return;
      }
      res.set_content(blob, "application/octet-stream");
    });
    // Bound before the constructor returns: a pull finds it listening.
    bound_ = server_.bind_to_port("127.0.0.1", port_);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~LayoutRegistry() {
    server_.stop();
    thread_.join();
  }
  std::string host() const { return absl::StrCat("127.0.0.1:", port_); }
  bool bound() const { return bound_; }
  int manifests() const { return manifests_; }

 private:
  std::string layout_;
  int port_;
  std::atomic<int> manifests_{0};
  bool bound_ = false;
  httplib::Server server_;
  std::thread thread_;
};

TEST_F(ImagesTest, AnImageIsPulledFromARegistryTheNodesReach) {
  // A cluster whose agents may pull from the registry over plain HTTP.
  int port = FreePort();
  cluster_.reset();
  cluster_ = std::make_unique<Cluster>(ClusterOptions{.nodes = 1,
                                                      .agent_flags = {"--insecure-registries",
                                                                      absl::StrCat("127.0.0.1:", port)},
                                                      .task_user_map = "alice: nobody\n"});
  chmod(cluster_->dir().c_str(), 0711);
  layout_ = cluster_->dir() + "/layout";
  CommandResult made = RunCommandLine(
      {absl::StrCat(TRAINYARD_SOURCE_DIR, "/tests/images/make-test-image"), layout_, "v1"}, absl::Seconds(60));
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  LayoutRegistry registry(layout_, port);
  ASSERT_TRUE(registry.bound()) << registry.host();
  ASSERT_TRUE(cluster_->WaitNodesReady(1));
  std::string job = Run("pulled", "docker://" + registry.host() + "/team/test:v1", "    command: [cat, /image-marker]\n");
  EXPECT_EQ(cluster_->JobState(job), "SUCCEEDED") << cluster_->Describe(job).dump(2) << Errors(job);
  EXPECT_EQ(Logs(job), "in the test image\n");
  EXPECT_EQ(registry.manifests(), 1);
  // Pulled once while the agent runs.
  job = Run("again", "docker://" + registry.host() + "/team/test:v1", "");
  EXPECT_EQ(Logs(job), "default command in /srv\n");
  EXPECT_EQ(registry.manifests(), 1);
  // A tag the registry does not have fails the job, naming the registry;
  // one that is not on the insecure list is asked for over TLS, and fails.
  job = Run("missing", "docker://" + registry.host() + "/team/test:v9", "    command: [true]\n");
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr("cannot be pulled from " + registry.host()));
  std::string other = absl::StrCat("localhost:", registry.host().substr(registry.host().find(':') + 1));
  job = Run("tls", "docker://" + other + "/team/test:v1", "    command: [true]\n");
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr("cannot be pulled from " + other));
}

TEST_F(ImagesTest, AWrongImageFailsTheJobNamingWhatIsWrong) {
  // Refused at submission: not one of the forms, volumes without an image.
  WriteFile(cluster_->dir() + "/registry.yaml",
            "name: reg\nreplicas:\n  worker:\n    image: python:3.11\n    command: [python3]\n");
  CommandResult r = cluster_->Cli({"submit", cluster_->dir() + "/registry.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("replicas.worker.image: 'python:3.11' is not oci:PATH[:TAG], oci-archive:PATH[:TAG] or "
                               "docker://"));
  WriteFile(cluster_->dir() + "/volumes.yaml",
            "name: vol\nreplicas:\n  worker:\n    volumes: [{hostPath: /srv}]\n    command: [true]\n");
  r = cluster_->Cli({"submit", cluster_->dir() + "/volumes.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("replicas.worker.volumes: needs an image"));

  // Failed by the node, with the reason: no such tag, no such layout, a
  // layout the job's account may not read.
  std::string job = Run("notag", "oci:" + layout_ + ":v2", "    command: [true]\n");
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr("tag 'v2' is not in the image layout " + layout_ +
                                                       " (its tags: v1)"));
  job = Run("nolayout", "oci:" + cluster_->dir() + "/none:v1", "    command: [true]\n");
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr(cluster_->dir() + "/none cannot be read"));
  std::string hidden = cluster_->dir() + "/hidden";
  ASSERT_EQ(mkdir(hidden.c_str(), 0700), 0);
  ASSERT_EQ(RunCommandLine({"/bin/cp", "-r", layout_, hidden + "/layout"}, absl::Seconds(30)).exit_code, 0);
  job = Run("hidden", "oci:" + hidden + "/layout:v1", "    command: [true]\n");
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr("nobody may not search " + hidden));
  // A volume its account may not reach is refused the same way.
  job = Run("hidvol", "oci:" + layout_ + ":v1",
            "    volumes: [{hostPath: " + hidden + "/layout, path: /x}]\n    command: [true]\n");
  EXPECT_EQ(cluster_->JobState(job), "FAILED");
  EXPECT_THAT(cluster_->Describe(job).dump(), HasSubstr("volume " + hidden + "/layout: nobody may not search"));
}

}  // namespace
}  // namespace trainyard::testing
