// Server configuration loading.
#include "server/config.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/job_spec.h"
#include "common/server_list.h"
#include "core/policy/placement_policy.h"
#include "core/policy/queue_policy.h"
#include "core/resources/port_ranges.h"
#include "yaml-cpp/yaml.h"

namespace trainyard::server {
namespace {

// The most samples the history ring keeps (about 100 bytes and 60 per
// queue each, so a few tens of MB at most).
constexpr int64_t kMaxHistorySamples = 100000;

template <typename T>
bool Read(const YAML::Node& node, const std::string& path, T* out, std::vector<std::string>* errors) {
  try {
    *out = node.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    errors->push_back(absl::StrCat(path, ": has the wrong type"));
    return false;
  }
}

// A key of the file; a list or mapping as a key is an error, not an
// exception out of the loader.
bool Key(const YAML::Node& node, const std::string& prefix, std::string* key, std::vector<std::string>* errors) {
  if (!node.IsScalar()) {
    errors->push_back(absl::StrCat(prefix.empty() ? "" : prefix + ": ", "line ", node.Mark().line + 1,
                                   ": a key must be a string"));
    return false;
  }
  *key = node.Scalar();
  return true;
}

// A quantity in a spec's form (defaultCpu: 500m, defaultMemory: 1Gi).
void ReadQuantity(const YAML::Node& node, const std::string& path,
                  absl::StatusOr<int64_t> (*parse)(std::string_view), int64_t* out,
                  std::vector<std::string>* errors) {
  absl::StatusOr<int64_t> v = parse(node.IsScalar() ? node.Scalar() : "");
  if (v.ok()) {
    *out = *v;
  } else {
    errors->push_back(absl::StrCat(path, ": ", v.status().message()));
  }
}

void ReadLimits(const YAML::Node& node, core::AllocationLimits* l, std::vector<std::string>* errors) {
  for (const auto& kv : node) {
    std::string key;
    if (!Key(kv.first, "limits", &key, errors)) continue;
    std::string path = "limits." + key;
    if (key == "minMemoryMb") Read(kv.second, path, &l->min_memory_mb, errors);
    else if (key == "maxMemoryMb") Read(kv.second, path, &l->max_memory_mb, errors);
    else if (key == "minVcoresMilli") Read(kv.second, path, &l->min_vcores_milli, errors);
    else if (key == "maxVcoresMilli") Read(kv.second, path, &l->max_vcores_milli, errors);
    else if (key == "minGpus") Read(kv.second, path, &l->min_gpus, errors);
    else if (key == "maxGpus") Read(kv.second, path, &l->max_gpus, errors);
    else if (key == "maxPorts") Read(kv.second, path, &l->max_ports, errors);
    else errors->push_back(absl::StrCat(path, ": unknown key"));
  }
}

void ReadJobmaster(const YAML::Node& node, ServerConfig* c, std::vector<std::string>* errors) {
  for (const auto& kv : node) {
    std::string key;
    if (!Key(kv.first, "jobmaster", &key, errors)) continue;
    std::string path = "jobmaster." + key;
    if (key == "enabled") Read(kv.second, path, &c->jobmaster_enabled, errors);
    else if (key == "cpuMilli") Read(kv.second, path, &c->jobmaster_vcores_milli, errors);
    else if (key == "memoryMb") Read(kv.second, path, &c->jobmaster_memory_mb, errors);
    else errors->push_back(absl::StrCat(path, ": unknown key"));
  }
}

void ReadRateLimits(const YAML::Node& node, UserRateLimits* r, std::vector<std::string>* errors) {
  for (const auto& kv : node) {
    std::string key;
    if (!Key(kv.first, "rateLimits", &key, errors)) continue;
    std::string path = "rateLimits." + key;
    if (key == "submit") Read(kv.second, path, &r->submit, errors);
    else if (key == "listJobs") Read(kv.second, path, &r->list_jobs, errors);
    else if (key == "logs") Read(kv.second, path, &r->logs, errors);
    else if (key == "createToken") Read(kv.second, path, &r->create_token, errors);
    else if (key == "burstSeconds") Read(kv.second, path, &r->burst_seconds, errors);
    else errors->push_back(absl::StrCat(path, ": unknown key"));
  }
}

void ReadLogStreams(const YAML::Node& node, ServerConfig* c, std::vector<std::string>* errors) {
  for (const auto& kv : node) {
    std::string key;
    if (!Key(kv.first, "logStreams", &key, errors)) continue;
    std::string path = "logStreams." + key;
    if (key == "perUser") Read(kv.second, path, &c->log_streams_per_user, errors);
    else if (key == "perNode") Read(kv.second, path, &c->log_subscriptions_per_node, errors);
    else if (key == "perUserPerNode") Read(kv.second, path, &c->log_subscriptions_per_user_per_node, errors);
    else errors->push_back(absl::StrCat(path, ": unknown key"));
  }
}

void ReadTop(const YAML::Node& root, ServerConfig* config, std::vector<std::string>* errors_out) {
  ServerConfig& c = *config;
  std::vector<std::string>& errors = *errors_out;
  for (const auto& kv : root) {
    std::string key;
    if (!Key(kv.first, "", &key, &errors)) continue;
    const YAML::Node& v = kv.second;
    if (key == "listen") Read(v, key, &c.listen, &errors);
    else if (key == "agentListen") Read(v, key, &c.agent_listen, &errors);
    else if (key == "clusterServers") Read(v, key, &c.cluster_servers, &errors);
    else if (key == "maxAgentConnections") Read(v, key, &c.max_agent_connections, &errors);
    else if (key == "maxAgentConnectionsPerPeer") Read(v, key, &c.max_agent_connections_per_peer, &errors);
    else if (key == "unauthenticatedGraceMs") Read(v, key, &c.unauthenticated_grace_ms, &errors);
    else if (key == "httpListen") Read(v, key, &c.http_listen, &errors);
    else if (key == "httpTls") Read(v, key, &c.http_tls, &errors);
    else if (key == "maxOpenFiles") Read(v, key, &c.max_open_files, &errors);
    else if (key == "maxConnections") Read(v, key, &c.max_connections, &errors);
    else if (key == "maxConnectionsPerPeer") Read(v, key, &c.max_connections_per_peer, &errors);
    else if (key == "handshakeTimeoutMs") Read(v, key, &c.handshake_timeout_ms, &errors);
    else if (key == "connectionIdleMs") Read(v, key, &c.connection_idle_ms, &errors);
    else if (key == "loginSocket") Read(v, key, &c.login_socket, &errors);
    else if (key == "maxPendingJobsPerUser") Read(v, key, &c.max_pending_jobs_per_user, &errors);
    else if (key == "maxSubmissionsPerSecondPerUser") Read(v, key, &c.max_submissions_per_second_per_user, &errors);
    else if (key == "httpThreads") Read(v, key, &c.http_threads, &errors);
    else if (key == "httpMaxConnections") Read(v, key, &c.http_max_connections, &errors);
    else if (key == "httpRequestTimeoutMs") Read(v, key, &c.http_request_timeout_ms, &errors);
    // The HTTP door's caps and deadlines.
    else if (key == "httpMaxConnectionsPerPeer") Read(v, key, &c.http_max_connections_per_peer, &errors);
    else if (key == "httpTrustedReserve") Read(v, key, &c.http_trusted_reserve, &errors);
    else if (key == "httpHeaderTimeoutMs") Read(v, key, &c.http_header_timeout_ms, &errors);
    else if (key == "httpBodyTimeoutMs") Read(v, key, &c.http_body_timeout_ms, &errors);
    else if (key == "httpKeepAliveMs") Read(v, key, &c.http_keep_alive_ms, &errors);
    else if (key == "httpMaxLogStreams") Read(v, key, &c.http_max_log_streams, &errors);
    else if (key == "httpMaxWatchers") Read(v, key, &c.http_max_watchers, &errors);
    else if (key == "historyIntervalMs") Read(v, key, &c.history_interval_ms, &errors);
    else if (key == "taskSampleIntervalMs") Read(v, key, &c.task_sample_interval_ms, &errors);
    else if (key == "taskSampleMaxTasks") Read(v, key, &c.task_sample_max_tasks, &errors);
    else if (key == "scheduleMinIntervalSeconds") Read(v, key, &c.schedule_min_interval_seconds, &errors);
    else if (key == "historyRetentionMinutes") Read(v, key, &c.history_retention_minutes, &errors);
    else if (key == "accountingRetentionDays") Read(v, key, &c.accounting_retention_days, &errors);
    else if (key == "accountingMaxJobs") Read(v, key, &c.accounting_max_jobs, &errors);
    else if (key == "finishedJobRetentionMinutes") Read(v, key, &c.finished_job_retention_minutes, &errors);
    else if (key == "dataDir") Read(v, key, &c.data_dir, &errors);
    else if (key == "tlsDir") Read(v, key, &c.tls_dir, &errors);
    else if (key == "queueConfig") Read(v, key, &c.queue_config, &errors);
    else if (key == "queuePolicy") Read(v, key, &c.queue_policy, &errors);
    else if (key == "defaultQueue") Read(v, key, &c.default_queue, &errors);
    else if (key == "nodeLaunchFaultsToDegrade") Read(v, key, &c.node_launch_faults_to_degrade, &errors);
    else if (key == "minNodeFreeDiskMb") Read(v, key, &c.min_node_free_disk_mb, &errors);
    else if (key == "placement") Read(v, key, &c.placement, &errors);
    else if (key == "heartbeatIntervalMs") Read(v, key, &c.heartbeat_interval_ms, &errors);
    else if (key == "quietHeartbeatIntervalMs") Read(v, key, &c.quiet_heartbeat_interval_ms, &errors);
    else if (key == "nodeTimeoutMs") Read(v, key, &c.node_timeout_ms, &errors);
    else if (key == "killGraceMs") Read(v, key, &c.kill_grace_ms, &errors);
    else if (key == "preemptionGraceMs") Read(v, key, &c.preemption_grace_ms, &errors);
    else if (key == "preemptionMinRuntimeMs") Read(v, key, &c.preemption_min_runtime_ms, &errors);
    else if (key == "elasticGrowAfterMs") Read(v, key, &c.elastic_grow_after_ms, &errors);
    else if (key == "reservationWaitMs") Read(v, key, &c.reservation_wait_ms, &errors);
    else if (key == "defaultPortRange") Read(v, key, &c.default_port_range, &errors);
    else if (key == "portQuarantineMs") Read(v, key, &c.port_quarantine_ms, &errors);
    else if (key == "storeSync") Read(v, key, &c.store_sync, &errors);
    else if (key == "store") Read(v, key, &c.store, &errors);
    else if (key == "etcdPrefix") Read(v, key, &c.etcd_prefix, &errors);
    else if (key == "etcdCaFile") Read(v, key, &c.etcd_ca_file, &errors);
    else if (key == "etcdCertFile") Read(v, key, &c.etcd_cert_file, &errors);
    else if (key == "etcdKeyFile") Read(v, key, &c.etcd_key_file, &errors);
    else if (key == "etcdMaxTxnOps") Read(v, key, &c.etcd_max_txn_ops, &errors);
    else if (key == "etcdMaxRequestBytes") Read(v, key, &c.etcd_max_request_bytes, &errors);
    else if (key == "leaderLeaseMs") Read(v, key, &c.leader_lease_ms, &errors);
    else if (key == "storeGroupCommit") Read(v, key, &c.store_group_commit, &errors);
    else if (key == "maxLogFollowers") Read(v, key, &c.max_log_followers, &errors);
    else if (key == "logFollowerBufferBytes") Read(v, key, &c.log_follower_buffer_bytes, &errors);
    else if (key == "logFollowerStallMs") Read(v, key, &c.log_follower_stall_ms, &errors);
    else if (key == "maxSpecBytes") Read(v, key, &c.max_spec_bytes, &errors);
    else if (key == "maxTasksPerJob") Read(v, key, &c.spec_bounds.max_tasks, &errors);
    else if (key == "maxRolesPerJob") Read(v, key, &c.spec_bounds.max_roles, &errors);
    else if (key == "maxEnvBytesPerRole") Read(v, key, &c.spec_bounds.max_env_bytes, &errors);
    else if (key == "maxCommandBytesPerRole") Read(v, key, &c.spec_bounds.max_command_bytes, &errors);
    else if (key == "maxLaunchBytesPerJob") Read(v, key, &c.spec_bounds.max_launch_bytes, &errors);
    else if (key == "defaultCpu") ReadQuantity(v, key, &api::ParseCpuQuantity, &c.default_vcores_milli, &errors);
    else if (key == "defaultMemory") ReadQuantity(v, key, &api::ParseMemoryQuantity, &c.default_memory_mb, &errors);
    else if (key == "limits" && v.IsMap()) ReadLimits(v, &c.limits, &errors);
    else if (key == "jobmaster" && v.IsMap()) ReadJobmaster(v, &c, &errors);
    else if (key == "rateLimits" && v.IsMap()) ReadRateLimits(v, &c.rate_limits, &errors);
    else if (key == "logStreams" && v.IsMap()) ReadLogStreams(v, &c, &errors);
    else errors.push_back(absl::StrCat(key, ": unknown key"));
  }
}

// Each bound at least what the smallest job needs and at most what one
// server can hold for one job; what is outside is a typo or a door left open.
void ValidateSpecBounds(const api::SpecBounds& b, std::vector<std::string>* errors) {
  auto within = [&](const char* key, int64_t v, int64_t least, int64_t most) {
    if (v < least || v > most) errors->push_back(absl::StrCat(key, ": ", v, " is not within ", least, "..", most));
  };
  within("maxTasksPerJob", b.max_tasks, 1, 1000000);
  within("maxRolesPerJob", b.max_roles, 1, 10000);
  within("maxEnvBytesPerRole", b.max_env_bytes, 1024, int64_t{64} << 20);
  within("maxCommandBytesPerRole", b.max_command_bytes, 1024, int64_t{64} << 20);
  within("maxLaunchBytesPerJob", b.max_launch_bytes, 1 << 20, int64_t{16} << 30);
}

}  // namespace

absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path, ServerConfig c) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("config file ", path, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path, ": not valid YAML at line ", e.mark.line + 1, ": ", e.msg));
  }
  if (root.IsNull()) return c;
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat("config file ", path, ": must be a mapping"));
  std::vector<std::string> errors;
  try {
    ReadTop(root, &c, &errors);
  } catch (const YAML::Exception& e) {  // a backstop: the readers above catch what they expect
    errors.push_back(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("config file ", path, ":\n", absl::StrJoin(errors, "\n")));
  }
  return c;
}

