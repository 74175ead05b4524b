// Server::OpenStore: the state store a server runs on. SQLite under the data
// dir for one machine; etcd for several servers, of which the one holding the
// election key leads (leadership.h) and the others wait here.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "security/certs.h"
#include "server/depositions.h"
#include "server/http/standby_door.h"
#include "server/leadership.h"
#include "server/agent_streams.h"
#include "server/server.h"
#include "server/shared_files.h"
#include "store/etcd_client.h"
#include "store/etcd_state_store.h"
#include "store/sqlite_state_store.h"

namespace trainyard::server {
namespace {

// The exit status of a deposed leader: a supervisor starts it again, and it
// comes back as a standby (sysexits' EX_TEMPFAIL).
constexpr int kDeposedExitCode = 75;

// Where a deposed leader notes why (depositions.h): its data dir, its name.
struct DeposedNote {
  std::string data_dir;
  std::string server;
};

[[noreturn]] void ExitDeposed(const DeposedNote& note, Deposition reason, const std::string& why) {
  // Two threads may learn it at once: the first notes and exits, the other
  // waits for that (neither returns to act).
  static std::atomic<bool> exiting{false};
  if (exiting.exchange(true)) {
    for (;;) pause();
  }
  // A disk that stalls the note (or a log pipe nobody reads) does not keep
  // a deposed leader alive: it may still hold the election key.
  std::thread([] {
    absl::SleepFor(absl::Seconds(1));
    std::_Exit(kDeposedExitCode);
  }).detach();
  Log(LogLevel::kError, "leader",
      "no longer the leader (%s): %s; exiting (status %d) so that it is started again as a standby",
      DepositionReason(reason), why, kDeposedExitCode);
  NoteDeposition(note.data_dir, reason, note.server, why);
  std::_Exit(kDeposedExitCode);
}

// The key the jobs' secret is sealed under in a shared store: made from the
// cluster CA's key in --tls-dir, which every server of the cluster holds.
// "" (the secret is not shared) for a plaintext server or one whose
// --tls-dir holds no CA key.
std::string SealKeyOf(const ServerConfig& config) {
  if (!UsesTls(config)) {
    Log(LogLevel::kWarning, "server",
        "plaintext: the jobs' secret is not shared with the other servers: give each the same %s/job-secret",
        config.data_dir);
    return "";
  }
  absl::StatusOr<security::KeyPair> ca = security::LoadCa(config.tls_dir);
  absl::StatusOr<std::string> der = ca.ok() ? security::PrivateKeyDer(ca->key_pem) : ca.status();
  if (!der.ok()) {
    Log(LogLevel::kWarning, "server",
        "the jobs' secret is not shared with the other servers (%s): give each the same %s/job-secret",
        der.status().message(), config.data_dir);
    return "";
  }
  return SharedFiles::SealKeyFromCaKey(*der);
}

}  // namespace

absl::Status Server::AdoptSharedFiles(const ServerConfig& config) {
  if (leadership_ == nullptr) return absl::OkStatus();
  // The cluster's tokens and jobs' secret, as the last leader left them,
  // before anything reads them.
  shared_files_ = std::make_unique<SharedFiles>(store_.get(), config.data_dir, SealKeyOf(config));
  return shared_files_->Adopt();
}

absl::Status Server::OpenStore(const ServerConfig& config) {
  started_unix_ms_ = absl::ToUnixMillis(absl::Now());
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
  store_kind_ = "etcd";
  etcd_endpoints_ = connect->endpoints;
  leader_lease_ms_ = config.leader_lease_ms;
  // The election's calls (renewals) give up within one lease: a renewal
  // that cannot succeed in time means the lease is lost anyway.
  EtcdConnectOptions leader_connect = *connect;
  leader_connect.call_timeout = absl::Milliseconds(config.leader_lease_ms);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(leader_connect);
  if (!client.ok()) return client.status();
  leader_client_ = std::move(*client);
  etcd_prefix_ = config.etcd_prefix;
  deposed_dir_ = config.data_dir;
  // Counted before it campaigns (or, etcd away, once it answers): the
  // leader shows it from then on.
  ReportDepositions();
  const DeposedNote note{config.data_dir, config.listen};

  LeadershipOptions leading;
  leading.key = config.etcd_prefix + "leader";
  leading.standby_prefix = config.etcd_prefix + "leader-standby/";
  leading.terms_key = config.etcd_prefix + "leader-terms";
  leading.identity = config.listen;
  leading.ttl = absl::Milliseconds(config.leader_lease_ms);
  leading.on_lost = [note](const std::string& why) { ExitDeposed(note, Deposition::kLeaseLost, why); };
  leading.http_key = config.etcd_prefix + "leader-http";
  // Called only while Campaign below runs, with `config` alive.
  leading.on_standby = [this, &config](const std::string& leader, const std::string& http_url) {
    SeeLeader(config, leader, http_url);
  };
  Log(LogLevel::kInfo, "leader", "campaigning to lead the cluster in %s (key %s)", config.store, leading.key);
  absl::StatusOr<std::unique_ptr<Leadership>> won = Leadership::Campaign(leader_client_.get(), leading);
  if (!won.ok()) return won.status();
  leadership_ = std::move(*won);
  ReportDepositions();
  if (standby_door_) standby_door_->SetTakingOver();
  Log(LogLevel::kInfo, "leader", "this server leads (fence revision %d, leadership %d of the cluster); loading the state from etcd",
      leadership_->revision(), leadership_->terms());

  EtcdStoreOptions options;
  options.connect = *connect;
  options.prefix = config.etcd_prefix;
  options.max_txn_ops = config.etcd_max_txn_ops;
  options.max_request_bytes = config.etcd_max_request_bytes;
  // A refused compare is the fence at work; any other failure leaves the
  // write's outcome unknown (etcd_state_store.h).
  options.on_write_lost = [note](const absl::Status& why) {
    ExitDeposed(note, why.code() == absl::StatusCode::kFailedPrecondition ? Deposition::kFenced : Deposition::kWriteUnknown,
                std::string(why.message()));
  };
  absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::Open(options);
  if (!store.ok()) return store.status();
  (*store)->SetFence(leading.key, leadership_->revision(), leadership_->terms());
  store_ = std::move(*store);
  return absl::OkStatus();
}

void Server::ReportDepositions() {
  if (!depositions_unreported_) return;
  absl::Status st = ReportDeposition(leader_client_.get(), etcd_prefix_, deposed_dir_);
  depositions_unreported_ = !st.ok();
  if (!st.ok()) Log(LogLevel::kWarning, "leader", "%s", st.message());
}

void Server::SeeLeader(const ServerConfig& config, const std::string& leader, const std::string& http_url) {
  ReportDepositions();  // etcd answers now
  if (leader != seen_leader_) {
    Log(LogLevel::kInfo, "leader", "standby: %s leads; this server takes over when it stops",
        leader.empty() ? "another server" : leader);
    seen_leader_ = leader;
  }
  if (!config.http_listen.empty() && !standby_door_tried_) {
    standby_door_tried_ = true;
    absl::StatusOr<std::unique_ptr<http::StandbyDoor>> door = http::StandbyDoor::Open(HttpDoorOptions(config));
    if (door.ok()) {
      standby_door_ = std::move(*door);
      Log(LogLevel::kInfo, "leader", "standby door on %s: HTTP callers are sent to the leader's HTTP API",
          standby_door_->address());
    } else {
      Log(LogLevel::kWarning, "leader", "no standby door on --http-listen %s: %s", config.http_listen,
          door.status().message());
    }
  }
  if (!http_url.empty() && http_url != seen_leader_url_) {
    Log(LogLevel::kInfo, "leader", "standby: the leader's HTTP API is at %s", http_url);
  }
  seen_leader_url_ = http_url;
  if (standby_door_) standby_door_->SetLeader(leader, http_url);
}

void Server::PublishHttpUrl() {
  if (leadership_ == nullptr || http_address_.empty()) return;
  // A wildcard HTTP host is reached at the host of the gRPC address.
  size_t colon = http_address_.rfind(':');
  std::string host = http_address_.substr(0, colon);
  auto wildcard = [](const std::string& h) { return h == "0.0.0.0" || h == "[::]" || h == "::" || h.empty(); };
  if (wildcard(host)) host = address_.substr(0, address_.rfind(':'));
  if (wildcard(host)) {
    Log(LogLevel::kWarning, "leader",
        "the HTTP API listens on %s and the gRPC API on %s, no host a caller can reach: standbys cannot send "
        "HTTP callers here (give --http-listen or --listen a host)",
        http_address_, address_);
    return;
  }
  std::string reach = absl::StrCat(host, http_address_.substr(colon));
  std::string url = absl::StrCat(http_scheme_, "://", reach);
  if (security::IsLocalAddress(reach)) {
    Log(LogLevel::kWarning, "leader",
        "the HTTP API is reached at loopback (%s): a standby on another host sends its callers to their own "
        "loopback; give --http-listen a host they can reach",
        reach);
  }
  // A put that fails (etcd slow past the call timeout) is tried again a few
  // times; without it standbys answer 503 for this whole leadership.
  absl::Status st;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (attempt > 0) absl::SleepFor(absl::Milliseconds(200));
    st = leadership_->PublishHttpUrl(url);
    if (st.ok() || st.code() == absl::StatusCode::kFailedPrecondition) break;
  }
  if (!st.ok()) {
    Log(LogLevel::kWarning, "leader", "could not put the HTTP API's URL %s in etcd: %s", url, st.message());
    return;
  }
  Log(LogLevel::kInfo, "leader", "standbys send HTTP callers to %s", url);
}

