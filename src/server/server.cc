// Server start-up and shutdown.
#include "server/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "api/agent_address.h"
#include "api/queue_config_yaml.h"
#include "security/certs.h"
#include "security/files.h"
#include "server/agent_service.h"
#include "server/client_service.h"
#include "server/connection_guard.h"
#include "server/http/dashboard/dashboard.h"
#include "server/http/history.h"
#include "server/http/http_server.h"
#include "server/http/metrics.h"
#include "server/http/rest_api.h"
#include "server/http/service_proxy.h"
#include "server/http/standby_door.h"
#include "server/join_service.h"
#include "server/login_socket.h"
#include "server/logs/hub_log_reader.h"
#include "server/exec_relay.h"
#include "server/logs/log_hub.h"
#include "server/submission.h"
#include "server/leadership.h"
#include "server/shared_files.h"
#include "store/etcd_client.h"
#include "store/sqlite_state_store.h"

namespace trainyard::server {

// The log hub's view of the manager.
class ManagerLogBackend final : public LogBackend {
 public:
  explicit ManagerLogBackend(JobManager* manager) : manager_(manager) {}
  absl::StatusOr<JobLogPlaces> Places(const std::string& job) override { return manager_->LogPlaces(job); }
  bool ReadLog(const std::string& node, v1::LogRead read) override { return manager_->ReadLog(node, std::move(read)); }
  bool AckLog(const std::string& node, v1::LogAck ack) override { return manager_->AckLog(node, std::move(ack)); }
  bool CancelLog(const std::string& node, v1::LogCancel cancel) override {
    return manager_->CancelLog(node, std::move(cancel));
  }
  bool OpenExec(const std::string& node, v1::ExecOpen open) override {
    return manager_->OpenExec(node, std::move(open));
  }
  bool ExecInput(const std::string& node, v1::ExecInput input) override {
    return manager_->ExecInput(node, std::move(input));
  }

 private:
  JobManager* const manager_;
};

// The REST API's view of the manager: the same calls, and the same checks
// of access, as the gRPC API's.
class ManagerRestBackend final : public http::RestBackend {
 public:
  ManagerRestBackend(JobManager* manager, LogHub* logs, security::ServerSecurity* security, UserRateLimiter* limits,
                     const ExecRelay* exec, const ServiceLinks* links,
                     std::function<void(v1::ClusterStatus*)> control_plane)
      : manager_(manager), logs_(logs), security_(security), limits_(limits), exec_(exec), links_(links),
        control_plane_(std::move(control_plane)) {}
  const ViewStore& Views() override { return manager_->Views(); }
  void Submit(const http::Principal& who, const v1::SubmitRequest& req, SubmitDone done) override {
    if (absl::Status st = limits_->Allow(who, UserRateLimiter::kSubmit, absl::Now()); !st.ok()) {
      done(st);
      return;
    }
    SubmitFromRequest(manager_, req, {who, &security_->access()}, std::move(done));
  }
  absl::StatusOr<v1::JobState> Kill(const http::Principal& who, const std::string& job,
                                    const std::string& reason) override {
    if (absl::Status may = MayActOnJob(who, job, "kill"); !may.ok()) return may;
    return manager_->Kill(job, reason);
  }
  absl::StatusOr<v1::JobView> Describe(const std::string& job) override { return manager_->Describe(job); }
  absl::Status MayReadLogs(const http::Principal& who, const std::string& job) override {
    if (absl::Status may = MayActOnJob(who, job, "read the logs of"); !may.ok()) return may;
    return limits_->Allow(who, UserRateLimiter::kLogs, absl::Now());
  }
  absl::StatusOr<http::LogReaderPtr> OpenLogs(const http::Principal& who, const v1::LogsRequest& request) override {
    std::shared_ptr<const v1::JobView> job = manager_->JobSummary(request.job());
    return HubLogReader::Open(logs_, request, LogStreamUser(who, job ? job->user() : ""));
  }
  LogHubStats LogStats() override { return logs_->Stats(); }
  ExecRelayStats ExecStats() override { return exec_->Stats(); }
  absl::StatusOr<v1::ServiceLinkResponse> ServiceLink(const http::Principal& who,
                                                      const v1::ServiceLinkRequest& req) override {
    if (absl::Status st = limits_->Allow(who, UserRateLimiter::kListJobs, absl::Now()); !st.ok()) return st;
    return links_->Link(who, req);
  }
  absl::StatusOr<ServiceTarget> ResolveService(absl::string_view grant) override { return links_->Resolve(grant); }
  absl::StatusOr<v1::HistoryResponse> History(const http::Principal& who, const v1::HistoryRequest& req) override {
    if (absl::Status st = limits_->Allow(who, UserRateLimiter::kListJobs, absl::Now()); !st.ok()) return st;
    return manager_->History(req);
  }
  absl::StatusOr<v1::UsageResponse> Usage(const http::Principal& who, const v1::UsageRequest& req) override {
    if (absl::Status st = limits_->Allow(who, UserRateLimiter::kListJobs, absl::Now()); !st.ok()) return st;
    return manager_->Usage(req);
  }
  absl::StatusOr<v1::JobResourcesResponse> JobResources(const http::Principal& who,
                                                        const v1::JobResourcesRequest& req) override {
    if (absl::Status st = limits_->Allow(who, UserRateLimiter::kListJobs, absl::Now()); !st.ok()) return st;
    return manager_->JobResources(req);
  }
  std::optional<v1::ClusterStatus> ControlPlane() override {
    v1::ClusterStatus status;
    control_plane_(&status);
    return status;
  }

