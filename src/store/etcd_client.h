// A small client of etcd's v3 gRPC API (the generated stubs of etcd's own
// .proto files, proto/CMakeLists.txt): the calls the etcd StateStore and the
// servers' leader election make. It holds one channel per etcd member and
// moves to the next member when one is unreachable, as etcd's own clients do.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/etcd/rpc.grpc.pb.h"

namespace trainyard {

struct EtcdConnectOptions {
  std::vector<std::string> endpoints;  // host:port of each member
  // TLS to etcd (implied by ca_file): the CA that signed the members'
  // certificates (PEM file; the system's roots when empty), with a client
  // certificate and key when etcd asks for one.
  bool tls = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // Each call gives up after this long (every member tried).
  absl::Duration call_timeout = absl::Seconds(10);
};

// Parses "etcd://host:port,host:port" (plain) or "etcds://..." (TLS) into
// endpoints; the error names what is wrong with the address.
absl::StatusOr<EtcdConnectOptions> ParseEtcdAddress(const std::string& address);

// The end of the key range that holds every key starting with `prefix`.
std::string EtcdPrefixEnd(const std::string& prefix);

class EtcdClient {
 public:
  // Makes the channels (TLS files read now: an unreadable file is an error);
  // connects lazily, so a member that is down does not fail it.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const EtcdConnectOptions& options);
  ~EtcdClient();

  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);

  // Calls `fn` for every key under `prefix`, in key order, as of one revision
  // (returned): a consistent snapshot read in pages.
  absl::StatusOr<int64_t> RangePrefix(const std::string& prefix,
                                      const std::function<void(const mvccpb::KeyValue&)>& fn);

  // Leases: granted for `ttl`, kept alive by one renewal at a time (the
  // returned TTL is 0 once the lease has expired), revoked at a clean end.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  absl::StatusOr<int64_t> KeepAliveOnce(int64_t lease_id);
  absl::Status RevokeLease(int64_t lease_id);

 private:
  explicit EtcdClient(EtcdConnectOptions options);

  // Runs `call` against the current member, moving on to the next one while
  // they are unreachable, until the call timeout.
  template <typename Call>
  absl::Status Run(const char* what, Call call);

  struct Member;
  EtcdConnectOptions options_;
  std::vector<std::unique_ptr<Member>> members_;
  std::atomic<size_t> current_{0};
};

}  // namespace trainyard
