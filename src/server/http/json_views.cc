// The published views as the REST API's JSON (see json_views.h).
#include "server/http/json_views.h"

#include <bit>

#include "api/gpu_faults.h"
#include "api/job_spec.h"
#include "api/restart_budgets.h"
#include "api/states.h"
#include "api/task_limits.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

json PortsJson(const google::protobuf::RepeatedPtrField<v1::PortRange>& ports) {
  json out = json::array();
  for (const auto& p : ports) out.push_back({{"begin", p.begin()}, {"end", p.end()}});
  return out;
}

json GroupsJson(const google::protobuf::RepeatedField<uint64_t>& groups) {
  json out = json::array();
  for (uint64_t g : groups) out.push_back(GpuList(g));
  return out;
}

// The index of the group of `groups` holding GPU `gpu`, -1 when none does.
int GroupOf(const google::protobuf::RepeatedField<uint64_t>& groups, int gpu) {
  for (int i = 0; i < groups.size(); ++i) {
    if ((groups[i] >> gpu) & 1) return i;
  }
  return -1;
}

uint64_t AllGpus(int count) { return count >= 64 ? ~0ull : ((1ull << count) - 1); }

// Its ended attempts with their class, and the restarts left per class
// (-1: unlimited), as describe shows them.
void AttemptsJson(const v1::TaskView& t, json& out) {
  json attempts = json::array();
  for (const v1::AttemptEnd& a : t.attempts()) {
    attempts.push_back({{"attempt", a.attempt()},
                        {"class", api::AttemptClassName(a.attempt_class())},
                        {"exit_code", a.exit_code()},
                        {"signal", a.signal()},
                        {"node", a.node()},
                        {"end_time_unix_ms", a.end_time_ms()},
                        {"restarted", a.restarted()}});
  }
  out["attempts"] = std::move(attempts);
  json budgets = json::array();
  for (const v1::RestartBudgetView& b : t.budgets()) {
    budgets.push_back({{"class", api::AttemptClassName(b.attempt_class())},
                       {"limit", b.limit()},
                       {"spent", b.spent()},
                       {"left", b.left()},
                       {"text", api::BudgetText(b)}});
  }
  out["restart_budgets"] = std::move(budgets);
}

json TaskJson(const v1::TaskView& t) {
  json out = {{"name", t.name()},
              {"role", t.role()},
              {"index", t.index()},
              {"worker_id", t.worker_id()},
              {"node", t.node()},
              {"node_address", t.node_address()},
              {"gpus", GpuList(t.gpu_mask())},
              {"ports", PortsJson(t.ports())},
              {"state", api::TaskStateName(t.state())},
              {"restarts", t.restarts()},
              {"attempt", t.attempt()},
              {"memory_mb", t.memory_mb()},
              {"vcores_milli", t.vcores_milli()},
              {"service", t.service()}};
  if (t.has_last_exit() && (t.last_exit().exit_code() != 0 || t.last_exit().signal() != 0 ||
                            t.last_exit().oom_killed() || !t.last_exit().message().empty() ||
                            api::IsTerminal(t.state()) || t.restarts() > 0)) {
    const v1::TaskExit& e = t.last_exit();
    out["last_exit"] = {{"exit_code", e.exit_code()},
                        {"signal", e.signal()},
                        {"oom_killed", e.oom_killed()},
                        {"message", e.message()}};
  } else {
    out["last_exit"] = nullptr;
  }
  // What its node enforces ("" = not enforced); null until its agent said.
  if (t.has_limits()) {
    const v1::EnforcedLimits& l = t.limits();
    out["limits"] = {{"memory_mb", l.memory_mb()}, {"memory_by", l.memory_by()},
                     {"vcores_milli", l.vcores_milli()}, {"cpu_by", l.cpu_by()},
                     {"pids_max", l.pids_max()}, {"pids_by", l.pids_by()},
                     {"why_not", l.why_not()}, {"text", api::EnforcedLimitsText(l)}};
  } else {
    out["limits"] = nullptr;
  }
  AttemptsJson(t, out);
  return out;
}

bool Placed(const v1::TaskView& t) { return !t.node().empty() && !api::IsTerminal(t.state()); }

}  // namespace