 private:
  absl::Status MayActOnJob(const http::Principal& who, const std::string& name, absl::string_view verb) {
    std::shared_ptr<const v1::JobView> job = manager_->JobSummary(name);
    if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
    return security_->access().MayActOnJob(who, name, {job->user(), job->queue()}, verb);
  }

  JobManager* const manager_;
  LogHub* const logs_;
  security::ServerSecurity* const security_;
  UserRateLimiter* const limits_;
  const ExecRelay* const exec_;
  const ServiceLinks* const links_;
  const std::function<void(v1::ClusterStatus*)> control_plane_;
};

namespace {

LogHubOptions LogHubOptionsFor(const ServerConfig& config) {
  LogHubOptions o;
  o.max_followers = config.max_log_followers;
  o.max_followers_per_user = config.log_streams_per_user;
  o.node_subscriptions = config.log_subscriptions_per_node;
  o.node_subscriptions_per_user = config.log_subscriptions_per_user_per_node;
  o.follower_buffer_bytes = config.log_follower_buffer_bytes;
  o.stall_timeout = absl::Milliseconds(config.log_follower_stall_ms);
  return o;
}

// An error naming the address unless the server holds exactly the port
// `listen` asks for (any port for ":0").
absl::Status CheckBound(const std::string& listen, bool started, int port) {
  int asked = -1;
  if (!absl::SimpleAtoi(listen.substr(listen.rfind(':') + 1), &asked)) asked = -1;
  if (started && port > 0 && (asked == 0 || asked == port)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "listen: cannot bind ", listen,
      ": the port is in use (another trainyard server?) or the host is not an address of this machine"));
}


// The data dir holds the store (job specs with env values) and its journal:
// the server's alone, 0700, files 0600 (older versions left 0644). When the
// checkpoint root lies inside it, tasks of other accounts must pass through
// to it: the data dir is then 0711 (passable, not listable), the root too.
absl::Status SecureDataDir(const ServerConfig& config) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path data = fs::absolute(config.data_dir, ec).lexically_normal();
  fs::path checkpoints = fs::absolute(config.checkpoint_root, ec).lexically_normal();
  bool inside = std::mismatch(data.begin(), data.end(), checkpoints.begin(), checkpoints.end()).first == data.end();
  // Passable, not listable: other accounts reach the login socket and the
  // checkpoint root by name; every file in it is the server's alone (0600).
  const fs::perms passable = fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec;
  fs::permissions(data, passable, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("data dir ", data.string(), ": ", ec.message()));
  if (inside) {
    fs::create_directories(checkpoints, ec);
    fs::permissions(checkpoints, passable, ec);
    if (ec) {
      return absl::PermissionDeniedError(absl::StrCat("checkpoint root ", checkpoints.string(), ": ", ec.message()));
    }
  }
  for (const fs::directory_entry& e : fs::directory_iterator(data, ec)) {
    std::error_code file_ec;
    if (e.is_regular_file(file_ec)) {
      fs::permissions(e.path(), fs::perms::group_all | fs::perms::others_all, fs::perm_options::remove, file_ec);
    }
  }
  return absl::OkStatus();
}

