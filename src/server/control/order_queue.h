// OrderQueue: orders to agents that wait for the store
// (ServerConfig::launch_after_durable, with etcd): a launch, kill or
// file update waits for the write that holds what led to it, so a leader
// that dies first leaves nothing done that the next one does not know. One
// queue, released in the order the orders were decided once their write
// succeeded; a newer launch of a task replaces the one queued; a kill
// already queued is not queued again. Part of the control state: no I/O,
// writes named by the persister's numbers. The OrderDesk (order_desk.h)
// queues here and decides, for each order released, whether it still holds.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "proto/service.pb.h"

namespace trainyard::server {

struct DeferredOrder {
  enum Kind { kLaunch, kKill, kFiles } kind = kLaunch;
  uint64_t after = 0;  // the write it waits for (0: none)
  std::string node;
  uint64_t job_id = 0;  // kLaunch: the job and task it is for
  std::string job;
  int task = 0;
  uint64_t generation = 0;  // kLaunch: the newest queued for its task goes
  v1::TaskSpec spec;
  v1::KillTask kill;
  v1::TaskFiles files;
};

class OrderQueue {
 public:
  // `order` waits for write `wait_for` (0: none is pending or in flight).
  // False: nothing waits for it and nothing is queued before it, so it goes
  // now (the caller sends it). True: it is queued (or, a kill queued
  // already, dropped).
  bool Defer(DeferredOrder& order, uint64_t wait_for);
  // Write `written` was answered (`ok`). Returns the orders it releases, in
  // the order they were decided, newer launches of a task in place of older
  // ones. After a failure what waited for it waits for `next` (the write
  // that holds the failed one's records again), or, when nothing is left to
  // write (`next` 0), everything queued is released.
  std::vector<DeferredOrder> Release(uint64_t written, bool ok, uint64_t next);
  size_t size() const { return queue_.size(); }

 private:
  // node, job id, role, index, attempt
  using KillKey = std::tuple<std::string, uint64_t, std::string, int, int>;
  static KillKey KeyOf(const DeferredOrder& kill);

  std::deque<DeferredOrder> queue_;
  // Without a scan of the queue per order (a 10,000-task job queues 10,000
  // launches): each task's newest queued launch, and the kills queued.
  std::map<std::pair<uint64_t, int>, uint64_t> newest_launch_;
  uint64_t launch_generation_ = 0;
  std::set<KillKey> queued_kills_;
};

}  // namespace trainyard::server