std::vector<int> GpuList(uint64_t mask) {
  std::vector<int> out;
  while (mask) {
    out.push_back(std::countr_zero(mask));
    mask &= mask - 1;
  }
  return out;
}

json JobJson(const v1::JobView& j, bool with_events) {
  json tasks = json::array();
  for (const auto& t : j.tasks()) tasks.push_back(TaskJson(t));
  json out = {{"name", j.name()},
              {"id", j.id()},
              {"user", j.user()},
              {"queue", j.queue()},
              {"priority", api::PriorityName(j.priority())},
              {"framework", api::FrameworkName(j.framework())},
              {"state", api::JobStateName(j.state())},
              {"reason", j.reason()},
              {"pending_reason", j.state() == v1::JOB_QUEUED ? j.reason() : ""},
              {"submit_time_unix_ms", j.submit_time_unix_ms()},
              {"start_time_unix_ms", j.start_time_unix_ms()},
              {"end_time_unix_ms", j.end_time_unix_ms()},
              {"active_deadline_ms", j.active_deadline_ms()},
              {"deadline_unix_ms", j.deadline_unix_ms()},
              {"gpus", j.gpus()},
              {"job_master", j.job_master()},
              {"held", j.held()},
              {"array_job", j.array_job()},
              {"array_index", j.array_index()},
              {"after_ok", json(std::vector<std::string>(j.after_ok().begin(), j.after_ok().end()))},
              {"after_any", json(std::vector<std::string>(j.after_any().begin(), j.after_any().end()))},
              {"tasks", std::move(tasks)}};
  // An open order to checkpoint (a preemption, a time limit) and the step
  // the job resumes at: null when there is none.
  out["checkpoint_order"] = j.checkpoint_order().id() == 0
                                ? json(nullptr)
                                : json{{"id", j.checkpoint_order().id()},
                                       {"deadline_unix_ms", j.checkpoint_order().deadline_unix_ms()},
                                       {"reason", j.checkpoint_order().reason()}};
  out["resume_step"] = j.has_resume_step() ? json(j.resume_step()) : json(nullptr);
  out["checkpoint_dir"] = j.checkpoint_dir();
  out["membership_epoch"] = j.membership_epoch();  // 0: not elastic (docs/elastic.md)
  if (with_events) {
    json events = json::array();
    for (const auto& e : j.events()) {
      events.push_back({{"time_unix_ms", e.time_unix_ms()}, {"kind", e.kind()}, {"text", e.text()}});
    }
    out["events"] = std::move(events);
  }
  return out;
}

void AddGpuHolders(const v1::TaskView& task, const std::string& job, GpuHolders* out) {
  if (!Placed(task)) return;
  for (int g : GpuList(task.gpu_mask())) (*out)[task.node()][g].push_back({task.name(), job});
}

GpuHolders GpuHoldersOf(const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs) {
  GpuHolders out;
  for (const auto& j : live_jobs) {
    for (const auto& t : j->tasks()) AddGpuHolders(t, j->name(), &out);
  }
  return out;
}

uint64_t OutOfServiceGpus(const v1::NodeView& n) {
  return n.info().excluded_gpus() | api::FaultyGpus(n.info()) | n.cordoned_gpus();
}

GpuCounts GpuCountsOf(const v1::NodeView& n) {
  GpuCounts c;
  c.total = n.info().topology().gpu_count();
  uint64_t all = AllGpus(c.total);
  uint64_t excluded = OutOfServiceGpus(n) & all;
  uint64_t free = n.free_gpu_mask() & all & ~excluded;
  c.excluded = std::popcount(excluded);
  c.free = std::popcount(free);
  c.allocated = c.total - c.free - c.excluded;
  uint64_t split = 0;
  for (const auto& share : n.gpu_shares()) {
    if (share.gpu() < 0 || share.gpu() >= c.total || ((excluded >> share.gpu()) & 1)) continue;
    split |= uint64_t{1} << share.gpu();
    c.allocated_milli += share.used_milli();
  }
  c.allocated_milli += int64_t{1000} * std::popcount(all & ~excluded & ~free & ~split);
  return c;
}

std::string NodeStateName(v1::NodeState s) {
  switch (s) {
    case v1::NODE_READY: return "READY";
    case v1::NODE_LOST: return "LOST";
    case v1::NODE_DRAINING: return "DRAINING";
    case v1::NODE_CORDONED: return "CORDONED";
    case v1::NODE_DEGRADED: return "DEGRADED";
    default: return "UNKNOWN";
  }
}