// The credentials of a listener: TLS with the certificates of
// config.tls_dir, else plaintext. At the client door a client certificate
// is requested, and verified against the CA when presented (the CLI
// presents a token instead); at the agent door (`agents`) one is required:
// a connection without a node certificate of the CA ends in its handshake.
// A unix: socket stays plaintext (the kernel's file permissions guard it).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenerCredentials(const ServerConfig& config,
                                                                             bool agents) {
  if (!UsesTls(config)) return grpc::InsecureServerCredentials();
  const std::string& dir = config.tls_dir;
  absl::StatusOr<security::TlsFiles> files =
      security::LoadTlsFiles(security::CaCertPath(dir), security::ServerCertPath(dir), security::ServerKeyPath(dir));
  if (!files.ok()) {
    return absl::Status(files.status().code(), absl::StrCat("tlsDir: ", files.status().message(),
                                                            " (make the directory with `trainyard certs init --dir ",
                                                            dir, "`)"));
  }
  grpc::SslServerCredentialsOptions o(agents ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                             : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = files->ca_pem;
  o.pem_key_cert_pairs.push_back({files->key_pem, files->cert_pem});
  return grpc::SslServerCredentials(o);
}

// What every gRPC listener of the server is built with.
void CommonListenerOptions(const ServerConfig& config, int max_receive_bytes, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(max_receive_bytes);
  // Bandwidth probing pings every busy stream and arms a timer per read; the
  // messages here are small, so it only costs CPU (heartbeats of many agents).
  builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // gRPC binds with SO_REUSEPORT by default: a second server on the same
  // port would start and the kernel would split clients and agents between
  // the two at random. Without it the bind fails and the second one stops.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A connection that does not finish its set-up soon, or holds no call for
  // long, gives its descriptor back (the caps count it until then).
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, config.handshake_timeout_ms);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, config.connection_idle_ms);
  // Agents given a list of servers ping every 2 s to find a silent leader
  // (server_link.cc); more often than once a second is refused.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
}

int PortOf(const std::string& address) {
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) port = 0;
  return port;
}

}  // namespace

bool UsesTls(const ServerConfig& config) {
  return !config.tls_dir.empty() && !absl::StartsWith(config.listen, "unix:");
}

