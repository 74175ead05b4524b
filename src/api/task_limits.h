// How a task's enforced limits read to a person: one line that `describe`
// and the REST job view both show, so the two never disagree.
#pragma once

#include <string>

#include "proto/trainyard.pb.h"

namespace trainyard::api {

// "memory 512Mi (cgroup v1), cpu 500m (cgroup v1 quota), pids 4096
// (cgroup v1)"; a limit not enforced reads "memory 512Mi: not enforced",
// followed by why ("(no writable cgroup: ...)") once at the end; a limit
// not asked reads "memory: no limit".
std::string EnforcedLimitsText(const v1::EnforcedLimits& limits);

}  // namespace trainyard::api
