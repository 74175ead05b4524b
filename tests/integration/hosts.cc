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

// ip_forward is shared by every test process that makes hosts (ctest runs
// two at once): the first to take it records what it was in this file, the
// last to let go puts it back. A shared lock is held while hosts exist.
constexpr char kForwardFile[] = "/proc/sys/net/ipv4/ip_forward";
constexpr char kForwardLock[] = "/tmp/trainyard-test-ip-forward";

int TakeForwarding() {
  int fd = open(kForwardLock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  flock(fd, LOCK_EX);
  if (ReadFile(kForwardLock).empty()) WriteFile(kForwardLock, ReadFile(kForwardFile));
  WriteFile(kForwardFile, "1\n");
  flock(fd, LOCK_SH);
  return fd;
}

void GiveForwardingBack(int fd) {
  if (fd < 0) return;
  flock(fd, LOCK_UN);
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {  // no one else uses it
    std::string was = ReadFile(kForwardLock);
    if (!was.empty()) WriteFile(kForwardFile, was);
    WriteFile(kForwardLock, "");
  }
  close(fd);
}

}  // namespace

Hosts::Hosts(int count) {
  ip_ = IpTool();
  // TRAINYARD_TEST_NO_NETNS=1 tries a test's loopback variant where namespaces work.
  if (ip_.empty() || getuid() != 0 || std::getenv("TRAINYARD_TEST_NO_NETNS") != nullptr) return;
  int tag = getpid() % 100000;
  subnet_ = 20 + getpid() % 200;
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
  forward_lock_ = TakeForwarding();
  ready_ = forward_lock_ >= 0 && ReadFile(kForwardFile) == "1\n";
}

Hosts::~Hosts() {
  // Deleting a namespace deletes its end of the veth pair, and so the pair.
  for (const std::string& ns : names_) Ip({"netns", "del", ns});
  GiveForwardingBack(forward_lock_);
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
