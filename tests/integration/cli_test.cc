// The client verbs as a user runs them against a real server: filters on
// `jobs`, `kill` of several jobs, `delete` freeing a name, `describe`'s
// times, `-o json` types, control characters escaped, and a command
// that waits out a slow connection set-up.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

std::string Sleeper(const std::string& name, const std::string& user) {
  return absl::StrCat("name: ", name, "\nuser: ", user, "\nreplicas:\n  worker:\n    count: 1\n",
                      "    resources: {cpu: 100m, memory: 64Mi, gpus: 1}\n    command: [sleep, '600']\n");
}

// A TCP relay to `upstream` (host:port) that holds each new connection
// `delay` before it passes anything on: a server slow to answer a
// handshake, as a busy server or a loaded machine is.
class SlowRelay {
 public:
  SlowRelay(const std::string& upstream, absl::Duration delay) : delay_(delay) {
    upstream_port_ = std::stoi(upstream.substr(upstream.rfind(':') + 1));
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(listener_, reinterpret_cast<sockaddr*>(&a), len);
    listen(listener_, 16);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
    acceptor_ = std::thread([this] {
      for (;;) {
        int fd = accept(listener_, nullptr, nullptr);
        if (fd < 0) return;  // shut down
        relays_.emplace_back([this, fd] { Relay(fd); });
      }
    });
  }
  ~SlowRelay() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    for (auto& t : relays_) t.join();
    close(listener_);
  }
  const std::string& address() const { return address_; }

 private:
  void Relay(int client) {
    absl::SleepFor(delay_);
    int up = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(upstream_port_);
    if (connect(up, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      pollfd fds[2] = {{client, POLLIN, 0}, {up, POLLIN, 0}};
      char buf[16384];
      while (!stop_) {
        if (poll(fds, 2, 100) < 0) break;
        bool done = false;
        for (int i = 0; i < 2 && !done; ++i) {
          if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t n = read(fds[i].fd, buf, sizeof(buf));
          done = n <= 0 || write(fds[1 - i].fd, buf, n) != n;
        }
        if (done) break;
      }
    }
    close(up);
    close(client);
  }

  absl::Duration delay_;
  int upstream_port_ = 0;
  int listener_ = -1;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> relays_;  // the acceptor's alone until it is joined
};

std::vector<std::string> Names(Cluster& c, std::vector<std::string> args) {
  args.insert(args.begin(), "jobs");
  args.push_back("-o");
  args.push_back("json");
  CommandResult r = c.Cli(args);
  std::vector<std::string> out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return {"unreadable: " + r.out + r.err};
  for (const auto& job : j.value("jobs", nlohmann::json::array())) out.push_back(job.value("name", ""));
  return out;
}

