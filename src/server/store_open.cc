// Server::OpenStore: the state store a server runs on. SQLite under the data
// dir for one machine; etcd for several servers, of which the one holding the
// election key leads (leadership.h) and the others wait here.
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "server/leadership.h"
#include "server/server.h"
#include "store/etcd_client.h"
#include "store/etcd_state_store.h"
#include "store/sqlite_state_store.h"

namespace trainyard::server {
namespace {

// The exit status of a deposed leader: a supervisor starts it again, and it
// comes back as a standby (sysexits' EX_TEMPFAIL).
constexpr int kDeposedExitCode = 75;

[[noreturn]] void ExitDeposed(const std::string& why) {
  Log(LogLevel::kError, "leader",
      "no longer the leader: %s; exiting (status %d) so that it is started again as a standby", why,
      kDeposedExitCode);
  std::_Exit(kDeposedExitCode);
}

}  // namespace

absl::Status Server::OpenStore(const ServerConfig& config) {
  if (config.store.empty()) {
    SqliteStoreOptions options;
    options.sync = config.store_sync ? StoreSync::kFull : StoreSync::kOff;
    options.group_commit = config.store_group_commit;
    absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(config.data_dir, options);
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    return absl::OkStatus();
  }
  // The data dir still holds this server's own files (tokens, logs).
  std::error_code error;
  std::filesystem::create_directories(config.data_dir, error);
  if (error || chmod(config.data_dir.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("data dir ", config.data_dir, ": cannot create it: ", error ? error.message() : strerror(errno)));
  }
  absl::StatusOr<EtcdConnectOptions> connect = ParseEtcdAddress(config.store);
  if (!connect.ok()) return connect.status();
  connect->ca_file = config.etcd_ca_file;
  connect->cert_file = config.etcd_cert_file;
  connect->key_file = config.etcd_key_file;
  // The election's calls (renewals) give up within one lease: a renewal
  // that cannot succeed in time means the lease is lost anyway.
  EtcdConnectOptions leader_connect = *connect;
  leader_connect.call_timeout = absl::Milliseconds(config.leader_lease_ms);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(leader_connect);
  if (!client.ok()) return client.status();
  leader_client_ = std::move(*client);

  LeadershipOptions leading;
  leading.key = config.etcd_prefix + "leader";
  leading.identity = config.listen;
  leading.ttl = absl::Milliseconds(config.leader_lease_ms);
  leading.on_lost = ExitDeposed;
  leading.on_standby = [](const std::string& leader) {
    Log(LogLevel::kInfo, "leader", "standby: %s leads; this server takes over when it stops",
        leader.empty() ? "another server" : leader);
  };
  Log(LogLevel::kInfo, "leader", "campaigning to lead the cluster in %s (key %s)", config.store, leading.key);
  absl::StatusOr<std::unique_ptr<Leadership>> won = Leadership::Campaign(leader_client_.get(), leading);
  if (!won.ok()) return won.status();
  leadership_ = std::move(*won);
  Log(LogLevel::kInfo, "leader", "this server leads (fence revision %d); loading the state from etcd",
      leadership_->revision());

  EtcdStoreOptions options;
  options.connect = *connect;
  options.prefix = config.etcd_prefix;
  options.max_txn_ops = config.etcd_max_txn_ops;
  options.max_request_bytes = config.etcd_max_request_bytes;
  options.on_write_lost = [](const absl::Status& why) { ExitDeposed(std::string(why.message())); };
  absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::Open(options);
  if (!store.ok()) return store.status();
  (*store)->SetFence(leading.key, leadership_->revision());
  store_ = std::move(*store);
  return absl::OkStatus();
}

}  // namespace trainyard::server
