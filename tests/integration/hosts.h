// Separate hosts on one machine, for tests of a cluster spread over several:
// each host is a network namespace joined to the test's own by a veth pair
// (the test's side 10.S.N.1, the host's own address 10.S.N.2), routed
// through the test's namespace, so every host reaches every other one and
// the test (the client) reaches all. A link can be cut and healed: its
// host's side goes down, as with a pulled cable. What is sent to or from it
// is lost: no answer, no reset (a sender may be told the host is
// unreachable once its neighbour entry for it has failed, after seconds).
// Made by the test (root and `ip` are needed: ready() says so), removed by
// the destructor; ip_forward is put back as it was once no test uses it.
#pragma once

#include <string>
#include <vector>

namespace trainyard::testing {

class Hosts {
 public:
  // Hosts 1..count. Where namespaces cannot be made (not root, no `ip`, or
  // TRAINYARD_TEST_NO_NETNS set), ready() is false and nothing is made.
  explicit Hosts(int count);
  ~Hosts();
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  bool ready() const { return ready_; }
  int count() const { return static_cast<int>(names_.size()); }
  // Host n's network namespace.
  const std::string& ns(int n) const { return names_[n - 1]; }
  // Host n's own address.
  std::string address(int n) const;
  // The test's side of host n's link (where host n finds the test's namespace).
  std::string test_side(int n) const;
  // `argv` run in host n (`ip netns exec`, which execs it: the pid a test
  // starts is the program's own). With `hostname`, in a UTS namespace of its
  // own named so (Open MPI tells hosts apart by name).
  std::vector<std::string> In(int n, const std::vector<std::string>& argv, const std::string& hostname = "") const;
  // Takes host n's link down (true when done), or back up.
  bool Cut(int n);
  bool Heal(int n);
  // The `ip` tool's path ("" when missing).
  const std::string& ip() const { return ip_; }

 private:
  bool Ip(std::vector<std::string> args) const;
  std::string ip_;
  int subnet_ = 0;
  std::vector<std::string> names_;
  std::vector<std::string> peers_;  // each host's end of its veth pair
  int users_fd_ = -1;  // its shared lock held while these hosts exist (ip_forward on)
  bool ready_ = false;
};

}  // namespace trainyard::testing
