// The server's configuration: defaults, a YAML file (`--config`) and flags on
// top. Unknown keys in the file are errors naming the key.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "api/spec_bounds.h"
#include "core/resources/limits.h"

namespace trainyard::server {

// Per-user token buckets on the expensive client calls (config block
// `rateLimits`): calls a second each user may make (0 = no limit), with a
// burst of burstSeconds' worth (at least one call). Admins are limited only
// in createToken.
// Over one, the call is answered RESOURCE_EXHAUSTED naming the key.
struct UserRateLimits {
  double submit = 20;       // rateLimits.submit: Submit (gRPC and REST)
  double list_jobs = 20;    // rateLimits.listJobs: ListJobs (every job's summary)
  double logs = 20;         // rateLimits.logs: a log read or follow begun (gRPC and REST)
  double create_token = 2;  // rateLimits.createToken: CreateToken
  double burst_seconds = 10;
};

struct ServerConfig {
  std::string listen = "127.0.0.1:7450";  // gRPC for clients and job masters
  // gRPC for agents only (their streams): a door of its own, with caps of its
  // own, so a client flood never takes an agent's place. "" = the port above
  // `listen`'s on its host (api::DerivedAgentAddress; any free port when
  // `listen`'s is 0). With tlsDir, a node certificate is required there.
  std::string agent_listen;
  // Every server's client address ("10.0.0.11:7450,10.0.0.12:7450": IP
  // addresses, common/server_list.h), as job masters and tasks
  // (TRAINYARD_SERVER) are told to reach the cluster, so that they follow
  // the leader of servers on one etcd store through a failover. "" = this
  // server's own address.
  std::string cluster_servers;
  // HTTP (REST API, /metrics): host:port, port 0 = any free one; "" = none.
  // Open to whoever reaches it until security lands (docs/api.md).
  std::string http_listen;
  // HTTPS on http_listen with tlsDir's server certificate: "auto" (when
  // tlsDir is set and the listener is not loopback), "on", "off".
  std::string http_tls = "auto";
  // Connections to the gRPC listener (src/server/connection_guard.h): the
  // open-file limit to raise to (0: the hard limit) and caps below it
  // (0: what the limit allows, keeping headroom; per peer half of that).
  int max_open_files = 0;
  int max_connections = 0;
  int max_connections_per_peer = 0;
  // The agent listener's caps (0: an eighth of what the limit allows for
  // connections, at least 64, taken from maxConnections' default; per peer
  // the same, as many agents may share one address behind a NAT).
  int max_agent_connections = 0;
  int max_agent_connections_per_peer = 0;
  // A connection that has made no authenticated call (a valid token; on the
  // agent listener, a registered node) this long after its accept is the
  // first shut down when a cap is reached and a newcomer waits (0: never).
  int unauthenticated_grace_ms = 5000;
  UserRateLimits rate_limits;
  int handshake_timeout_ms = 10000;       // a connection's TLS and HTTP/2 set-up
  int connection_idle_ms = 600000;        // a connection without a call is closed after this
  // Per user (the job's owner): jobs waiting to start (QUEUED), and
  // submissions a second (a token bucket; 0 = no limit). Over either, a
  // submission is refused (RESOURCE_EXHAUSTED, naming the key).
  int max_pending_jobs_per_user = 10000;
  // The login socket (server/login_socket.h): "" = DATA_DIR/login.sock,
  // "off" = none. Served only with authentication on.
  std::string login_socket;
  int max_submissions_per_second_per_user = 0;
  int http_threads = 4;                   // HTTP requests served at once
  int http_request_timeout_ms = 10000;    // for each write of an answer to make progress
  // The HTTP door (httpd/http_server.h, docs/api.md "Limits"): open
  // connections in all and per peer address (0: derived from the open-file
  // limit, server/http/http_server.h HttpConnectionCapsFor); connections
  // kept for requests with a valid token (0: a quarter); the time for a
  // request's head and for its body to come whole; an idle connection's.
  int http_max_connections = 0;
  int http_max_connections_per_peer = 0;
  int http_trusted_reserve = 0;
  int http_header_timeout_ms = 10000;
  int http_body_timeout_ms = 30000;
  int http_keep_alive_ms = 5000;
  // Streamed answers open at once, each with a thread of its own beside the
  // http_threads: followed task logs and log archives, and watchers.
  int http_max_log_streams = 8;
  int http_max_watchers = 32;
  // The dashboard's charts (server/http/history.h): a sample of the cluster
  // every history_interval_ms (0 = none), kept this many minutes.
  int history_interval_ms = 10000;
  int history_retention_minutes = 180;
  // Task resources (`trainyard top`, the job page's charts): agents sample
  // their running tasks every task_sample_interval_ms (0 = never); the
  // server keeps each task's last 15 minutes, for at most this many tasks.
  int task_sample_interval_ms = 10000;
  int task_sample_max_tasks = 20000;
  // Scheduled jobs (`trainyard schedule`): a cron that comes due more often
  // than this is refused (each run is a job).
  int schedule_min_interval_seconds = 60;
  // Accounting (`trainyard history`, `trainyard usage`): finished jobs'
  // accounts are kept this many days after they end, at most this many
  // (the oldest ends leave first). The store keeps every job's record.
  int accounting_retention_days = 365;
  int accounting_max_jobs = 200000;
  // A finished job leaves the live views (describe, jobs -a) this many
  // minutes after it ended, as `trainyard delete` takes it (its name free,
  // its record and account kept); 0 = never.
  int finished_job_retention_minutes = 7 * 24 * 60;
  std::string data_dir = ".trainyard/server";
  // A certificate directory (security/certs.h): the TCP listener serves TLS
  // with DIR/server.crt, verifies client certificates against DIR/ca.crt,
  // and agents must present one that names their node. "" = plaintext (no
  // node identity: docs/security.md). A unix: listener stays plaintext.
  std::string tls_dir;
  // Client calls must carry a token (docs/security.md); false: every caller
  // is an anonymous admin (a benchmark's comparison, never a real cluster).
  bool authentication = true;
  std::string queue_config;               // YAML path; "" = one queue "default"
  std::string queue_policy = "fifo";      // fifo | capacity | fair
  // The queue of a job whose spec names none; "" = the queue config's
  // defaultQueue, else "default". Must be a leaf queue.
  std::string default_queue;
  std::string placement = "fragmentation";  // fragmentation | topology | spread
  core::AllocationLimits limits;
  int heartbeat_interval_ms = 1000;       // what agents are told
  // How long an agent with nothing new to say may go between beats
  // (Registered.quiet_heartbeat_interval_ms; QuietHeartbeatIntervalMs
  // bounds it by the node timeout). 0 = every beat is sent.
  int quiet_heartbeat_interval_ms = 2500;
  int node_timeout_ms = 10000;            // missed heartbeats before LOST
  int kill_grace_ms = 5000;               // SIGTERM .. SIGKILL
  // A launch goes to its agent only once the placement it carries is in the
  // store (set with an etcd store: a standby that takes over knows every
  // task an agent runs, so no launch of a leader that died is left behind
  // unknown to the next). Not a config key: the server sets it.
  bool launch_after_durable = false;
  int preemption_grace_ms = 30000;        // time victims get to checkpoint
  // A job whose current run is younger than this is not preempted (against
  // thrashing: a job started and thrown out again before it saved). 0 = off.
  int preemption_min_runtime_ms = 0;
  // An elastic job grows into room that appeared only once it has run at
  // its current size this long: each resize costs a checkpoint and a
  // restart of the whole gang (docs/elastic.md).
  int elastic_grow_after_ms = 30000;
  int reservation_wait_ms = 60000;        // head-of-line wait before reserving
  // Ports a node serves when its agent has no --port-range: "" = 1024-65535
  // minus the node's ephemeral range (core::DefaultServingPorts).
  std::string default_port_range;
  // A port a task left is not given by count again for this long.
  int port_quarantine_ms = 60000;
  // A node whose agent refused this many launches in a row for a reason of
  // the node (cannot write task files) is taken out of placement (DEGRADED)
  // until its agent registers again or an admin uncordons it; one whose data
  // dir has less free disk than this, until it has more again.
  int node_launch_faults_to_degrade = 2;
  int64_t min_node_free_disk_mb = 100;
  // Where the state lives: "" = SQLite under data_dir; "etcd://host:port,..."
  // (or etcds:// for TLS) = etcd (docs/deploy.md), shared by every server of
  // the cluster, one of which leads at a time.
  std::string store;
  std::string etcd_prefix = "/trainyard/";  // every key under it
  std::string etcd_ca_file;                 // TLS to etcd: its CA (PEM)
  std::string etcd_cert_file;               // a client certificate, when etcd asks for one
  std::string etcd_key_file;
  int etcd_max_txn_ops = 128;               // etcd's --max-txn-ops
  int64_t etcd_max_request_bytes = 1536 * 1024;  // etcd's --max-request-bytes
  // The leader's lease: a standby takes over this long after the leader
  // stopped renewing it (died, hung, cut off).
  int leader_lease_ms = 2000;
  bool store_sync = true;                 // fsync each group commit
  bool store_group_commit = true;         // false: one transaction per write (a benchmark's baseline)
  // The job master a job whose tasks talk to one gets as its first task
  // (api::UsesJobMaster). Sized by what it uses: one epoll thread and about
  // 1 KB per worker (10 MB for 10,000 workers), so 0.05 cores and 64 MiB;
  // its reservation counts against the job's queue like any task's.
  bool jobmaster_enabled = true;
  int64_t jobmaster_vcores_milli = 50;    // jobmaster.cpuMilli
  int64_t jobmaster_memory_mb = 64;       // jobmaster.memoryMb
  std::string checkpoint_root;            // "" = DATA_DIR/checkpoints; shared by the nodes
  std::string trainyard_binary;           // path agents run for the master; "" = this binary
  // `logs` streams: at most this many at once (one more is refused with
  // RESOURCE_EXHAUSTED); what each holds that its reader has not taken (the
  // rest waits in the log files on the nodes); and how long a reader may
  // take nothing while data waits before its stream is cut off.
  int max_log_followers = 1000;
  // The largest job spec a submission may carry (YAML text or its proto);
  // a larger one is refused before it is parsed. The gRPC receive limit is
  // this plus kReceiveHeadroomBytes, so a far larger message is refused by
  // gRPC before it is read whole.
  int64_t max_spec_bytes = 1 << 20;
  // What one job may cost beyond its resources (api::SpecBounds): tasks and
  // roles in one job, env and command bytes per role, and those bytes over
  // all its tasks; a spec over any is refused naming the field and the key.
  api::SpecBounds spec_bounds;
  // What a role that asks for no cpu (or memory) gets, as a Kubernetes
  // LimitRange's default: its tasks are then limited on their node and
  // counted against it and their queue.
  int64_t default_vcores_milli = 1000;    // defaultCpu: 1
  int64_t default_memory_mb = 1024;       // defaultMemory: 1Gi
  // ARG_MAX of the nodes, for the submit-time check that a role's command
  // and environment can be exec'd (api::CheckExecSize). 0 = this machine's
  // sysconf(_SC_ARG_MAX), read when the server starts.
  int64_t exec_arg_max = 0;
  int64_t log_follower_buffer_bytes = 1 << 20;
  int log_follower_stall_ms = 60000;
  // logStreams: one user's share of the log streams (server/logs/log_hub.h):
  // at most per_user of maxLogFollowers streams at once; on each node at
  // most per_node subscriptions (a task's stdout and stderr are two; keep it
  // below the agent's 1024), of them at most per_user_per_node for one
  // user. 0 (per_user, per_user_per_node): no per-user limit.
  int log_streams_per_user = 64;            // logStreams.perUser
  int log_subscriptions_per_node = 1000;    // logStreams.perNode
  int log_subscriptions_per_user_per_node = 128;  // logStreams.perUserPerNode
};

// What the gRPC receive limit leaves above max_spec_bytes: the rest of a
// submission, and agents' messages (log chunks of up to 1 MiB, heartbeats).
inline constexpr int64_t kReceiveHeadroomBytes = 8 << 20;

// Reads `path` (YAML) over the defaults. Keys: listen, agentListen, httpListen,
// httpTls, loginSocket, maxPendingJobsPerUser, maxSubmissionsPerSecondPerUser,
// maxOpenFiles, maxConnections, maxConnectionsPerPeer, maxAgentConnections,
// maxAgentConnectionsPerPeer, unauthenticatedGraceMs, handshakeTimeoutMs,
// connectionIdleMs, httpThreads, httpMaxConnections, httpRequestTimeoutMs, httpMaxLogStreams,
// httpMaxWatchers, dataDir, tlsDir, queueConfig,
// queuePolicy, defaultQueue, heartbeatIntervalMs, quietHeartbeatIntervalMs, nodeLaunchFaultsToDegrade,
// minNodeFreeDiskMb, nodeTimeoutMs, killGraceMs, preemptionGraceMs,
// preemptionMinRuntimeMs, reservationWaitMs, defaultPortRange, portQuarantineMs, storeSync, store,
// etcdPrefix, etcdCaFile, etcdCertFile, etcdKeyFile, etcdMaxTxnOps,
// etcdMaxRequestBytes, leaderLeaseMs,
// maxLogFollowers, logFollowerBufferBytes, logFollowerStallMs,
// maxSpecBytes, maxTasksPerJob, maxRolesPerJob, maxEnvBytesPerRole,
// maxCommandBytesPerRole, maxLaunchBytesPerJob, defaultCpu (a quantity as in a spec: 1, 500m),
// defaultMemory (1024, 1Gi),
// limits: {minMemoryMb, maxMemoryMb, minVcoresMilli, maxVcoresMilli, minGpus,
// maxGpus, maxPorts}, jobmaster: {enabled, cpuMilli, memoryMb},
// rateLimits: {submit, listJobs, logs, createToken, burstSeconds}.
// logStreams: {perUser, perNode, perUserPerNode}.
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path, ServerConfig base = {});

// Checks values: positive intervals, limits min <= max, known policy.
absl::Status ValidateServerConfig(const ServerConfig& config);

// The quiet heartbeat interval agents are told: the configured one, at most
// a quarter of the node timeout (the timeout spans four quiet intervals:
// one late or lost beat never loses a node); 0 (every beat is sent) when that is not above
// the heartbeat interval.
int QuietHeartbeatIntervalMs(const ServerConfig& config);

}  // namespace trainyard::server