absl::StatusOr<core::SchedulerOptions> SchedulerOptionsFor(ServerConfig& config) {
  core::SchedulerOptions opt;
  opt.queue_policy = config.queue_policy;
  opt.placement = config.placement;
  opt.limits = config.limits;
  opt.preemption_grace = absl::Milliseconds(config.preemption_grace_ms);
  opt.preemption_min_runtime = absl::Milliseconds(config.preemption_min_runtime_ms);
  opt.reservation_wait = absl::Milliseconds(config.reservation_wait_ms);
  opt.port_quarantine = absl::Milliseconds(config.port_quarantine_ms);
  if (!config.queue_config.empty()) {
    absl::StatusOr<api::QueueConfigFile> file = api::LoadQueueConfigFile(config.queue_config);
    if (!file.ok()) return file.status();
    opt.queues = file->queues;
    if (!file->policy.empty()) opt.queue_policy = file->policy;
    if (config.default_queue.empty()) config.default_queue = file->default_queue;
  }
  // A default queue someone chose must exist; the implicit "default" need
  // not (a job that names no queue is then refused, naming the queues).
  bool chosen = !config.default_queue.empty();
  if (!chosen) config.default_queue = "default";
  if (chosen && !api::IsLeafQueue(opt.queues, config.default_queue)) {
    return absl::InvalidArgumentError(absl::StrCat("defaultQueue: '", config.default_queue,
                                                   "' is not a leaf queue of the queue config"));
  }
  return opt;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerConfig config) {
  // The nodes' limit is taken to be this machine's: one kernel setting
  // (the stack rlimit / 4) that clusters keep alike.
  if (config.exec_arg_max == 0) config.exec_arg_max = sysconf(_SC_ARG_MAX);
  if (absl::Status st = ValidateServerConfig(config); !st.ok()) return st;
  if (config.checkpoint_root.empty()) config.checkpoint_root = config.data_dir + "/checkpoints";
  // Several servers share an etcd store: a leader launches only what its
  // store holds, so the next leader knows every task an agent runs.
  config.launch_after_durable = !config.store.empty();
  std::unique_ptr<Server> s(new Server());
  if (absl::Status st = s->OpenStore(config); !st.ok()) return st;
  if (absl::Status st = SecureDataDir(config); !st.ok()) return st;
  if (absl::Status st = s->AdoptSharedFiles(config); !st.ok()) return st;
  absl::StatusOr<core::SchedulerOptions> opt = SchedulerOptionsFor(config);
  if (!opt.ok()) return opt.status();
  absl::StatusOr<std::unique_ptr<core::Scheduler>> sched = core::Scheduler::Create(*opt);
  if (!sched.ok()) return sched.status();
  s->streams_ = std::make_unique<AgentStreams>();
  s->manager_ = std::make_unique<JobManager>(config, s->store_.get(), std::move(*sched), s->streams_.get(), &s->clock_);
  s->FenceOrders();
  if (absl::Status st = s->StartSecurity(config); !st.ok()) return st;
  if (absl::Status st = s->manager_->Recover(); !st.ok()) return st;
  s->BuildServices(config);
  if (absl::Status st = s->StartClientListener(config); !st.ok()) return st;
  s->StartManager(config);
  if (absl::Status st = s->StartHttp(config); !st.ok()) return st;
  s->PublishHttpUrl();
  if (absl::Status st = s->StartLoginSocket(config); !st.ok()) return st;
  if (absl::Status st = s->Announce(config); !st.ok()) return st;
  return s;
}

void Server::BuildServices(const ServerConfig& config) {
  log_backend_ = std::make_unique<ManagerLogBackend>(manager_.get());
  log_hub_ = std::make_unique<LogHub>(log_backend_.get(), &clock_, LogHubOptionsFor(config));
  manager_->SetLogHub(log_hub_.get());
  rate_limiter_ = std::make_unique<UserRateLimiter>(config.rate_limits);
  exec_relay_ = std::make_unique<ExecRelay>(log_backend_.get(), ExecRelayOptions{});
  JobManager* manager = manager_.get();
  service_links_ = std::make_unique<ServiceLinks>(
      security_.get(), [manager](const std::string& job) { return manager->JobSummary(job); }, &clock_);
  client_service_ = std::make_unique<ClientService>(manager_.get(), log_hub_.get(), security_.get(),
                                                    rate_limiter_.get(), exec_relay_.get(), service_links_.get());
  client_service_->SetClusterStatusSource([this](v1::ClusterStatus* out) { FillClusterStatus(out); });
  // With TLS, an agent's node is the one its certificate names.
  agent_service_ = std::make_unique<AgentService>(manager_.get(), streams_.get(), log_hub_.get(), UsesTls(config),
                                                  exec_relay_.get());
}

