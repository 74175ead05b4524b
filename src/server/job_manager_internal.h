// Private records of JobManager, shared by its .cc files (job_manager.cc for
// clients, job_manager_schedule.cc for rounds and launches,
// job_manager_agents.cc for agents and node liveness).
#pragma once

#include <condition_variable>
#include <optional>
#include <string>

#include "api/states.h"
#include "core/resources/port_ranges.h"
#include "server/job_manager.h"

namespace trainyard::server {

struct JobManager::JobRt {
  v1::JobRecord rec;            // spec, state, tasks (TaskRecord)
  bool in_scheduler = false;    // known to the scheduler core
  bool ending = false;          // final state decided; tasks being stopped
  bool preempting = false;      // victim; requeued once its tasks stop
  std::string preempted_by;
  absl::Time preempt_deadline;
  std::string job_master;       // host:port of its master task, "" if none
  // Per task: the attempt number at which the current launch started; a
  // status with a lower attempt is from an older launch and ignored.
  std::vector<int> launch_base;
  bool recovered_placed = false;  // placed before a restart; waiting for nodes
  // Per task: heartbeats in a row from its node that did not list it, and
  // whether the agent has shown it has the current launch (a status or a
  // heartbeat entry of that attempt).
  std::vector<int> missing_beats;
  std::vector<bool> acked;
  // The event log as describe shows it. Jobs recovered from the store load
  // their earlier events on first use (events_loaded false until then).
  std::vector<v1::JobEvent> events;
  bool events_loaded = true;
};

struct JobManager::NodeRt {
  v1::NodeInfo info;
  AgentLink* link = nullptr;     // nullptr while disconnected
  absl::Time last_heartbeat;
  v1::NodeState state = v1::NODE_READY;
  bool in_scheduler = false;
  core::PortRanges ports_in_use;
  uint64_t busy_gpus = 0;
  absl::Time registered;
};

struct JobManager::LogWaiter {
  std::optional<v1::LogData> data;
};

int64_t ToMs(absl::Time t);
v1::JobEvent ToView(const v1::JobEventRecord& e);

}  // namespace trainyard::server
