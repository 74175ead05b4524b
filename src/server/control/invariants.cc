// The control state's invariants (invariants.h).
#include "server/control/invariants.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "api/convert.h"
#include "api/roles.h"
#include "api/states.h"
#include "core/resources/gpu_set.h"
#include "server/control/job_rt.h"

namespace trainyard::server {
namespace {

absl::Status Broken(const std::string& what) { return absl::InternalError(what); }

// Whole GPUs a task holds (a share holds part of one GPU, not the whole).
uint64_t WholeGpus(const v1::Resource& r) { return r.gpu_milli() > 0 ? 0 : r.gpu_mask(); }

// One job's part of CheckControlInvariants.
absl::Status CheckJob(const JobRt& job, const NodeTable& nodes, const core::ClusterState& cs) {
  const v1::JobRecord& rec = job.rec;
  const std::string& name = rec.name();
  size_t n = static_cast<size_t>(rec.tasks_size());
  if (job.task_rt.size() != n) {
    return Broken(absl::StrCat("job ", name, ": per-task bookkeeping is not sized to its tasks"));
  }
  bool terminal = api::IsTerminal(rec.state());
  for (const v1::TaskRecord& t : rec.tasks()) {
    std::string task = api::TaskName(name, t.role(), t.index());
    bool live = !api::IsTerminal(t.state()) && t.state() != v1::TASK_PENDING;
    if (t.state() == v1::TASK_PENDING && !t.node().empty()) {
      return Broken(absl::StrCat(task, " is PENDING but placed on ", t.node()));
    }
    if (live && t.node().empty()) return Broken(absl::StrCat(task, " is live on no node"));
    if (live && !nodes.Find(t.node())) return Broken(absl::StrCat(task, " is live on unknown node ", t.node()));
    if (rec.state() == v1::JOB_QUEUED && t.state() != v1::TASK_PENDING) {
      return Broken(absl::StrCat(task, " is ", api::TaskStateName(t.state()), " in queued job ", name));
    }
    if (terminal && !job.ending && !api::IsTerminal(t.state())) {
      return Broken(absl::StrCat(task, " is live in ended job ", name, " that stops nothing"));
    }
  }
  if (!job.in_scheduler) {
    if (cs.FindJob(name)) return Broken(absl::StrCat("job ", name, " is in the core but not known so"));
    return absl::OkStatus();
  }
  std::optional<core::JobSlot> slot = cs.FindJob(name);
  if (!slot) return Broken(absl::StrCat("job ", name, " is taken as in the core but is not there"));
  const core::JobState& cj = cs.job(*slot);
  if ((cj.phase == core::JobPhase::kPending) != (rec.state() == v1::JOB_QUEUED) && !terminal) {
    return Broken(absl::StrCat("job ", name, " is ", api::JobStateName(rec.state()), " but the core has it ",
                               cj.phase == core::JobPhase::kPending ? "pending" : "placed"));
  }
  // What the core holds for the job is exactly its live tasks on nodes the
  // core knows, with the same GPUs.
  std::map<std::pair<std::string, int>, const core::PlacedTask*> held;
  for (const core::PlacedTask& p : cj.tasks) {
    if (p.node >= 0) held[{cj.request.roles[p.role].name, p.index}] = &p;
  }
  for (const v1::TaskRecord& t : rec.tasks()) {
    std::string task = api::TaskName(name, t.role(), t.index());
    auto it = held.find({t.role(), t.index()});
    bool live = !api::IsTerminal(t.state()) && t.state() != v1::TASK_PENDING;
    const NodeRt* node = live ? nodes.Find(t.node()) : nullptr;
    if (it == held.end()) {
      if (node && node->in_scheduler) return Broken(absl::StrCat(task, " is live on ", t.node(), " but holds nothing there"));
      continue;
    }
    const core::PlacedTask& p = *it->second;
    if (!live) return Broken(absl::StrCat(task, " is ", api::TaskStateName(t.state()), " but still holds resources"));
    const std::string& where = cs.node(p.node).name;
    if (where != t.node()) return Broken(absl::StrCat(task, " is on ", t.node(), " but holds resources on ", where));
    if (p.allocation.gpu_mask != t.allocation().gpu_mask()) {
      return Broken(absl::StrCat(task, " holds other GPUs than its record names"));
    }
    held.erase(it);
  }
  if (!held.empty()) return Broken(absl::StrCat("job ", name, " holds resources for a task it does not have"));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckControlInvariants(const JobMap& jobs, const NodeTable& nodes, const core::ClusterState& cs) {
  // Whole GPUs per node as the records give them out: never twice.
  std::map<std::string, uint64_t> given;
  for (const auto& [name, job] : jobs) {
    if (!job) continue;
    if (absl::Status st = CheckJob(*job, nodes, cs); !st.ok()) return st;
    for (const v1::TaskRecord& t : job->rec.tasks()) {
      if (api::IsTerminal(t.state()) || t.node().empty()) continue;
      uint64_t gpus = WholeGpus(t.allocation());
      if ((given[t.node()] & gpus) != 0) {
        return Broken(absl::StrCat("a GPU of node ", t.node(), " is given twice (", api::TaskName(name, t.role(), t.index()),
                                   ")"));
      }
      given[t.node()] |= gpus;
    }
  }
  for (const auto& [name, node] : nodes) {
    std::optional<core::NodeId> n = cs.FindNode(name);
    if (node->in_scheduler != n.has_value()) {
      return Broken(absl::StrCat("node ", name, node->in_scheduler ? " is not in the core" : " is in the core unknown"));
    }
    if (!n) continue;
    const core::NodeState& ns = cs.node(*n);
    int64_t memory = 0;
    uint64_t held = 0;
    for (const core::NodeTask& nt : ns.tasks) {
      memory += nt.memory_mb;
      const core::JobState& cj = cs.job(nt.job);
      uint64_t gpus = nt.gpu_milli > 0 ? 0 : cj.tasks[nt.pos].allocation.gpu_mask;
      if ((held & gpus) != 0) return Broken(absl::StrCat("the core gives a GPU of node ", name, " twice"));
      held |= gpus;
    }
    if ((ns.free.gpu_mask & held) != 0) return Broken(absl::StrCat("node ", name, ": a held GPU is also free"));
    if ((ns.free.gpu_mask & ns.excluded) != 0) {
      return Broken(absl::StrCat("node ", name, ": a GPU out of service (busy, faulty, cordoned) is free"));
    }
    if (ns.free.gpus != core::GpuSet(ns.free.gpu_mask).Count()) {
      return Broken(absl::StrCat("node ", name, ": ", ns.free.gpus, " free GPUs counted, ",
                                 core::GpuSet(ns.free.gpu_mask).ToString(), " free"));
    }
    // What the server asks the core to keep out of service is out.
    if (node->in_scheduler && ns.excluded != (node->busy_gpus & ns.capacity.gpu_mask)) {
      return Broken(absl::StrCat("node ", name, ": the core excludes GPUs ", core::GpuSet(ns.excluded).ToString(),
                                 ", the server ", core::GpuSet(node->busy_gpus).ToString()));
    }
    if (ns.free.memory_mb != ns.capacity.memory_mb - memory) {
      return Broken(absl::StrCat("node ", name, ": free memory ", ns.free.memory_mb, " is not its capacity ",
                                 ns.capacity.memory_mb, " less its tasks' ", memory));
    }
  }
  return absl::OkStatus();
}

}  // namespace trainyard::server