absl::Status Server::StartClientListener(const ServerConfig& config) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ListenerCredentials(config, /*agents=*/false);
  if (!creds.ok()) return creds.status();
  int open_file_limit = RaiseOpenFileLimit(config.max_open_files);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, *creds, &port);
  builder.RegisterService(client_service_.get());
  if (UsesTls(config)) {
    join_service_ = std::make_unique<JoinService>(config.tls_dir, config.data_dir, security_.get());
    if (SharedFiles* shared = shared_files_.get()) {
      join_service_->SetOnChange([shared] { return shared->Publish(SharedFiles::kJoinTokens); });
    }
    builder.RegisterService(join_service_.get());
  }
  // A spec above max_spec_bytes is refused by ClientService with its size;
  // one far above (64 MiB) by gRPC, before it is held whole.
  CommonListenerOptions(config,
                        static_cast<int>(std::min<int64_t>(config.max_spec_bytes + kReceiveHeadroomBytes,
                                                           std::numeric_limits<int>::max())),
                        &builder);
  grpc_ = builder.BuildAndStart();
  if (absl::Status st = CheckBound(config.listen, grpc_ != nullptr, port); !st.ok()) return st;
  if (absl::Status st = StartAgentListener(config, port); !st.ok()) return st;
  InstallConnectionGuards(config, port, open_file_limit);
  std::string host = config.listen.substr(0, config.listen.rfind(':'));
  address_ = absl::StrCat(host, ":", port);
  absl::MutexLock lock(&status_mu_);
  status_address_ = address_;
  return absl::OkStatus();
}

void Server::StartManager(const ServerConfig& config) {
  // Job masters and tasks are told every server, to follow the leader.
  manager_->SetServerAddress(config.cluster_servers.empty() ? address_ : config.cluster_servers);
  manager_->SetOverloadProbe([] {
    int64_t saturated = 0;
    for (Door door : {Door::kClients, Door::kAgents}) {
      ConnectionGuardStats st = ConnectionGuard::Stats(door);
      saturated += st.refused_total_cap + st.refused_peer_cap + st.refused_no_fd + st.evicted_unauthenticated;
    }
    return saturated;
  });
  manager_->Start();
}

absl::Status Server::Announce(const ServerConfig& config) {
  Log(LogLevel::kInfo, "server", "serving clients on %s and agents on %s%s, data in %s", address_, agent_address_,
      UsesTls(config) ? absl::StrCat(" (TLS, certificates in ", config.tls_dir, "; agents need a node certificate)")
                      : " (plaintext)",
      config.data_dir);
  std::string ca_file;
  if (UsesTls(config)) ca_file = std::filesystem::absolute(security::CaCertPath(config.tls_dir)).string();
  absl::StatusOr<std::string> admin = security_->BootstrapAdmin(address_, ca_file);
  if (!admin.ok()) return admin.status();
  if (!admin->empty()) {
    Log(LogLevel::kInfo, "server", "first start: an admin token is in %s (TRAINYARD_CONFIG=%s trainyard jobs)", *admin,
        *admin);
  }
  return absl::OkStatus();
}

absl::Status Server::StartAgentListener(const ServerConfig& config, int client_port) {
  std::string listen = config.agent_listen;
  bool derived = listen.empty();
  if (derived) {
    absl::StatusOr<std::string> d = api::DerivedAgentAddress(config.listen);
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("agentListen: ", d.status().message()));
    listen = *d;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ListenerCredentials(config, /*agents=*/true);
  if (!creds.ok()) return creds.status();
  auto build = [&](const std::string& address, int* port) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, *creds, port);
    builder.RegisterService(agent_service_.get());
    // Log pieces of up to 1 MiB and heartbeats: the headroom is enough.
    CommonListenerOptions(config, static_cast<int>(kReceiveHeadroomBytes), &builder);
    return builder.BuildAndStart();
  };
  int port = 0;
  bool unix_socket = absl::StartsWith(listen, "unix:");
  std::string host = listen.substr(0, listen.rfind(':'));
  // Any port for the clients: the one above theirs where it is free, so an
  // agent given only --server finds it most of the time; else any.
  if (derived && !unix_socket && PortOf(config.listen) == 0) {
    agent_grpc_ = build(absl::StrCat(host, ":", client_port + 1), &port);
  }
  if (agent_grpc_ == nullptr) agent_grpc_ = build(listen, &port);
  if (unix_socket) {
    if (agent_grpc_ == nullptr) return absl::UnavailableError(absl::StrCat("agentListen: cannot bind ", listen));
    agent_address_ = listen;
    return absl::OkStatus();
  }
  if (agent_grpc_ == nullptr || (PortOf(listen) != 0 && port != PortOf(listen))) {
    return absl::UnavailableError(absl::StrCat(
        "agentListen: cannot bind ", listen, derived ? " (the port above --listen's)" : "",
        ": the port is in use or the host is not an address of this machine; name a free one with --agent-listen"));
  }
  agent_address_ = absl::StrCat(host, ":", port);
  return absl::OkStatus();
}

