#include "tests/integration/hosts.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

std::string IpTool() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

// Hosts are made and removed, and ip_forward switched, under one lock
// shared by every test process (ctest runs two at once): the first process
// to make hosts records what ip_forward was, the last to remove its hosts
// puts it back (each holds a shared lock on the users file meanwhile). The
// files are opened without following links.
constexpr char kForwardFile[] = "/proc/sys/net/ipv4/ip_forward";
constexpr char kMutexFile[] = "/tmp/trainyard-test-hosts.lock";
constexpr char kUsersFile[] = "/tmp/trainyard-test-hosts.users";
constexpr char kRecordFile[] = "/tmp/trainyard-test-hosts.forward";

int OpenOwn(const char* path) { return ::open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600); }

// Holds the mutex file's lock while it lives.
class HostsLock {
 public:
  HostsLock() : fd_(OpenOwn(kMutexFile)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~HostsLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_;
};

void WriteRecord(const std::string& text) {
  int fd = OpenOwn(kRecordFile);
  if (fd < 0) return;
  if (::ftruncate(fd, 0) == 0 && !text.empty()) {
    ssize_t ignored = ::write(fd, text.data(), text.size());
    (void)ignored;
  }
  ::close(fd);
}

std::string ReadRecord() {
  int fd = OpenOwn(kRecordFile);
  if (fd < 0) return "";
  char buf[16];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

Hosts::Hosts(int count) {
  ip_ = IpTool();
  // TRAINYARD_TEST_NO_NETNS=1 tries a test's loopback variant where namespaces work.
  if (ip_.empty() || getuid() != 0 || std::getenv("TRAINYARD_TEST_NO_NETNS") != nullptr) return;
  HostsLock lock;
  int tag = getpid() % 100000;
  // A /16 no other test process (nor anything else here) uses.
  std::string in_use = RunCommandLine({ip_, "-4", "-o", "addr"}, absl::Seconds(20)).out +
                       RunCommandLine({ip_, "-4", "route"}, absl::Seconds(20)).out;
  for (int k = 0; k < 200; ++k) {
    subnet_ = 20 + (getpid() + k) % 200;
    if (in_use.find(absl::StrCat("10.", subnet_, ".")) == std::string::npos) break;
  }
  for (int n = 1; n <= count; ++n) {
    std::string ns = absl::StrCat("ty", tag, "n", n), host = absl::StrCat("ty", tag, "h", n),
                peer = absl::StrCat("ty", tag, "p", n);
    if (!Ip({"netns", "add", ns})) return;
    names_.push_back(ns);
    peers_.push_back(peer);
    bool ok = Ip({"link", "add", host, "type", "veth", "peer", "name", peer}) &&
              Ip({"link", "set", peer, "netns", ns}) && Ip({"addr", "add", test_side(n) + "/24", "dev", host}) &&
              Ip({"link", "set", host, "up"}) && Ip({"-n", ns, "addr", "add", address(n) + "/24", "dev", peer}) &&
              Ip({"-n", ns, "link", "set", peer, "up"}) && Ip({"-n", ns, "link", "set", "lo", "up"}) &&
              Ip({"-n", ns, "route", "add", "default", "via", test_side(n)});
    if (!ok) return;
  }
  users_fd_ = OpenOwn(kUsersFile);
  if (users_fd_ < 0) return;
  // No other process holds the users lock: this one is the first.
  if (::flock(users_fd_, LOCK_EX | LOCK_NB) == 0) WriteRecord(ReadFile(kForwardFile));
  ::flock(users_fd_, LOCK_SH);  // under the mutex: no one sees the change of mode
  WriteFile(kForwardFile, "1\n");
  ready_ = ReadFile(kForwardFile) == "1\n";
}

Hosts::~Hosts() {
  HostsLock lock;
  // Deleting a namespace deletes its end of the veth pair, and so the pair.
  for (const std::string& ns : names_) Ip({"netns", "del", ns});
  if (users_fd_ < 0) return;
  ::flock(users_fd_, LOCK_UN);
  if (::flock(users_fd_, LOCK_EX | LOCK_NB) == 0) {  // the last one
    std::string was = ReadRecord();
    if (!was.empty()) WriteFile(kForwardFile, was);
    WriteRecord("");
  }
  ::close(users_fd_);
}

std::string Hosts::address(int n) const { return absl::StrCat("10.", subnet_, ".", n, ".2"); }
std::string Hosts::test_side(int n) const { return absl::StrCat("10.", subnet_, ".", n, ".1"); }

std::vector<std::string> Hosts::In(int n, const std::vector<std::string>& argv, const std::string& hostname) const {
  std::vector<std::string> out;
  if (hostname.empty()) {
    out = {ip_, "netns", "exec", ns(n)};
  } else {
    // unshare, ip and sh each exec the next.
    out = {"/usr/bin/unshare", "--uts", ip_, "netns", "exec", ns(n), "/bin/sh", "-c",
           absl::StrCat("hostname ", hostname, " && exec \"$0\" \"$@\"")};
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// The host's own end goes down: the test's end keeps its route (marked
// linkdown), so what is sent toward the host is dropped, not refused.
bool Hosts::Cut(int n) { return Ip({"-n", ns(n), "link", "set", peers_[n - 1], "down"}); }

bool Hosts::Heal(int n) {
  return Ip({"-n", ns(n), "link", "set", peers_[n - 1], "up"}) &&
         Ip({"-n", ns(n), "route", "replace", "default", "via", test_side(n)});
}

bool Hosts::Ip(std::vector<std::string> args) const {
  args.insert(args.begin(), ip_);
  return RunCommandLine(args, absl::Seconds(20)).exit_code == 0;
}

}  // namespace trainyard::testing
