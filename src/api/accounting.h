// Accounting: what a finished job held and how it ended, as `trainyard
// history` and `trainyard usage` show it (Slurm's sacct and sreport). One
// home for the arithmetic: the server charges a task's held time to its
// job (AddUsage), builds a finished job's account from its record
// (AccountOf) and sums accounts per user or queue (SumUsage); the CLI and
// the REST API print what these give.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/service.pb.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// The name a job ended under: a deleted job's record is kept as NAME#ID
// ('#' is in no job name), other records as the name itself.
std::string EndedName(const std::string& record_name);

// The GPUs, in thousandths, of a request or allocation: a share its part,
// whole GPUs 1000 each (`gpus`, else the GPUs of `gpu_mask`).
int64_t GpuMilliOf(const v1::Resource& r);

// Adds `held_ms` of `allocation` (GPUs, vcores, memory) to `usage`; a
// negative time (a clock stepped back) adds nothing, and a sum saturates at
// the int64 range rather than wrap.
void AddUsage(const v1::Resource& allocation, int64_t held_ms, v1::JobUsage* usage);

// A finished job's account from its record. A deleted job's record
// (named NAME#ID) is named NAME and marked deleted. The usage is what the
// record holds: while a task still holds its place (settled false) it is
// charged when it lets go.
v1::JobAccount AccountOf(const v1::JobRecord& rec);

// Usage per user (by_queue false) or per queue, most GPU-hours first (then
// by name), and the total over all of them.
v1::UsageResponse SumUsage(const std::vector<const v1::JobAccount*>& accounts, bool by_queue);

}  // namespace trainyard::api
