// JobMap: every job the control state keeps, by name, and the lookup that
// ControlState and the rooms that read its jobs (GateBook, ViewPublisher,
// the invariants) share. A name mapped to null is reserved: a submission
// not yet durable, or a deleted job's name until its rename is.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace trainyard::server {

struct JobRt;  // job_rt.h

// Hashed: looked up several times per event.
using JobMap = absl::flat_hash_map<std::string, std::unique_ptr<JobRt>>;

// The job named `name`; null when none is kept (or the name is reserved).
inline JobRt* FindJobIn(JobMap& jobs, const std::string& name) {
  auto it = jobs.find(name);
  return it == jobs.end() ? nullptr : it->second.get();
}
inline const JobRt* FindJobIn(const JobMap& jobs, const std::string& name) {
  auto it = jobs.find(name);
  return it == jobs.end() ? nullptr : it->second.get();
}

}  // namespace trainyard::server
