// Server: the resource manager daemon — opens the store, recovers, builds the
// scheduler from the configuration, and serves the client gRPC API on one
// address, the agents' streams on another (--agent-listen: a door of their
// own, so clients never take an agent's place), and with --http-listen the
// REST API and /metrics (server/http/) on a third.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "httpd/http_server.h"
#include "server/config.h"
#include "server/depositions.h"
#include "security/server_security.h"
#include "server/job_manager.h"

namespace trainyard {
class EtcdClient;
namespace server {
class Leadership;
}  // namespace server
}  // namespace trainyard

namespace grpc {
class Server;
}

namespace trainyard::server {

class AgentService;
class AgentStreams;
class ClientService;
class JoinService;
class LogHub;
class LoginSocket;
class ManagerLogBackend;
class ExecRelay;
class ServiceLinks;
class SharedFiles;
class ManagerRestBackend;
class UserRateLimiter;
namespace http {
class History;
class HistorySampler;
class HttpServer;
class ServiceProxy;
class StandbyDoor;
}

class Server {
 public:
  // Starts a server. Errors: a store that cannot be opened (corrupt, newer
  // schema, not ours), a queue config that does not load, an address that
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerConfig config);
  ~Server();

  // host:port actually bound (the port is chosen when config.listen ends in :0).
  const std::string& address() const { return address_; }
  // host:port (or unix:PATH) of the agents' listener actually bound.
  const std::string& agent_address() const { return agent_address_; }
  // host:port of the HTTP API ("" when config.http_listen is empty).
  const std::string& http_address() const { return http_address_; }
  // "https" when the HTTP API serves TLS (httpTls), else "http".
  const std::string& http_scheme() const { return http_scheme_; }
  JobManager* manager() { return manager_.get(); }
  // Blocks until Shutdown is called from another thread.
  void Wait();
  void Shutdown();

 private:
  Server() = default;
  RealClock clock_;
  // With an etcd store: this server's leadership (destroyed after the store,
  // so its last writes are fenced by a lease still held).
  std::unique_ptr<EtcdClient> leader_client_;
  std::unique_ptr<Leadership> leadership_;
  StateStorePtr store_;
  // With an etcd store: the data dir's files every server holds alike.
  std::unique_ptr<SharedFiles> shared_files_;
  // The execution backend: the agents' streams (the manager's orders go
  // out on them; the agent service opens and closes them). Destroyed after
  // the manager and the agents' listener.
  std::unique_ptr<AgentStreams> streams_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<security::ServerSecurity> security_;
  std::unique_ptr<ManagerLogBackend> log_backend_;
  std::unique_ptr<LogHub> log_hub_;
  std::unique_ptr<ExecRelay> exec_relay_;
  std::unique_ptr<ServiceLinks> service_links_;
  std::unique_ptr<ClientService> client_service_;
  std::unique_ptr<AgentService> agent_service_;
  std::unique_ptr<JoinService> join_service_;  // with TLS only
  std::unique_ptr<UserRateLimiter> rate_limiter_;
  std::unique_ptr<grpc::Server> grpc_;        // clients and job masters
  std::unique_ptr<grpc::Server> agent_grpc_;  // agents' streams only
  std::unique_ptr<ManagerRestBackend> rest_backend_;
  std::unique_ptr<http::HttpServer> http_;
  std::shared_ptr<http::ServiceProxy> service_proxy_;  // its routes hold it too
  // The dashboard's charts' samples (historyIntervalMs), with the HTTP API.
  std::unique_ptr<http::History> history_;
  std::unique_ptr<http::HistorySampler> history_sampler_;
  std::unique_ptr<LoginSocket> login_;
  // With an etcd store, while this server waits as a standby and until its
  // own HTTP API binds --http-listen: sends callers to the leader.
  std::unique_ptr<http::StandbyDoor> standby_door_;
  bool standby_door_tried_ = false;            // opened once, or failed once (logged)
  std::string seen_leader_, seen_leader_url_;  // what SeeLeader last logged
  std::string address_;
  std::string agent_address_;
  std::string http_address_;
  std::string http_scheme_ = "http";