void Server::InstallConnectionGuards(const ServerConfig& config, int port, int limit) {
  ConnectionGuardOptions caps = ConnectionCapsFor(limit, config.max_connections, config.max_connections_per_peer);
  // The agents' share comes out of what the limit allows for connections.
  int room = caps.max_connections;
  ConnectionGuardOptions agents;
  agents.door = Door::kAgents;
  agents.max_connections = config.max_agent_connections > 0 ? config.max_agent_connections : std::max(64, room / 8);
  agents.max_connections_per_peer =
      config.max_agent_connections_per_peer > 0 ? config.max_agent_connections_per_peer : agents.max_connections;
  if (config.max_connections == 0) caps.max_connections = std::max(1, room - agents.max_connections);
  caps.max_connections_per_peer = std::min(caps.max_connections_per_peer, caps.max_connections);
  caps.unauthenticated_grace_ms = agents.unauthenticated_grace_ms = config.unauthenticated_grace_ms;
  // A Unix socket's accepts are told apart by their family (LocalPort -1):
  // with both doors on Unix sockets, only the clients' is guarded.
  caps.port = absl::StartsWith(config.listen, "unix:") ? -1 : port;
  agents.port = absl::StartsWith(agent_address_, "unix:") ? -1 : PortOf(agent_address_);
  ConnectionGuard::Install(caps);
  if (agents.port != caps.port) ConnectionGuard::Install(agents);
  Log(LogLevel::kInfo, "server",
      "connections: clients at most %d, %d per peer address; agents at most %d, %d per peer address; "
      "unauthenticated ones first to go after %d ms (open-file limit %d)",
      caps.max_connections, caps.max_connections_per_peer, agents.max_connections, agents.max_connections_per_peer,
      config.unauthenticated_grace_ms, limit);
}

absl::Status Server::StartSecurity(const ServerConfig& config) {
  security::ServerSecurity::Options o;
  o.data_dir = config.data_dir;
  o.enabled = config.authentication;
  o.default_queue = config.default_queue;
  if (!config.queue_config.empty()) {
    absl::StatusOr<api::QueueConfigFile> file = api::LoadQueueConfigFile(config.queue_config);
    if (!file.ok()) return file.status();
    o.acls = std::move(file->acls);
  }
  absl::StatusOr<std::unique_ptr<security::ServerSecurity>> sec = security::ServerSecurity::Open(std::move(o));
  if (!sec.ok()) return sec.status();
  security_ = std::move(*sec);
  if (SharedFiles* shared = shared_files_.get()) {
    // The first leader's files become the cluster's; a token issued (or a
    // line an admin edits) on this leader, every server's.
    if (absl::Status st = shared->PublishAll(); !st.ok()) return st;
    security_->tokens().SetOnChange([shared] { return shared->Publish(SharedFiles::kTokens); });
  }
  if (!config.authentication) {
    Log(LogLevel::kWarning, "server", "--no-auth: client calls are not authenticated; every caller is an admin");
  }
  // The job master task gets its job's credential with its launch order.
  security::ServerSecurity* sec_ptr = security_.get();
  // Its credential also keys the MACs of the checkpoint orders pushed to it.
  streams_->SetOrderKeys([sec_ptr](uint64_t job_id) { return sec_ptr->JobCredentialOf(job_id); });
  manager_->SetJobCredentials([sec_ptr](uint64_t job_id) { return sec_ptr->JobCredentialOf(job_id); },
                              [sec_ptr](uint64_t job_id) { return sec_ptr->JobWorkerSecretOf(job_id); },
                              [sec_ptr](uint64_t job_id) { return sec_ptr->JobUserTokenOf(job_id); });
  // A job's user credential holds while the job lives.
  JobManager* manager = manager_.get();
  security_->SetLiveJobUser([manager](uint64_t job_id) { return manager->LiveJobUser(job_id); });
  manager_->SetSecretValues([sec_ptr](const std::string& plain) { return sec_ptr->SealValue(plain); },
                            [sec_ptr](const std::string& sealed) { return sec_ptr->OpenValue(sealed); });
  // A schedule's run is admitted as its owner (not as whoever made the
  // schedule): the queue's ACLs as they are at the run.
  if (config.authentication) {
    manager_->SetRunAdmission([sec_ptr](v1::JobSpec* spec) {
      security::Principal owner{.user = spec->user(), .admin = false, .anonymous = false};
      return sec_ptr->access().AdmitSubmission(owner, spec);
    });
  }
  return absl::OkStatus();
}