void Server::FillClusterStatus(v1::ClusterStatus* out) {
  {
    absl::MutexLock lock(&status_mu_);
    out->set_server_address(status_address_);
    out->set_store(store_kind_);
    for (const std::string& e : etcd_endpoints_) out->add_etcd_endpoints(e);
    out->set_leader(true);  // a standby does not listen
    if (leadership_ == nullptr) {
      out->set_leader_since_unix_ms(started_unix_ms_);
      return;
    }
    out->set_leader_revision(leadership_->revision());
    out->set_leader_since_unix_ms(leadership_->since_unix_ms());
    out->set_leader_terms(leadership_->terms());
    out->set_leader_lease_ms(leader_lease_ms_);
    // Who waits (each standby's key lives with its lease) and the leaders
    // deposed so far (depositions.h). Read at most once
    // a second, by one caller at a time and without the lock (etcd slow
    // holds up only that caller); the others, and a read that fails, give
    // the last list.
    if (standbys_reading_ || absl::Now() - standbys_read_ < absl::Seconds(1)) {
      FillLeaderLists(out);
      return;
    }
    standbys_read_ = absl::Now();
    standbys_reading_ = true;
  }
  std::vector<std::string> now;
  absl::StatusOr<int64_t> read = leader_client_->RangePrefix(
      leadership_->options().standby_prefix, [&](const mvccpb::KeyValue& kv) { now.push_back(kv.value()); });
  absl::StatusOr<std::vector<DepositionCount>> deposed =
      read.ok() ? ReadDepositions(leader_client_.get(), etcd_prefix_) : read.status();
  absl::MutexLock lock(&status_mu_);
  standbys_reading_ = false;
  if (read.ok()) standbys_ = std::move(now);
  if (deposed.ok()) depositions_ = std::move(*deposed);
  FillLeaderLists(out);
}

void Server::FillLeaderLists(v1::ClusterStatus* out) {
  for (const std::string& s : standbys_) out->add_standbys(s);
  for (const DepositionCount& d : depositions_) {
    v1::LeaderDeposition* o = out->add_depositions();
    o->set_reason(d.reason);
    o->set_count(d.count);
    o->set_last_unix_ms(d.last_unix_ms);
    o->set_last_server(d.last_server);
    o->set_last_why(d.last_why);
  }
}

void Server::FenceOrders() {
  if (leadership_ == nullptr) return;
  Leadership* leading = leadership_.get();
  auto fence = [leading, note = DeposedNote{deposed_dir_, leading->options().identity}] {
    // The renewal thread says so within a third of the lease; a process
    // that was paused may run its loop first.
    if (!leading->Valid()) {
      ExitDeposed(note, Deposition::kPaused, "its lease may have ended (the process was paused or cut off from etcd)");
    }
  };
  manager_->SetOrderFence(fence);  // before each round
  streams_->SetFence(fence);       // before each order leaves
}

}  // namespace trainyard::server