absl::Status ValidateServerConfig(const ServerConfig& c) {
  std::vector<std::string> errors;
  if (c.heartbeat_interval_ms <= 0) errors.push_back("heartbeatIntervalMs: must be positive");
  if (c.node_timeout_ms <= c.heartbeat_interval_ms) {
    errors.push_back(absl::StrCat("nodeTimeoutMs: ", c.node_timeout_ms,
                                  " must be above heartbeatIntervalMs ", c.heartbeat_interval_ms));
  }
  if (c.quiet_heartbeat_interval_ms < 0) errors.push_back("quietHeartbeatIntervalMs: must not be negative");
  if (c.node_launch_faults_to_degrade <= 0) errors.push_back("nodeLaunchFaultsToDegrade: must be positive");
  if (c.min_node_free_disk_mb < 0) errors.push_back("minNodeFreeDiskMb: must not be negative");
  if (c.kill_grace_ms < 0) errors.push_back("killGraceMs: must not be negative");
  if (c.preemption_grace_ms < 0) errors.push_back("preemptionGraceMs: must not be negative");
  if (c.preemption_min_runtime_ms < 0) errors.push_back("preemptionMinRuntimeMs: must not be negative");
  if (c.elastic_grow_after_ms < 0) errors.push_back("elasticGrowAfterMs: must not be negative");
  if (c.port_quarantine_ms < 0) errors.push_back("portQuarantineMs: must not be negative");
  if (!c.store.empty() && !absl::StartsWith(c.store, "etcd://") && !absl::StartsWith(c.store, "etcds://")) {
    errors.push_back(absl::StrCat("store: '", c.store, "' is not etcd://host:port[,host:port...] (or etcds://); "
                                  "leave it empty for SQLite in dataDir"));
  }
  if (!c.cluster_servers.empty()) {
    if (absl::StatusOr<std::string> list = CheckServerList(c.cluster_servers); !list.ok()) {
      errors.push_back(absl::StrCat("clusterServers: ", list.status().message()));
    }
  }
  if (c.etcd_prefix.empty() || c.etcd_prefix.front() != '/' || c.etcd_prefix.back() != '/') {
    errors.push_back(absl::StrCat("etcdPrefix: '", c.etcd_prefix, "' must start and end with '/'"));
  }
  if (c.etcd_max_txn_ops < 8) errors.push_back("etcdMaxTxnOps: must be at least 8");
  if (c.etcd_max_request_bytes < 64 * 1024) errors.push_back("etcdMaxRequestBytes: must be at least 65536");
  if (c.leader_lease_ms < 1000 || c.leader_lease_ms % 1000 != 0) {
    errors.push_back(absl::StrCat("leaderLeaseMs: ", c.leader_lease_ms,
                                  " must be a whole number of seconds, at least 1000 (etcd grants whole seconds)"));
  }
  if (c.max_log_followers <= 0) errors.push_back("maxLogFollowers: must be positive");
  if (c.log_follower_buffer_bytes < (8 << 10)) {
    errors.push_back(absl::StrCat("logFollowerBufferBytes: ", c.log_follower_buffer_bytes, " is below 8192"));
  }
  if (c.log_follower_stall_ms <= 0) errors.push_back("logFollowerStallMs: must be positive");
  if (c.log_streams_per_user < 0) errors.push_back("logStreams.perUser: must not be negative (0: no limit)");
  if (c.log_subscriptions_per_node <= 0) errors.push_back("logStreams.perNode: must be positive");
  if (c.log_subscriptions_per_user_per_node < 0) {
    errors.push_back("logStreams.perUserPerNode: must not be negative (0: no limit)");
  }
  if (c.max_open_files < 0) errors.push_back("maxOpenFiles: must not be negative");
  if (c.max_open_files > 0 && c.max_open_files < 128) {
    errors.push_back(absl::StrCat("maxOpenFiles: ", c.max_open_files, " is below 128"));
  }
  if (c.max_connections < 0) errors.push_back("maxConnections: must not be negative");
  if (c.max_connections_per_peer < 0) errors.push_back("maxConnectionsPerPeer: must not be negative");
  if (c.max_agent_connections < 0) errors.push_back("maxAgentConnections: must not be negative");
  if (c.max_agent_connections_per_peer < 0) errors.push_back("maxAgentConnectionsPerPeer: must not be negative");
  if (c.unauthenticated_grace_ms < 0) errors.push_back("unauthenticatedGraceMs: must not be negative (0: never)");
  const UserRateLimits& r = c.rate_limits;
  for (auto [name, v] : {std::pair<const char*, double>{"submit", r.submit}, {"listJobs", r.list_jobs},
                         {"logs", r.logs}, {"createToken", r.create_token}}) {
    if (!(v >= 0 && v <= 1e6)) errors.push_back(absl::StrCat("rateLimits.", name, ": ", v, " is not within 0..1000000"));
  }
  if (!(r.burst_seconds >= 0 && r.burst_seconds <= 3600)) {
    errors.push_back(absl::StrCat("rateLimits.burstSeconds: ", r.burst_seconds, " is not within 0..3600"));
  }
  if (c.handshake_timeout_ms <= 0) errors.push_back("handshakeTimeoutMs: must be positive");
  if (c.connection_idle_ms <= 0) errors.push_back("connectionIdleMs: must be positive");
  if (c.max_pending_jobs_per_user < 0) errors.push_back("maxPendingJobsPerUser: must not be negative (0: no limit)");
  if (c.max_submissions_per_second_per_user < 0) {
    errors.push_back("maxSubmissionsPerSecondPerUser: must not be negative (0: no limit)");
  }
  if (c.http_threads < 1 || c.http_threads > 256) {
    errors.push_back(absl::StrCat("httpThreads: ", c.http_threads, " is not within 1..256"));
  }
  if (c.http_max_connections != 0 && c.http_max_connections < c.http_threads) {
    errors.push_back(absl::StrCat("httpMaxConnections: ", c.http_max_connections, " is below httpThreads ",
                                  c.http_threads, " (0: what the open-file limit allows)"));
  }
  if (c.http_request_timeout_ms <= 0) errors.push_back("httpRequestTimeoutMs: must be positive");
  // The HTTP door's caps and deadlines.
  if (c.http_max_connections_per_peer < 0) errors.push_back("httpMaxConnectionsPerPeer: must not be negative");
  if (c.http_trusted_reserve < 0 ||
      (c.http_max_connections > 0 && c.http_trusted_reserve >= c.http_max_connections)) {
    errors.push_back(absl::StrCat("httpTrustedReserve: ", c.http_trusted_reserve,
                                  " is not within 0..httpMaxConnections-1"));
  }
  for (auto [key, ms] : {std::pair<const char*, int>{"httpHeaderTimeoutMs", c.http_header_timeout_ms},
                         {"httpBodyTimeoutMs", c.http_body_timeout_ms},
                         {"httpKeepAliveMs", c.http_keep_alive_ms}}) {
    if (ms <= 0) errors.push_back(absl::StrCat(key, ": must be positive"));
  }
  if (c.http_tls != "auto" && c.http_tls != "on" && c.http_tls != "off") {
    errors.push_back(absl::StrCat("httpTls: '", c.http_tls, "' is not one of auto, on, off"));
  } else if (c.http_tls == "on" && c.tls_dir.empty()) {
    errors.push_back("httpTls: on needs tlsDir (the server's certificate)");
  }
  if (c.http_max_log_streams < 0 || c.http_max_log_streams > 1024) {
    errors.push_back(absl::StrCat("httpMaxLogStreams: ", c.http_max_log_streams, " is not within 0..1024"));
  }
  if (c.http_max_watchers < 0 || c.http_max_watchers > 1024) {
    errors.push_back(absl::StrCat("httpMaxWatchers: ", c.http_max_watchers, " is not within 0..1024"));
  }
  if (c.task_sample_interval_ms != 0 && (c.task_sample_interval_ms < 200 || c.task_sample_interval_ms > 600000)) {
    errors.push_back(absl::StrCat("taskSampleIntervalMs: ", c.task_sample_interval_ms,
                                  " is not 0 (no samples) or within 200..600000"));
  }
  if (c.schedule_min_interval_seconds < 1 || c.schedule_min_interval_seconds > 86400) {
    errors.push_back(absl::StrCat("scheduleMinIntervalSeconds: ", c.schedule_min_interval_seconds,
                                  " is not within 1..86400"));
  }
  if (c.task_sample_max_tasks < 0 || c.task_sample_max_tasks > 1000000) {
    errors.push_back(absl::StrCat("taskSampleMaxTasks: ", c.task_sample_max_tasks, " is not within 0..1000000"));
  }
  if (c.history_interval_ms != 0 && (c.history_interval_ms < 100 || c.history_interval_ms > 3600000)) {
    errors.push_back(absl::StrCat("historyIntervalMs: ", c.history_interval_ms, " is not 0 (no history) or within 100..3600000"));
  }
  if (c.accounting_retention_days < 1 || c.accounting_retention_days > 3650) {
    errors.push_back(absl::StrCat("accountingRetentionDays: ", c.accounting_retention_days, " is not within 1..3650"));
  }
  if (c.finished_job_retention_minutes < 0 || c.finished_job_retention_minutes > 10 * 365 * 24 * 60) {
    errors.push_back(absl::StrCat("finishedJobRetentionMinutes: ", c.finished_job_retention_minutes,
                                  " is not 0 (never) or within 1..5256000 (ten years)"));
  }
  if (c.accounting_max_jobs < 1000 || c.accounting_max_jobs > 10000000) {
    errors.push_back(absl::StrCat("accountingMaxJobs: ", c.accounting_max_jobs, " is not within 1000..10000000"));
  }
  if (c.history_retention_minutes < 1 || c.history_retention_minutes > 7 * 24 * 60) {
    errors.push_back(absl::StrCat("historyRetentionMinutes: ", c.history_retention_minutes, " is not within 1..10080"));
  } else if (c.history_interval_ms > 0 &&
             int64_t{c.history_retention_minutes} * 60000 / c.history_interval_ms > kMaxHistorySamples) {
    errors.push_back(absl::StrCat("historyRetentionMinutes: ", c.history_retention_minutes, " at historyIntervalMs ",
                                  c.history_interval_ms, " is more than ", kMaxHistorySamples,
                                  " samples; keep fewer minutes or sample less often"));
  }
  for (auto [key, value, names] : {std::tuple{"queuePolicy", &c.queue_policy, core::QueuePolicyNames()},
                                    std::tuple{"placement", &c.placement, core::PlacementPolicyNames()}}) {
    if (!absl::c_linear_search(names, *value)) {
      errors.push_back(absl::StrCat(key, ": '", *value, "' is not one of ", absl::StrJoin(names, ", ")));
    }
  }
  const auto& l = c.limits;
  if (l.min_memory_mb > l.max_memory_mb) errors.push_back("limits.minMemoryMb: above maxMemoryMb");
  if (l.min_vcores_milli > l.max_vcores_milli) errors.push_back("limits.minVcoresMilli: above maxVcoresMilli");
  if (l.min_gpus > l.max_gpus) errors.push_back("limits.minGpus: above maxGpus");
  if (l.max_gpus > 64) errors.push_back("limits.maxGpus: above 64, the most GPUs a node can have");
  if (c.max_spec_bytes < 4096) errors.push_back(absl::StrCat("maxSpecBytes: ", c.max_spec_bytes, " is below 4096"));
  if (c.max_spec_bytes > (1 << 30)) errors.push_back(absl::StrCat("maxSpecBytes: ", c.max_spec_bytes, " is above 1 GiB"));
  ValidateSpecBounds(c.spec_bounds, &errors);
  if (c.default_vcores_milli > 0 && c.default_vcores_milli < api::kMinRunnableVcoresMilli) {
    errors.push_back(absl::StrCat("defaultCpu: ", api::CpuQuantityText(c.default_vcores_milli), " is below ",
                                  api::CpuQuantityText(api::kMinRunnableVcoresMilli), ", the least a task can run with"));
  }
  if (c.default_memory_mb > 0 && c.default_memory_mb < api::kMinRunnableMemoryMb) {
    errors.push_back(absl::StrCat("defaultMemory: ", api::MemoryQuantityText(c.default_memory_mb), " is below ",
                                  api::MemoryQuantityText(api::kMinRunnableMemoryMb), ", the least a task can start in"));
  }
  if (c.default_vcores_milli < l.min_vcores_milli || c.default_vcores_milli > l.max_vcores_milli) {
    errors.push_back(absl::StrCat("defaultCpu: ", api::CpuQuantityText(c.default_vcores_milli),
                                  " is outside limits.minVcoresMilli..maxVcoresMilli"));
  }
  if (c.default_memory_mb < l.min_memory_mb || c.default_memory_mb > l.max_memory_mb) {
    errors.push_back(absl::StrCat("defaultMemory: ", api::MemoryQuantityText(c.default_memory_mb),
                                  " is outside limits.minMemoryMb..maxMemoryMb"));
  }
  auto ports = core::PortRanges::Parse(c.default_port_range);
  if (!ports.ok()) errors.push_back(absl::StrCat("defaultPortRange: ", ports.status().message()));
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return absl::OkStatus();
}

int QuietHeartbeatIntervalMs(const ServerConfig& c) {
  int quiet = std::min(c.quiet_heartbeat_interval_ms, c.node_timeout_ms / 4);
  return quiet > c.heartbeat_interval_ms ? quiet : 0;
}

}  // namespace trainyard::server