absl::Status Server::StartLoginSocket(const ServerConfig& config) {
  if (!config.authentication || config.login_socket == "off") return absl::OkStatus();
  std::string path = config.login_socket.empty() ? config.data_dir + "/login.sock" : config.login_socket;
  // With TLS the answer carries the CA's certificate: the certificate dir
  // is the server's alone, and a user's CLI must verify the server.
  std::string ca_pem;
  if (UsesTls(config)) {
    absl::StatusOr<std::string> ca = security::ReadWholeFile(security::CaCertPath(config.tls_dir));
    if (!ca.ok() || ca->empty()) {
      return absl::FailedPreconditionError("loginSocket: the CA certificate of tlsDir cannot be read");
    }
    ca_pem = *std::move(ca);
  }
  security::ServerSecurity* sec = security_.get();
  // With several servers, the user's CLI is given every one of them and
  // follows the leader (docs/deploy.md).
  const std::string& servers = config.cluster_servers.empty() ? address_ : config.cluster_servers;
  absl::StatusOr<std::unique_ptr<LoginSocket>> login =
      LoginSocket::Start(path, servers, std::move(ca_pem),
                         [sec](const std::string& user, bool admin) { return sec->LoginTokenOf(user, admin); });
  if (!login.ok()) return login.status();
  login_ = std::move(*login);
  Log(LogLevel::kInfo, "server", "local users get a token with: trainyard login --socket %s", path);
  return absl::OkStatus();
}

static bool HttpsFor(const ServerConfig& config) {
  if (config.http_tls == "on") return true;
  if (config.http_tls == "off" || !UsesTls(config)) return false;
  // auto: HTTPS beyond this host; a loopback listener stays HTTP (a local
  // cluster's dashboard opens in a browser with no certificate warning).
  return !security::IsLocalAddress(config.http_listen);
}

httpd::HttpOptions HttpDoorOptions(const ServerConfig& config) {
  httpd::HttpOptions opt;
  opt.listen = config.http_listen;
  opt.threads = config.http_threads;
  rlimit files{};
  int open_file_limit = getrlimit(RLIMIT_NOFILE, &files) == 0 ? static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 30)) : 1024;
  http::HttpConnectionCaps caps =
      http::HttpConnectionCapsFor(open_file_limit, config.http_max_connections, config.http_max_connections_per_peer);
  opt.max_connections = caps.max_connections;
  opt.max_connections_per_peer = caps.max_connections_per_peer;
  opt.trusted_reserve = config.http_trusted_reserve;
  opt.header_timeout = absl::Milliseconds(config.http_header_timeout_ms);
  opt.body_timeout = absl::Milliseconds(config.http_body_timeout_ms);
  opt.keep_alive = absl::Milliseconds(config.http_keep_alive_ms);
  opt.request_timeout = absl::Milliseconds(config.http_request_timeout_ms);
  opt.max_log_streams = config.http_max_log_streams;
  opt.max_watchers = config.http_max_watchers;
  if (HttpsFor(config)) {
    opt.tls_cert_file = security::ServerCertPath(config.tls_dir);
    opt.tls_key_file = security::ServerKeyPath(config.tls_dir);
  }
  return opt;
}

