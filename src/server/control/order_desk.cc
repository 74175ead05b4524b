// When an order to an agent goes out (order_desk.h).
#include "server/control/order_desk.h"

#include <utility>

#include "api/states.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

uint64_t OrderDesk::WriteToWaitFor() const {
  if (persister_.pending()) return persister_.sent() + 1;
  if (persister_.in_flight()) return persister_.sent();
  return 0;
}

void OrderDesk::Kill(const std::string& node, const v1::KillTask& kill) {
  DeferredOrder order;
  order.kind = DeferredOrder::kKill;
  order.node = node;
  order.kill = kill;
  Order(std::move(order));
}

void OrderDesk::Order(DeferredOrder order) {
  if (!after_durable_ || !queue_.Defer(order, WriteToWaitFor())) Send(order, /*deferred=*/false);
}

void OrderDesk::ReleaseHeld() {
  registering_.clear();
  std::vector<DeferredOrder> held;
  held.swap(held_);
  for (DeferredOrder& d : held) Send(d, /*deferred=*/false);
}

void OrderDesk::Send(DeferredOrder& d, bool deferred) {
  if (!registering_.empty() && d.node == registering_) {
    held_.push_back(std::move(d));
    return;
  }
  const NodeRt* node = nodes_.Find(d.node);
  if (node == nullptr || !node->connected()) return;
  switch (d.kind) {
    case DeferredOrder::kKill:
      backend_->Kill(d.node, d.kill);
      return;
    case DeferredOrder::kFiles:
      backend_->UpdateFiles(d.node, d.files);
      return;
    case DeferredOrder::kLaunch: {
      if (!deferred) {
        backend_->Launch(d.node, std::move(d.spec));
        return;
      }
      // Only if the task is still placed as the launch says and its job is
      // not being stopped (killed, preempted, moved off a node, or placed
      // again meanwhile: a task never launched is done once its agent never
      // shows it).
      JobRt* job = FindJobIn(jobs_, d.job);
      if (job == nullptr || job->rec.id() != d.job_id || d.task >= job->rec.tasks_size()) return;
      const v1::TaskRecord& t = job->rec.tasks(d.task);
      if (job->ending || job->preempting || job->task_rt[d.task].evicting || t.node() != d.node ||
          t.attempt() != d.spec.attempt() || api::IsTerminal(t.state()) ||
          job->task_rt[d.task].launch_base != d.spec.attempt()) {
        return;
      }
      job->task_rt[d.task].missing_beats = 0;  // its heartbeats count from now
      backend_->Launch(d.node, std::move(d.spec));
      return;
    }
  }
}

void OrderDesk::WriteDone(uint64_t written, bool ok) {
  for (DeferredOrder& d : queue_.Release(written, ok, ok ? 0 : WriteToWaitFor())) Send(d, /*deferred=*/true);
}

}  // namespace trainyard::server
