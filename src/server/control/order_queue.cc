// OrderQueue: orders that wait for the write holding what led to them
// (order_queue.h).
#include "server/control/order_queue.h"

#include <algorithm>
#include <limits>

namespace trainyard::server {

OrderQueue::KillKey OrderQueue::KeyOf(const DeferredOrder& d) {
  return {d.node, d.kill.job_id(), d.kill.role(), d.kill.index(), d.kill.attempt()};
}

bool OrderQueue::Defer(DeferredOrder& order, uint64_t wait_for) {
  order.after = wait_for;
  if (order.after == 0 && queue_.empty()) return false;
  if (order.kind == DeferredOrder::kKill && !queued_kills_.insert(KeyOf(order)).second) {
    return true;  // a heartbeat's kill of a stray, asked again
  }
  if (order.kind == DeferredOrder::kLaunch) {
    // Launched again (a resend, a new attempt): the newer one goes.
    order.generation = ++launch_generation_;
    newest_launch_[{order.job_id, order.task}] = order.generation;
  }
  // Queued behind what waits already: never before an order decided earlier.
  if (!queue_.empty()) order.after = std::max(order.after, queue_.back().after);
  queue_.push_back(std::move(order));
  return true;
}

std::vector<DeferredOrder> OrderQueue::Release(uint64_t written, bool ok, uint64_t next) {
  std::vector<DeferredOrder> out;
  if (!ok) {
    // The failed write's records are marked again and go with the next
    // write; what waited for it waits for that one (or, when nothing is
    // left to write, goes now).
    for (DeferredOrder& d : queue_) {
      if (d.after <= written) d.after = next;
    }
    if (next != 0) return out;
    written = std::numeric_limits<uint64_t>::max();
  }
  while (!queue_.empty() && queue_.front().after <= written) {
    DeferredOrder d = std::move(queue_.front());
    queue_.pop_front();
    if (d.kind == DeferredOrder::kKill) queued_kills_.erase(KeyOf(d));
    if (d.kind == DeferredOrder::kLaunch) {
      auto newest = newest_launch_.find({d.job_id, d.task});
      if (newest == newest_launch_.end() || newest->second != d.generation) continue;  // a newer one is queued
      newest_launch_.erase(newest);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace trainyard::server
