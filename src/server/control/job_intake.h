// What a submission becomes before its record is written, as far as it
// depends on the spec alone: the job master role a job that talks to one is
// given, the tasks' records (PENDING, worker ids), and the "submitted" event.
// ControlState::PrepareNamed names the job, checks its user's limits and
// reserves the name. Functions, no state; part of the control state.
#pragma once

#include <cstdint>
#include <string>

#include "proto/service.pb.h"

namespace trainyard::server {

// What of the server a job master's role is made from.
struct JobMasterSettings {
  int64_t vcores_milli = 0;
  int64_t memory_mb = 0;
  std::string binary;  // the trainyard binary the master runs as `trainyard jobmaster`
  std::string server;  // where the master reports its verdict
};
// Adds the job master role (`trainyard jobmaster` of job `name`, one port,
// restarted on failure) to `spec`, as its first role: the master is the
// job's first task.
void AddJobMasterRole(v1::JobSpec* spec, const std::string& name, const JobMasterSettings& settings);

// One PENDING task record per replica; workers get ids 0.., then the
// parameter servers and other roles (the job master none).
void AddTaskRecords(const v1::JobSpec& spec, v1::JobRecord* rec);

// The job's first event: "submitted by ana to queue research (4 tasks,
// priority normal)" and `defaulted` (what admission filled in).
v1::JobEventRecord SubmittedEvent(const v1::JobRecord& rec, const std::string& defaulted);

}  // namespace trainyard::server
