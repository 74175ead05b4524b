// Real etcd members for tests: `etcd` (Debian's etcd-server) started in
// temporary directories on free loopback ports, stopped by PID.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/etcd_client.h"

namespace trainyard::store_test {

// Where a member runs: the command prefix that puts it on its host (e.g.
// Hosts::In's `ip netns exec NS`; empty: this one) and the address it
// listens on there.
struct EtcdMemberHost {
  std::vector<std::string> prefix;
  std::string address = "127.0.0.1";
};

// TLS on the members' client URLs, as a production etcd runs: each member
// presents cert_file (serverAuth, naming every member's address) and asks
// every client for a certificate signed by ca_file (--client-cert-auth).
// The cluster's own reads present client_cert_file. Peers stay plaintext.
struct EtcdTlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string client_cert_file;
  std::string client_key_file;
};

// Makes a CA, a member certificate naming `addresses` and a client
// certificate, PEM files in `dir` (mode 0600).
absl::StatusOr<EtcdTlsFiles> MakeEtcdTlsFiles(const std::string& dir, const std::vector<std::string>& addresses);

class EtcdTestCluster {
 public:
  // Starts `members` members as one etcd cluster and waits until it answers.
  explicit EtcdTestCluster(int members = 1) : EtcdTestCluster(std::vector<EtcdMemberHost>(members)) {}
  // One member on each of `hosts`; with `tls` (its ca_file set) the members
  // serve their clients TLS only. `extra_flags` go on every member's command
  // line (e.g. --max-txn-ops=1024).
  explicit EtcdTestCluster(std::vector<EtcdMemberHost> hosts, EtcdTlsFiles tls = {},
                           std::vector<std::string> extra_flags = {});
  ~EtcdTestCluster();
  EtcdTestCluster(const EtcdTestCluster&) = delete;
  EtcdTestCluster& operator=(const EtcdTestCluster&) = delete;

  // OK once every member was started and the cluster answered a read.
  const absl::Status& status() const { return status_; }
  // "etcd://127.0.0.1:P1,127.0.0.1:P2,..." ("etcds://" with TLS)
  std::string address() const;
  std::vector<std::string> endpoints() const;
  // How a client reaches the members (with TLS: the client certificate).
  EtcdConnectOptions connect_options() const;
  pid_t pid(int member) const { return members_[member].pid; }
  int size() const { return static_cast<int>(members_.size()); }
  // SIGKILL to a member, reaped; Restart starts it again on its data dir and
  // returns once it answers on its own endpoint.
  void Kill(int member);
  absl::Status Restart(int member);

 private:
  struct Member {
    EtcdMemberHost host;
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  absl::Status Spawn(int member);
  std::string initial_cluster() const;

  std::string dir_;
  EtcdTlsFiles tls_;
  std::vector<std::string> extra_flags_;
  std::vector<Member> members_;
  absl::Status status_;
};

}  // namespace trainyard::store_test
