// The server's configuration: defaults, a YAML file (`--config`) and flags on
// top. Unknown keys in the file are errors naming the key.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/resources/limits.h"

namespace trainyard::server {

struct ServerConfig {
  std::string listen = "127.0.0.1:7450";  // gRPC for clients and agents
  std::string data_dir = ".trainyard/server";
  std::string queue_config;               // YAML path; "" = one queue "default"
  std::string queue_policy = "fifo";      // fifo | capacity | fair
  // The queue of a job whose spec names none; "" = the queue config's
  // defaultQueue, else "default". Must be a leaf queue.
  std::string default_queue;
  core::AllocationLimits limits;
  int heartbeat_interval_ms = 1000;       // what agents are told
  int node_timeout_ms = 10000;            // missed heartbeats before LOST
  int kill_grace_ms = 5000;               // SIGTERM .. SIGKILL
  int preemption_grace_ms = 30000;        // time victims get to checkpoint
  int reservation_wait_ms = 60000;        // head-of-line wait before reserving
  // A node whose agent refused this many launches in a row for a reason of
  // the node (cannot write task files) is taken out of placement (DEGRADED)
  // until its agent registers again or an admin uncordons it; one whose data
  // dir has less free disk than this, until it has more again.
  int node_launch_faults_to_degrade = 2;
  int64_t min_node_free_disk_mb = 100;
  std::string default_port_range = "[20000-40000]";
  bool store_sync = true;                 // fsync each group commit
  bool store_group_commit = true;         // false: one transaction per write (a benchmark's baseline)
  // The job master each job gets as its first task.
  bool jobmaster_enabled = true;
  int64_t jobmaster_vcores_milli = 200;   // job.master.cpu 0.2
  int64_t jobmaster_memory_mb = 1024;     // job.master.ram
  std::string checkpoint_root;            // "" = DATA_DIR/checkpoints; shared by the nodes
  std::string trainyard_binary;           // path agents run for the master; "" = this binary
  // `logs` streams: at most this many at once (one more is refused with
  // RESOURCE_EXHAUSTED); what each holds that its reader has not taken (the
  // rest waits in the log files on the nodes); and how long a reader may
  // take nothing while data waits before its stream is cut off.
  int max_log_followers = 1000;
  int64_t log_follower_buffer_bytes = 1 << 20;
  int log_follower_stall_ms = 60000;
};

// Reads `path` (YAML) over the defaults. Keys: listen, dataDir, queueConfig,
// queuePolicy, defaultQueue, heartbeatIntervalMs, nodeLaunchFaultsToDegrade,
// minNodeFreeDiskMb, nodeTimeoutMs, killGraceMs,
// preemptionGraceMs, reservationWaitMs, defaultPortRange, storeSync,
// maxLogFollowers, logFollowerBufferBytes, logFollowerStallMs,
// limits: {minMemoryMb, maxMemoryMb, minVcoresMilli, maxVcoresMilli, minGpus,
// maxGpus, maxPorts}, jobmaster: {enabled, cpuMilli, memoryMb}.
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path, ServerConfig base = {});

// Checks values: positive intervals, limits min <= max, known policy.
absl::Status ValidateServerConfig(const ServerConfig& config);

}  // namespace trainyard::server
