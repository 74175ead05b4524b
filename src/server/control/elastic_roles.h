// The roles of an elastic job (a role with minCount, docs/elastic.md) and
// the size of its membership: what each role says and holds, how many of
// its elastic tasks are placed, and each placement's new membership (epoch,
// worker ids dense from 0). ControlState (control_elastic.cc) decides when
// such a job grows or shrinks. Functions of one job's record; part of the
// control state.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "proto/service.pb.h"

namespace trainyard::server {

// What the job's roles say and hold, read from the spec once per role and
// from the tasks once each (not a pass over the roles per task: a job may
// have thousands of both).
struct RoleFacts {
  bool worker = false;  // RoleTraits::worker
  int count = 0;
  int min_count = 0;    // 0: not elastic
  int placed = 0;       // its tasks with a node
};
using Roles = std::map<std::string, RoleFacts, std::less<>>;
Roles FactsOf(const v1::JobRecord& rec);

// The placed tasks and all tasks of the job's elastic roles.
std::pair<int, int> ElasticSize(const Roles& roles);

// The job's next membership, at a placement: the epoch raised, worker ids
// dense from 0 over the placed workers (RoleTraits::worker, in the spec's
// role order, then by index), then the other placed roles but the master;
// the tasks not placed follow in the same order. Returns the "membership"
// event's text ("membership epoch 3: 6 of 8 elastic tasks placed (worker 6
// of 8 (minCount 4))").
std::string NextMembership(v1::JobRecord* rec);

// Workers placed (TRAINYARD_NUM_WORKERS of an elastic job).
int PlacedWorkers(const v1::JobRecord& rec);

}  // namespace trainyard::server