TEST(CliTest, FiltersKillOfSeveralJobsDeleteAndJsonTypes) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string a = c.Submit(Sleeper("a", "alice")), b = c.Submit(Sleeper("b", "bob")),
              d = c.Submit(Sleeper("d", "alice"));
  ASSERT_TRUE(c.WaitForState(a, "RUNNING") && c.WaitForState(b, "RUNNING") && c.WaitForState(d, "RUNNING"));
  EXPECT_THAT(Names(c, {"--user", "alice"}), UnorderedElementsAre("a", "d"));
  EXPECT_THAT(Names(c, {"--user", "bob", "--state", "queued,running"}), UnorderedElementsAre("b"));
  EXPECT_THAT(Names(c, {"--queue", "nope"}), UnorderedElementsAre());
  CommandResult r = c.Cli({"jobs", "--state", "sleeping"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'sleeping' is not one of"));

  r = c.Cli({"kill", "a", "b", "nope"});
  EXPECT_EQ(r.exit_code, 1) << "one of them does not exist";
  EXPECT_THAT(r.out, HasSubstr("job a: KILLED"));
  EXPECT_THAT(r.out, HasSubstr("job b: KILLED"));
  EXPECT_THAT(r.err, HasSubstr("job 'nope' does not exist"));
  EXPECT_THAT(Names(c, {"--state", "killed"}), UnorderedElementsAre("a", "b")) << "a finished state implies -a";

  nlohmann::json j = c.Describe(a);
  EXPECT_TRUE(j["id"].is_number()) << j.dump(1);
  EXPECT_TRUE(j["submit_time_unix_ms"].is_number());
  EXPECT_EQ(j["state"], "KILLED");
  EXPECT_EQ(j["priority"], "iteration");
  nlohmann::json worker;
  for (const auto& t : j["tasks"]) {
    if (t["role"] == "worker") worker = t;
  }
  ASSERT_TRUE(worker.is_object()) << j.dump(1);
  EXPECT_EQ(worker["gpu_mask_indices"].size(), 1u) << worker.dump();
  EXPECT_TRUE(worker["gpu_mask"].is_number());
  EXPECT_TRUE(worker["memory_mb"].is_number());
  r = c.Cli({"describe", d});
  EXPECT_THAT(r.out, HasSubstr("Started:    20"));
  EXPECT_THAT(r.out, HasSubstr("Ended:      -"));
  EXPECT_THAT(r.out, HasSubstr("(running)"));
  r = c.Cli({"describe", a});
  EXPECT_THAT(r.out, Not(HasSubstr("Ended:      -")));

  // A name is free again after `delete`; a live job is not deleted.
  r = c.Cli({"delete", d});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("kill it first"));
  r = c.Cli({"delete", a});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("kept in the store as a#"));
  EXPECT_EQ(c.Cli({"describe", a}).exit_code, 1);
  EXPECT_EQ(c.Submit(Sleeper("a", "alice")), "a") << "the name is reused, not suffixed";
  EXPECT_TRUE(c.WaitForState("a", "RUNNING")) << c.Describe("a").dump(1);
  EXPECT_EQ(c.Submit(Sleeper("b", "bob")), "b-2") << "a killed job that was not deleted keeps its name";
  uint64_t new_id = c.Describe("a").value("id", uint64_t{0});
  EXPECT_NE(new_id, j.value("id", uint64_t{0}));
  ASSERT_TRUE(c.RestartServer());
  EXPECT_EQ(c.Describe("a").value("id", uint64_t{0}), new_id) << "after a restart too, the name is the new job's";
}

TEST(CliTest, ControlCharactersInUserNamesAreEscapedWhenPrinted) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string job = c.Submit(Sleeper("esc", "\"eve\\e[2J\\nroot\""));
  ASSERT_FALSE(job.empty());
  for (const auto& args : {std::vector<std::string>{"jobs"}, std::vector<std::string>{"describe", job}}) {
    CommandResult r = c.Cli(args);
    EXPECT_THAT(r.out, HasSubstr("eve\\x1b[2J\\nroot")) << r.out;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no raw escape reaches the terminal";
  }
}

// `--config FILE` with flags on top: the flags win (the harness's --listen
// and --data-dir over the file's), and the file's camelCase queue config
// with its default queue is what jobs that name no queue go to.
TEST(CliTest, ServerFlagsOverrideTheConfigFileAndTheQueueFileSetsTheDefaultQueue) {
  TempDir files;
  std::string queues = files.path() + "/queues.yaml", config = files.path() + "/server.yaml";
  WriteFile(queues, "policy: capacity\ndefaultQueue: research\nqueues:\n"
                    "  - {name: research, capacity: 60, maxCapacity: 100, userLimit: 100}\n"
                    "  - {name: prod, capacity: 40, minShare: {cpu: 1, memory: 1Gi}}\n");
  WriteFile(config, absl::StrCat("listen: 127.0.0.1:1\ndataDir: ", files.path(), "/not-this-one\nqueueConfig: ",
                                 queues, "\n"));
  Cluster c({.nodes = 1, .server_flags = {"--config", config}});
  ASSERT_TRUE(c.WaitNodesReady(1)) << "the server listens where --listen says, not where the file does";
  std::string job = c.Submit(Sleeper("noqueue", "alice"));
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(c.Describe(job).value("queue", ""), "research");
  EXPECT_THAT(c.Cli({"queues"}).out, HasSubstr("prod"));
  EXPECT_FALSE(std::filesystem::exists(files.path() + "/not-this-one")) << "--data-dir wins over dataDir";
}

// A server whose TLS handshake takes 400 ms (a busy server, a loaded
// machine): the command waits for it rather than failing as if no server
// were there (it once gave a connection attempt only 100 ms).
TEST(CliTest, ACommandWaitsOutASlowConnectionSetUp) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  SlowRelay relay(c.address(), absl::Milliseconds(400));
  CommandResult r = RunCli({"nodes", "--server", relay.address()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("node-0"));
}

}  // namespace
}  // namespace trainyard::testing