namespace {

// The GPU share held of each GPU of `n` (thousandths): a whole GPU 1000,
// a split one its shares' sum, a free or excluded one 0.
std::vector<int64_t> UsedMilliByGpu(const v1::NodeView& n, int total) {
  std::vector<int64_t> used(total, 0);
  uint64_t out = OutOfServiceGpus(n);
  for (int g = 0; g < total; ++g) {
    bool excluded = (out >> g) & 1;
    if (!excluded && !((n.free_gpu_mask() >> g) & 1)) used[g] = 1000;
  }
  for (const auto& share : n.gpu_shares()) {
    if (share.gpu() >= 0 && share.gpu() < total && used[share.gpu()] > 0) used[share.gpu()] = share.used_milli();
  }
  return used;
}

json HoldersJson(const std::vector<GpuHolder>* holders) {
  json out = json::array();
  if (holders) {
    for (const GpuHolder& h : *holders) out.push_back({{"task", h.task}, {"job", h.job}});
  }
  return out;
}

}  // namespace

json NodeJson(const v1::NodeView& n, const NodeGpuHolders& holders) {
  const v1::NodeInfo& info = n.info();
  const v1::GpuTopology& topo = info.topology();
  GpuCounts c = GpuCountsOf(n);
  std::vector<int64_t> used_milli = UsedMilliByGpu(n, c.total);
  json gpus = json::array();
  uint64_t out = OutOfServiceGpus(n);
  for (int g = 0; g < c.total; ++g) {
    bool excluded = (out >> g) & 1;
    json fault = nullptr;
    for (const auto& f : info.gpu_faults()) {
      if (f.gpu() != g || f.action() == v1::GPU_FAULT_IGNORE) continue;
      fault = {{"xid", f.xid()},
               {"action", f.action() == v1::GPU_FAULT_DRAIN_NODE ? "drain_node" : "exclude_gpu"},
               {"message", f.message()},
               {"time_unix_ms", f.time_unix_ms()}};
    }
    bool free = !excluded && ((n.free_gpu_mask() >> g) & 1);
    // Holders come from the jobs' views, which are published at once; the
    // node's own view may be a moment older (docs/api.md): a GPU it still
    // shows free names no holder, so the answer never says both.
    auto it = holders.find(g);
    const std::vector<GpuHolder>* held = free || it == holders.end() || it->second.empty() ? nullptr : &it->second;
    // Out of service (cordoned, faulty) under a task that still holds it:
    // used, with `cordoned` or `fault` saying why nothing new lands there.
    int64_t milli = used_milli[g];
    if (excluded && held) {
      milli = 1000;
      for (const auto& share : n.gpu_shares()) {
        if (share.gpu() == g) milli = share.used_milli();
      }
    }
    gpus.push_back({{"index", g},
                    {"state", held ? "used" : excluded ? "excluded" : free ? "free" : "used"},
                    {"used_milli", milli},
                    {"task", held ? held->front().task : ""},
                    {"job", held ? held->front().job : ""},
                    {"holders", HoldersJson(held)},
                    {"fault", std::move(fault)},
                    {"cordoned", ((n.cordoned_gpus() >> g) & 1) != 0},
                    {"switch", GroupOf(topo.switches(), g)},
                    {"socket", GroupOf(topo.sockets(), g)},
                    {"nvlink_island", GroupOf(topo.nvlink_islands(), g)}});
  }
  json labels = json::object();
  for (const auto& [k, v] : info.labels()) labels[k] = v;
  json tasks = json::array();
  for (const auto& t : n.tasks()) tasks.push_back(t);
  json images = json::array();
  for (const auto& i : info.images()) images.push_back(i);
  const v1::Resource& cap = info.capacity();
  return {{"name", info.name()},
          {"address", info.address()},
          {"rack", info.rack()},
          {"data_center", info.data_center()},
          {"state", NodeStateName(info.state())},
          {"reason", n.reason()},
          {"labels", std::move(labels)},
          {"capacity",
           {{"memory_mb", cap.memory_mb()}, {"vcores_milli", cap.vcores_milli()}, {"gpus", c.total},
            {"ports", PortsJson(cap.ports())}}},
          {"free", {{"memory_mb", n.free_memory_mb()}, {"vcores_milli", n.free_vcores_milli()}, {"gpus", c.free}}},
          {"gpu_count", c.total},
          {"allocated_gpus", c.allocated},
          {"allocated_gpu_milli", c.allocated_milli},
          {"free_gpus", GpuList(n.free_gpu_mask() & AllGpus(c.total) & ~out)},
          {"excluded_gpus", GpuList(out & AllGpus(c.total))},
          {"faulty_gpus", GpuList(api::FaultyGpus(info) & AllGpus(c.total))},
          {"cordoned_gpus", GpuList(n.cordoned_gpus() & AllGpus(c.total))},
          {"gpus", std::move(gpus)},
          {"topology",
           {{"switches", GroupsJson(topo.switches())},
            {"sockets", GroupsJson(topo.sockets())},
            {"nvlink_islands", GroupsJson(topo.nvlink_islands())}}},
          {"ports_in_use", n.ports_in_use()},
          {"tasks", std::move(tasks)},
          {"oci_runtime", info.oci_runtime()},
          {"images", std::move(images)},
          {"last_heartbeat_unix_ms", n.last_heartbeat_unix_ms()}};
}

