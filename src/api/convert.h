// Conversions between wire types (proto/) and the scheduler core's values.
#pragma once

#include <string>

#include "core/resources/gpu_topology.h"
#include "core/resources/resource.h"
#include "core/state/cluster_state.h"
#include "core/state/job.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

core::Resource ToCore(const v1::Resource& r);
v1::Resource ToProto(const core::Resource& r);
// The topology as its group bitmaps say, group for group (FromGroups), so any
// grouping the agent found is kept. Errors name the field inside the message
// ("switches[2] '0+5': ..."); callers prefix where the message sits.
absl::StatusOr<core::GpuTopology> ToCore(const v1::GpuTopology& t);
// Copies the groups; ToCore(ToProto(t)) equals t.
v1::GpuTopology ToProto(const core::GpuTopology& t);
core::PriorityClass ToCore(v1::PriorityClass p);

// The scheduler's request for a stored job: one role per replica spec, the
// job's node selector (each "key: value" as `key in (value)`, or a value
// holding a whole expression such as "in (a, b)"), node name, rack, relax.
// Errors: a node selector value that does not parse.
absl::StatusOr<core::JobRequest> ToJobRequest(const v1::JobRecord& job);

// The scheduler's node for a registered agent. Errors: a topology that does
// not validate ("node N: topology.switches[2] ..."), or whose GPU count
// differs from the capacity.
absl::StatusOr<core::NodeSpec> ToNodeSpec(const v1::NodeInfo& info);

// "JOB-ROLE-INDEX", the stable name other tasks resolve.
std::string TaskName(const std::string& job, const std::string& role, int index);

}  // namespace trainyard::api