  // Opens config.store: SQLite under the data dir, or etcd after winning
  // leadership (blocks while another server leads).
  absl::Status OpenStore(const ServerConfig& config);
  // With an etcd store: takes the files of the data dir every server holds
  // alike from the store (shared_files.h), before anything reads them.
  absl::Status AdoptSharedFiles(const ServerConfig& config);
  // With an etcd store: no round runs and no order leaves once this
  // server's lease may have ended by its own clock (JobManager::SetOrderFence).
  void FenceOrders();
  // The server's own part of `trainyard status`: address, store and
  // leadership (with etcd, the standbys listed there).
  void FillClusterStatus(v1::ClusterStatus* out);
  // Adds the standbys and depositions last read.
  void FillLeaderLists(v1::ClusterStatus* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(status_mu_);
  // What FillClusterStatus reads on gRPC threads: the address once bound,
  // and the standbys and depositions read from etcd at most once a second.
  absl::Mutex status_mu_;
  std::string status_address_ ABSL_GUARDED_BY(status_mu_);
  std::vector<std::string> standbys_ ABSL_GUARDED_BY(status_mu_);
  std::vector<DepositionCount> depositions_ ABSL_GUARDED_BY(status_mu_);
  absl::Time standbys_read_ ABSL_GUARDED_BY(status_mu_) = absl::InfinitePast();
  bool standbys_reading_ ABSL_GUARDED_BY(status_mu_) = false;
  std::string store_kind_ = "sqlite";
  std::vector<std::string> etcd_endpoints_;
  std::string etcd_prefix_;
  std::string deposed_dir_;  // where a deposed leader notes why (the data dir)
  // Depositions noted in deposed_dir_ that may not be in etcd yet; put there
  // before campaigning, then while a standby sees a leader, then on winning.
  bool depositions_unreported_ = true;
  void ReportDepositions();
  int leader_lease_ms_ = 0;
  int64_t started_unix_ms_ = 0;
  // Start's steps, in order: the services over the manager (log hub,
  // limits, exec relay, service links, the gRPC services); the clients'
  // listener (and the join service with TLS), then the agents' and the
  // connection guards; the manager's loop, told the servers' addresses; the
  // log line that it serves, and the admin's token on a first start.
  void BuildServices(const ServerConfig& config);
  absl::Status StartClientListener(const ServerConfig& config);
  void StartManager(const ServerConfig& config);
  absl::Status Announce(const ServerConfig& config);
  // Binds the agents' listener (config.agent_listen, else the port above
  // the clients' `client_port`); errors name the address and the flag.
  absl::Status StartAgentListener(const ServerConfig& config, int client_port);
  // Caps the connections to the clients' gRPC `port` and to the agents'
  // listener below the open-file `limit`, each door with its own caps
  // (connection_guard.h).
  void InstallConnectionGuards(const ServerConfig& config, int port, int limit);
  // Opens the security state of the data dir; on a first start makes the
  // admin's client config (logged).
  absl::Status StartSecurity(const ServerConfig& config);
  // Serves the login socket of `config` (none with authentication off).
  absl::Status StartLoginSocket(const ServerConfig& config);
  // Binds and starts the HTTP API of `config`; errors name the address.
  absl::Status StartHttp(const ServerConfig& config);
  // While a standby: the leader now (Leadership's on_standby). Opens the
  // standby door on --http-listen at the first call.
  void SeeLeader(const ServerConfig& config, const std::string& leader, const std::string& http_url);
  // Once this server serves HTTP: puts its URL in etcd for the standbys.
  void PublishHttpUrl();
};

// Builds the scheduler options from the server config (queue file, policy,
// limits, waits). Errors name the queue file and the problem.
// `config.default_queue` is filled in from the queue file's defaultQueue
// when the config does not name one (else "default"); it must be a leaf.
absl::StatusOr<core::SchedulerOptions> SchedulerOptionsFor(ServerConfig& config);

// True when `config`'s listener serves TLS: a tls_dir is set and the
// listener is TCP (a unix: socket stays plaintext).
bool UsesTls(const ServerConfig& config);

// The HTTP door's options of `config` (address, threads, caps, deadlines,
// HTTPS), for the HTTP API and a standby's door alike.
httpd::HttpOptions HttpDoorOptions(const ServerConfig& config);

}  // namespace trainyard::server