namespace {

json UsersJson(const std::map<std::string, UserUse>& users) {
  json out = json::array();
  for (const auto& [user, u] : users) {
    out.push_back({{"user", user},
                   {"running_jobs", u.running_jobs},
                   {"pending_jobs", u.pending_jobs},
                   {"used", {{"memory_mb", u.memory_mb},
                             {"vcores_milli", u.vcores_milli},
                             {"gpus", u.gpus},
                             {"gpu_milli", u.gpu_milli}}}});
  }
  return out;
}

json ResourceJson(const v1::Resource& r) {
  return {{"memory_mb", r.memory_mb()}, {"vcores_milli", r.vcores_milli()}, {"gpus", r.gpus()}};
}

// A queue's use: as ResourceJson, and gpu_milli, the GPU share its tasks
// hold in thousandths (whole GPUs and shares; ControlState::ListQueues).
json UsedJson(const v1::Resource& r) {
  json out = ResourceJson(r);
  out["gpu_milli"] = r.gpu_milli();
  return out;
}

}  // namespace

UseByQueue UseByQueueAndUser(const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs) {
  UseByQueue per_queue;
  for (const auto& j : live_jobs) {
    UserUse& u = per_queue[j->queue()][j->user()];
    if (j->state() == v1::JOB_QUEUED) ++u.pending_jobs;
    else if (!api::IsTerminal(j->state())) ++u.running_jobs;
    for (const auto& t : j->tasks()) {
      if (!Placed(t)) continue;
      u.memory_mb += t.memory_mb();
      u.vcores_milli += t.vcores_milli();
      // A share is part of one GPU: it counts as its thousandths, never as
      // a whole GPU (four 0.25 shares of one GPU are 1000, not 4 GPUs).
      if (t.gpu_milli() > 0) {
        u.gpu_milli += t.gpu_milli();
      } else {
        u.gpus += std::popcount(t.gpu_mask());
        u.gpu_milli += int64_t{1000} * std::popcount(t.gpu_mask());
      }
    }
  }
  return per_queue;
}

json QueuesJson(const v1::ListQueuesResponse& queues, const std::vector<std::shared_ptr<const v1::JobView>>& live_jobs) {
  UseByQueue per_queue = UseByQueueAndUser(live_jobs);
  json list = json::array();
  for (const auto& q : queues.queues()) {
    list.push_back({{"name", q.name()},
                    {"capacity_percent", q.capacity_percent()},
                    {"max_capacity_percent", q.max_capacity_percent()},
                    {"weight", q.weight()},
                    {"max_time_ms", q.max_time_ms()},
                    {"default_time_ms", q.default_time_ms()},
                    {"used", UsedJson(q.used())},
                    {"running_jobs", q.running_jobs()},
                    {"pending_jobs", q.pending_jobs()},
                    {"users", UsersJson(per_queue[q.name()])}});
  }
  return {{"cluster", ResourceJson(queues.cluster())}, {"queues", std::move(list)}};
}

}  // namespace trainyard::server::http
