// The core's placement as an FGD protocol policy; see fgd_core_policy.h.
#include "sim/fgd_core_policy.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/scheduler/scheduler.h"
#include "sim/cluster_build.h"

namespace trainyard::sim {
namespace {

class CorePolicy : public ProtoPolicy {
 public:
  CorePolicy(std::unique_ptr<core::Scheduler> scheduler, const Trace& trace,
             absl::flat_hash_map<std::string, int32_t> node_of)
      : scheduler_(std::move(scheduler)), trace_(trace), node_of_(std::move(node_of)) {}

  bool Choose(const std::vector<ProtoNode>& nodes, const ProtoTask& t, ProtoChoice* out) override {
    (void)nodes;
    if (t.job < 0 || static_cast<size_t>(t.job) >= trace_.jobs.size()) return false;
    absl::Time now = absl::UnixEpoch() + absl::Seconds(++arrivals_);
    core::JobRequest job = ToCoreJob(trace_.jobs[t.job], now);
    job.id = absl::StrCat("task-", arrivals_);
    // The task's GPUs as the protocol reads them (a share below one GPU).
    core::Resource& r = job.roles.front().resource;
    r.gpus = t.shape.gpus;
    r.gpu_milli = t.shape.gpu_milli;
    if (!scheduler_->AddJob(job).ok()) return false;
    core::Decisions d = scheduler_->Schedule(now);
    if (d.placements.empty() || d.placements.front().tasks.empty()) {
      (void)scheduler_->RemoveJob(job.id);  // added just above: it is there to remove
      return false;
    }
    const core::TaskAssignment& a = d.placements.front().tasks.front();
    auto it = node_of_.find(a.node);
    if (it == node_of_.end()) return false;
    out->node = it->second;
    out->pick = core::GpuPick{.gpus = core::GpuSet(a.allocation.gpu_mask),
                              .milli = a.allocation.IsGpuShare() ? a.allocation.gpu_milli : 1000};
    if (a.allocation.gpu_mask == 0) out->pick = core::GpuPick{};
    return true;
  }

 private:
  std::unique_ptr<core::Scheduler> scheduler_;
  const Trace& trace_;
  absl::flat_hash_map<std::string, int32_t> node_of_;
  int64_t arrivals_ = 0;
};

}  // namespace

bool IsCorePolicy(const std::string& name) {
  return name == kTrainyardPolicy || absl::StartsWith(name, kCorePolicyPrefix);
}

std::string CorePlacementOf(const std::string& name) {
  return name == kTrainyardPolicy ? "fragmentation" : name.substr(sizeof(kCorePolicyPrefix) - 1);
}

absl::StatusOr<std::unique_ptr<core::Scheduler>> MakeCoreScheduler(const std::string& name, uint64_t seed,
                                                                    const NodeList& nodes, const Trace& trace) {
  core::SchedulerOptions opt;
  opt.placement = CorePlacementOf(name);
  opt.enable_preemption = false;
  opt.reservation_wait = absl::InfiniteDuration();
  opt.port_quarantine = absl::ZeroDuration();
  opt.seed = seed;
  opt.limits = LimitsForNodes(nodes);
  opt.queues = QueuesForTrace(trace);
  auto scheduler = core::Scheduler::Create(opt);
  if (!scheduler.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--fgd-policies ", name, ": ", scheduler.status().message()));
  }
  for (const NodeSpec& n : nodes.nodes) {
    auto spec = ToCoreNode(n, nodes.source);
    if (!spec.ok()) return spec.status();
    if (auto s = (*scheduler)->AddNode(*spec); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(nodes.source, ":", n.line, ": ", s.message()));
    }
  }
  return scheduler;
}

absl::StatusOr<std::unique_ptr<ProtoPolicy>> MakeCorePolicy(const std::string& name, uint64_t seed,
                                                           const NodeList& nodes,
                                                           const Trace& trace) {
  auto scheduler = MakeCoreScheduler(name, seed, nodes, trace);
  if (!scheduler.ok()) return scheduler.status();
  absl::flat_hash_map<std::string, int32_t> node_of;
  for (size_t i = 0; i < nodes.nodes.size(); ++i) node_of[nodes.nodes[i].name] = static_cast<int32_t>(i);
  return std::make_unique<CorePolicy>(*std::move(scheduler), trace, std::move(node_of));
}

}  // namespace trainyard::sim
