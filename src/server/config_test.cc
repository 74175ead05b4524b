#include "server/config.h"

#include "core/policy/placement_policy.h"
#include "core/policy/queue_policy.h"
#include "server/server.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

std::string WriteConfig(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ServerConfigTest, ReadsSpecCapAndResourceDefaults) {
  absl::StatusOr<ServerConfig> c =
      LoadServerConfig(WriteConfig("defaults.yaml", "maxSpecBytes: 65536\ndefaultCpu: 500m\ndefaultMemory: 2Gi\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_spec_bytes, 65536);
  EXPECT_EQ(c->default_vcores_milli, 500);
  EXPECT_EQ(c->default_memory_mb, 2048);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  ServerConfig defaults;
  EXPECT_EQ(defaults.max_spec_bytes, 1 << 20);
  EXPECT_EQ(defaults.default_vcores_milli, 1000);
  EXPECT_EQ(defaults.default_memory_mb, 1024);
}

TEST(ServerConfigTest, ClusterServersIsAListOfAddressesAndABadOneNamesTheKey) {
  absl::StatusOr<ServerConfig> c =
      LoadServerConfig(WriteConfig("cluster.yaml", "clusterServers: 10.0.0.11:7450,10.0.0.12:7450\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cluster_servers, "10.0.0.11:7450,10.0.0.12:7450");
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  c->cluster_servers = "10.0.0.11:7450,server-b:7450";
  absl::Status st = ValidateServerConfig(*c);
  EXPECT_THAT(std::string(st.message()), HasSubstr("clusterServers: "));
  EXPECT_THAT(std::string(st.message()), HasSubstr("'server-b' is not an IP address"));
}

TEST(ServerConfigTest, TlsDirTurnsTlsOnForATcpListenerOnly) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(WriteConfig("tls.yaml", "tlsDir: /etc/trainyard/certs\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tls_dir, "/etc/trainyard/certs");
  EXPECT_TRUE(UsesTls(*c));
  c->listen = "unix:/run/trainyard.sock";
  EXPECT_FALSE(UsesTls(*c));  // the socket's permissions guard it
  EXPECT_FALSE(UsesTls(ServerConfig()));
}

TEST(ServerConfigTest, BadValuesAreErrorsNamingTheKey) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(WriteConfig("bad.yaml", "defaultCpu: lots\n"));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("defaultCpu: 'lots' is not a CPU quantity"));
  ServerConfig outside;
  outside.default_memory_mb = 4 << 20;
  outside.max_spec_bytes = 100;
  absl::Status st = ValidateServerConfig(outside);
  EXPECT_THAT(st.message(), HasSubstr("defaultMemory: 4Ti is outside limits.minMemoryMb..maxMemoryMb"));
  EXPECT_THAT(st.message(), HasSubstr("maxSpecBytes: 100 is below 4096"));
}

TEST(ServerConfigTest, ReadsTheQuietHeartbeatIntervalAndChecksIt) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(WriteConfig("quiet.yaml", "quietHeartbeatIntervalMs: 4000\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quiet_heartbeat_interval_ms, 4000);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  c->node_timeout_ms = 30000;
  EXPECT_EQ(QuietHeartbeatIntervalMs(*c), 4000);
  c->node_timeout_ms = 10000;
  EXPECT_EQ(QuietHeartbeatIntervalMs(*c), 2500) << "at most a quarter of the node timeout";
  c->quiet_heartbeat_interval_ms = 0;
  EXPECT_EQ(QuietHeartbeatIntervalMs(*c), 0) << "off: every beat is sent";
  c->quiet_heartbeat_interval_ms = -1;
  EXPECT_THAT(ValidateServerConfig(*c).message(), HasSubstr("quietHeartbeatIntervalMs: must not be negative"));
}

TEST(ServerConfigTest, ReadsTheLogStreamsBlockAndChecksIt) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(
      WriteConfig("streams.yaml", "logStreams: {perUser: 8, perNode: 500, perUserPerNode: 16}\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_streams_per_user, 8);
  EXPECT_EQ(c->log_subscriptions_per_node, 500);
  EXPECT_EQ(c->log_subscriptions_per_user_per_node, 16);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  ServerConfig defaults;
  EXPECT_EQ(defaults.log_streams_per_user, 64);
  EXPECT_EQ(defaults.log_subscriptions_per_node, 1000);
  EXPECT_EQ(defaults.log_subscriptions_per_user_per_node, 128);
  absl::StatusOr<ServerConfig> unknown = LoadServerConfig(WriteConfig("streams-bad.yaml", "logStreams: {perGroup: 1}\n"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("logStreams.perGroup: unknown key"));
  ServerConfig bad;
  bad.log_streams_per_user = -1;
  bad.log_subscriptions_per_node = 0;
  absl::Status st = ValidateServerConfig(bad);
  EXPECT_THAT(st.message(), HasSubstr("logStreams.perUser: must not be negative"));
  EXPECT_THAT(st.message(), HasSubstr("logStreams.perNode: must be positive"));
}

TEST(ServerConfigTest, AKeyThatIsAListIsAnErrorNotACrash) {
  absl::StatusOr<ServerConfig> c =
      LoadServerConfig(WriteConfig("keys.yaml", "? [a]\n: b\nlimits: {[maxGpus]: 4}\njobmaster: {{x: 1}: 2}\n"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("line 1: a key must be a string"));
  EXPECT_THAT(c.status().message(), HasSubstr("limits: line 3: a key must be a string"));
  EXPECT_THAT(c.status().message(), HasSubstr("jobmaster: line 4: a key must be a string"));
}

TEST(ServerConfigTest, ReadsTheHttpKeysAndChecksThem) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(WriteConfig(
      "http.yaml", "httpListen: 127.0.0.1:9000\nhttpThreads: 2\nhttpMaxConnections: 8\nhttpRequestTimeoutMs: 500\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->http_listen, "127.0.0.1:9000");
  EXPECT_EQ(c->http_threads, 2);
  EXPECT_EQ(c->http_max_connections, 8);
  EXPECT_EQ(c->http_request_timeout_ms, 500);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  EXPECT_EQ(ServerConfig().http_listen, "");  // `trainyard server` serves no HTTP unless asked
  ServerConfig bad;
  bad.http_threads = 8;
  bad.http_max_connections = 4;
  bad.http_request_timeout_ms = 0;
  absl::Status st = ValidateServerConfig(bad);
  EXPECT_THAT(st.message(), HasSubstr("httpMaxConnections: 4 is below httpThreads 8"));
  EXPECT_THAT(st.message(), HasSubstr("httpRequestTimeoutMs: must be positive"));
}

TEST(ServerConfigTest, ReadsTheHttpDoorKeysAndChecksThem) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(
      WriteConfig("door.yaml", "httpMaxConnections: 64\nhttpMaxConnectionsPerPeer: 4\nhttpTrustedReserve: 16\n"
                               "httpHeaderTimeoutMs: 2000\nhttpBodyTimeoutMs: 9000\nhttpKeepAliveMs: 700\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->http_max_connections_per_peer, 4);
  EXPECT_EQ(c->http_trusted_reserve, 16);
  EXPECT_EQ(c->http_header_timeout_ms, 2000);
  EXPECT_EQ(c->http_body_timeout_ms, 9000);
  EXPECT_EQ(c->http_keep_alive_ms, 700);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  EXPECT_TRUE(ValidateServerConfig(ServerConfig()).ok());  // 0: the caps come from the open-file limit
  ServerConfig bad;
  bad.http_max_connections = 64;
  bad.http_trusted_reserve = 64;
  bad.http_max_connections_per_peer = -1;
  bad.http_header_timeout_ms = 0;
  absl::Status st = ValidateServerConfig(bad);
  EXPECT_THAT(st.message(), HasSubstr("httpTrustedReserve: 64 is not within 0..httpMaxConnections-1"));
  EXPECT_THAT(st.message(), HasSubstr("httpMaxConnectionsPerPeer: must not be negative"));
  EXPECT_THAT(st.message(), HasSubstr("httpHeaderTimeoutMs: must be positive"));
}

TEST(ServerConfigTest, ReadsTheDoorsAndTheRateLimitsAndChecksThem) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(WriteConfig(
      "doors.yaml",
      "agentListen: 0.0.0.0:9001\nmaxAgentConnections: 500\nunauthenticatedGraceMs: 2000\n"
      "rateLimits: {submit: 5, listJobs: 0.5, logs: 3, createToken: 1, burstSeconds: 4}\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->agent_listen, "0.0.0.0:9001");
  EXPECT_EQ(c->max_agent_connections, 500);
  EXPECT_EQ(c->unauthenticated_grace_ms, 2000);
  EXPECT_EQ(c->rate_limits.list_jobs, 0.5);
  EXPECT_EQ(c->rate_limits.burst_seconds, 4);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  c->rate_limits.logs = -1;
  c->unauthenticated_grace_ms = -5;
  absl::Status bad = ValidateServerConfig(*c);
  EXPECT_THAT(bad.message(), HasSubstr("rateLimits.logs"));
  EXPECT_THAT(bad.message(), HasSubstr("unauthenticatedGraceMs"));
  absl::StatusOr<ServerConfig> unknown = LoadServerConfig(WriteConfig("rl.yaml", "rateLimits: {jobs: 1}\n"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("rateLimits.jobs: unknown key"));
}

TEST(ServerConfigTest, ReadsTheHistoryKeysAndBoundsTheRing) {
  absl::StatusOr<ServerConfig> c =
      LoadServerConfig(WriteConfig("history.yaml", "historyIntervalMs: 5000\nhistoryRetentionMinutes: 60\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->history_interval_ms, 5000);
  EXPECT_EQ(c->history_retention_minutes, 60);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  EXPECT_EQ(ServerConfig().history_interval_ms, 10000);  // 3 h at 10 s by default
  EXPECT_EQ(ServerConfig().history_retention_minutes, 180);
  ServerConfig bad;
  bad.history_interval_ms = 50;
  EXPECT_THAT(ValidateServerConfig(bad).message(),
              HasSubstr("historyIntervalMs: 50 is not 0 (no history) or within 100..3600000"));
  bad.history_interval_ms = 100;
  bad.history_retention_minutes = 7 * 24 * 60;  // 6 M samples
  EXPECT_THAT(ValidateServerConfig(bad).message(), HasSubstr("historyRetentionMinutes: 10080 at historyIntervalMs 100"));
  bad.history_interval_ms = 0;  // no history: any retention in range is fine
  EXPECT_TRUE(ValidateServerConfig(bad).ok());
  bad.history_retention_minutes = 0;
  EXPECT_THAT(ValidateServerConfig(bad).message(), HasSubstr("historyRetentionMinutes: 0 is not within 1..10080"));
}

TEST(ServerConfigTest, ReadsWhatOneSubmissionMayCost) {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(
      WriteConfig("bounds.yaml", "maxTasksPerJob: 2000\nmaxRolesPerJob: 16\nmaxEnvBytesPerRole: 65536\n"
                                 "maxCommandBytesPerRole: 32768\nmaxLaunchBytesPerJob: 16777216\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->spec_bounds.max_tasks, 2000);
  EXPECT_EQ(c->spec_bounds.max_roles, 16);
  EXPECT_EQ(c->spec_bounds.max_env_bytes, 65536);
  EXPECT_EQ(c->spec_bounds.max_command_bytes, 32768);
  EXPECT_EQ(c->spec_bounds.max_launch_bytes, 16 << 20);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  // The defaults fit a 10,000-GPU cluster: a job of 8-GPU tasks over all of it.
  ServerConfig defaults;
  EXPECT_EQ(defaults.spec_bounds.max_tasks, 2000);
  EXPECT_EQ(defaults.spec_bounds.max_roles, 100);
  EXPECT_EQ(defaults.spec_bounds.max_env_bytes, 128 << 10);
  EXPECT_EQ(defaults.spec_bounds.max_command_bytes, 128 << 10);
  EXPECT_EQ(defaults.spec_bounds.max_launch_bytes, 64 << 20);
  EXPECT_TRUE(ValidateServerConfig(defaults).ok());
}

TEST(ServerConfigTest, SubmissionBoundsOutsideTheirRangeAreRefusedByKey) {
  ServerConfig bad;
  bad.spec_bounds.max_tasks = 0;
  bad.spec_bounds.max_roles = 20000;
  bad.spec_bounds.max_env_bytes = 10;
  bad.default_vcores_milli = 5;
  absl::Status st = ValidateServerConfig(bad);
  EXPECT_THAT(st.message(), HasSubstr("maxTasksPerJob: 0 is not within 1..1000000"));
  EXPECT_THAT(st.message(), HasSubstr("maxRolesPerJob: 20000 is not within 1..10000"));
  EXPECT_THAT(st.message(), HasSubstr("maxEnvBytesPerRole: 10 is not within 1024.."));
  EXPECT_THAT(st.message(), HasSubstr("defaultCpu: 5m is below 10m, the least a task can run with"));
  absl::StatusOr<ServerConfig> typo = LoadServerConfig(WriteConfig("typo.yaml", "maxTasksPerJob: many\n"));
  EXPECT_THAT(typo.status().message(), HasSubstr("maxTasksPerJob: has the wrong type"));
}

TEST(ServerConfigTest, ReadsThePreemptionMinimumRunTimeAndPassesItToTheScheduler) {
  EXPECT_EQ(ServerConfig().preemption_min_runtime_ms, 0) << "off unless asked for";
  absl::StatusOr<ServerConfig> c =
      LoadServerConfig(WriteConfig("min-runtime.yaml", "preemptionMinRuntimeMs: 90000\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->preemption_min_runtime_ms, 90000);
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  absl::StatusOr<core::SchedulerOptions> opt = SchedulerOptionsFor(*c);
  ASSERT_TRUE(opt.ok()) << opt.status();
  EXPECT_EQ(opt->preemption_min_runtime, absl::Seconds(90));
  absl::StatusOr<ServerConfig> negative =
      LoadServerConfig(WriteConfig("min-runtime-negative.yaml", "preemptionMinRuntimeMs: -1\n"));
  ASSERT_TRUE(negative.ok()) << negative.status();
  EXPECT_THAT(ValidateServerConfig(*negative).message(),
              HasSubstr("preemptionMinRuntimeMs: must not be negative"));
  absl::StatusOr<ServerConfig> typo =
      LoadServerConfig(WriteConfig("min-runtime-typo.yaml", "preemptionMinRuntimeMs: 1m\n"));
  EXPECT_THAT(typo.status().message(), HasSubstr("preemptionMinRuntimeMs: has the wrong type"));
}

// The policy names a config may give are the ones the core's factories know.
TEST(ServerConfigTest, PolicyNamesAreTheFactoriesOwn) {
  ServerConfig c;
  for (const std::string& name : core::QueuePolicyNames()) {
    c.queue_policy = name;
    EXPECT_TRUE(ValidateServerConfig(c).ok()) << name;
  }
  for (const std::string& name : core::PlacementPolicyNames()) {
    c.placement = name;
    EXPECT_TRUE(ValidateServerConfig(c).ok()) << name;
  }
  c.queue_policy = "lottery";
  c.placement = "random";
  absl::Status st = ValidateServerConfig(c);
  EXPECT_THAT(st.message(), HasSubstr("queuePolicy: 'lottery' is not one of fifo, capacity, fair"));
  EXPECT_THAT(st.message(), HasSubstr("placement: 'random' is not one of fragmentation, topology, spread"));
}

}  // namespace
}  // namespace trainyard::server