absl::Status Server::StartHttp(const ServerConfig& config) {
  if (config.http_listen.empty()) return absl::OkStatus();
  // A standby's door held the address until now.
  standby_door_.reset();
  http::HttpOptions opt;
  static_cast<httpd::HttpOptions&>(opt) = HttpDoorOptions(config);
  opt.proxied_prefix = http::kServiceProxyPrefix;
  // A spec's text as a JSON string may take twice its bytes (escapes).
  opt.max_body_bytes = 2 * config.max_spec_bytes + (64 << 10);
  security::ServerSecurity* sec = security_.get();
  opt.authenticate = [sec](absl::string_view authorization) { return sec->Authenticate(authorization); };
  bool https = !opt.tls_cert_file.empty();
  absl::StatusOr<std::unique_ptr<http::HttpServer>> bound = http::HttpServer::Bind(opt);
  if (!bound.ok()) return bound.status();
  http_ = std::move(*bound);
  rest_backend_ =
      std::make_unique<ManagerRestBackend>(manager_.get(), log_hub_.get(), security_.get(), rate_limiter_.get(),
                                           exec_relay_.get(), service_links_.get(),
                                           [this](v1::ClusterStatus* out) { FillClusterStatus(out); });
  http::AddRestRoutes(*http_, rest_backend_.get());
  service_proxy_ = http::ServiceProxy::Add(*http_, rest_backend_.get(), {.scheme = https ? "https" : "http"});
  http::AddDashboardRoutes(*http_, rest_backend_.get());
  if (config.history_interval_ms > 0) {
    history_ = std::make_unique<http::History>(absl::Milliseconds(config.history_interval_ms),
                                               absl::Minutes(config.history_retention_minutes));
    history_sampler_ = std::make_unique<http::HistorySampler>(history_.get(), &manager_->Views());
  }
  http::AddHistoryRoute(*http_, history_.get());
  http::AddMetricsRoute(*http_, rest_backend_.get(), &client_service_->counters(), &client_service_->masters(),
                        rate_limiter_.get());
  http_->Serve();
  http_address_ = http_->address();
  http_scheme_ = https ? "https" : "http";
  {
    // The links' listener: a wildcard host is "" (the host the caller
    // reached the server at).
    size_t colon = http_address_.rfind(':');
    std::string host = http_address_.substr(0, colon);
    if (absl::StartsWith(host, "[")) host = host.substr(1, host.size() - 2);
    if (host == "0.0.0.0" || host == "::") host.clear();
    int http_port = 0;
    // The bound address always ends in its port; 0 (not parsed) leaves the
    // proxied services' links without one rather than failing the server.
    (void)absl::SimpleAtoi(http_address_.substr(colon + 1), &http_port);
    service_links_->SetListener(http_scheme_, host, http_port);
  }
  Log(LogLevel::kInfo, "server", "HTTP API and /metrics on %s://%s/ (at most %d connections, %d per peer address)",
      http_scheme_, http_address_, opt.max_connections, opt.max_connections_per_peer);
  return absl::OkStatus();
}

Server::~Server() {
  Shutdown();
  // The hub goes before the manager (its thread calls into it); the manager
  // must not tell it of changes after.
  if (manager_) manager_->SetLogHub(nullptr);
}

void Server::Wait() {
  if (grpc_) grpc_->Wait();
}

void Server::Shutdown() {
  // HTTP first: its handlers call into the manager. Requests waiting for
  // services end at once (a service that does not answer holds nobody up).
  if (service_proxy_) service_proxy_->Stop();
  if (http_) http_->Stop();
  history_sampler_.reset();
  login_.reset();
  if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (agent_grpc_) agent_grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (manager_) manager_->Stop();
}

}  // namespace trainyard::server
