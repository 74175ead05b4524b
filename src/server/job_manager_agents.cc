// JobManager: agents — registration, heartbeats, task status, logs — and
// what follows from them: job success and failure, node loss, tasks moved to
// another node, and tasks adopted after a server restart.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "core/resources/node_resources.h"
#include "api/convert.h"
#include "server/job_manager.h"
#include "server/job_manager_internal.h"
#include "api/task_env.h"

namespace trainyard::server {
namespace {

// The server's attempt number of the launch a status belongs to.
int LaunchOf(const v1::TaskStatus& st) { return st.has_launch_attempt() ? st.launch_attempt() : st.attempt(); }

std::string DescribeExit(const v1::TaskExit& e) {
  if (e.oom_killed()) return "killed by the kernel for running out of memory (OOM)";
  if (e.signal() != 0) return absl::StrCat("killed by signal ", e.signal());
  if (!e.message().empty() && e.exit_code() <= 0) return e.message();
  return absl::StrCat("exit code ", e.exit_code());
}

absl::Status CheckNodeInfo(const v1::NodeInfo& info) {
  if (info.name().empty()) return absl::InvalidArgumentError("register.name: must not be empty");
  int gpus = info.topology().gpu_count();
  if (gpus < 0 || gpus > 64) {
    return absl::InvalidArgumentError(absl::StrCat("register.topology.gpu_count: ", gpus, " is outside 0..64"));
  }
  if (info.capacity().gpus() != gpus) {
    return absl::InvalidArgumentError(absl::StrCat("register.capacity.gpus: ", info.capacity().gpus(),
                                                   " differs from the topology's ", gpus, " GPUs"));
  }
  if (info.capacity().memory_mb() < 0 || info.capacity().vcores_milli() < 0) {
    return absl::InvalidArgumentError("register.capacity: memory and vcores must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status JobManager::RegisterAgent(const v1::NodeInfo& in, AgentLink* link) {
  if (absl::Status st = CheckNodeInfo(in); !st.ok()) return st;
  std::lock_guard<std::mutex> lock(mu_);
  absl::Time now = clock_->Now();
  auto& slot = nodes_[in.name()];
  if (slot && slot->link && slot->link != link) {
    return absl::AlreadyExistsError(absl::StrCat("node name '", in.name(), "' is already in use by a connected agent at ",
                                                 slot->info.address(), "; give this agent another --name"));
  }
  if (!slot) slot = std::make_unique<NodeRt>();
  NodeRt& node = *slot;
  node.info = in;
  if (node.info.capacity().ports().empty()) {
    auto ports = core::PortRanges::Parse(config_.default_port_range);
    if (ports.ok()) *node.info.mutable_capacity() = api::ToProto([&] {
        core::Resource r = api::ToCore(in.capacity());
        r.ports = *ports;
        return r;
      }());
  }
  node.link = link;
  node.last_heartbeat = now;
  node.registered = now;
  if (absl::Status st = NodeUp(node); !st.ok()) return st;
  Log(LogLevel::kInfo, "server", "node %s registered from %s: %d GPUs, %d MB, %.1f vcores", in.name(),
      in.address(), in.topology().gpu_count(), static_cast<int>(in.capacity().memory_mb()),
      in.capacity().vcores_milli() / 1000.0);
  v1::ServerMessage msg;
  msg.mutable_registered()->set_node(in.name());
  msg.mutable_registered()->set_heartbeat_interval_ms(config_.heartbeat_interval_ms);
  link->Send(std::move(msg));
  // Tasks placed here that never reached the agent (it was away) go again.
  for (auto [job, i] : TasksOn(in.name())) {
    if (!job->ending && !job->recovered_placed && job->rec.tasks(i).state() == v1::TASK_LAUNCHING) LaunchTask(*job, i);
  }
  // Files (hosts, job master address) that changed while it was away.
  if (auto stale = stale_files_.find(in.name()); stale != stale_files_.end()) {
    for (const std::string& name : stale->second) {
      if (JobRt* job = FindJob(name)) PushFilesTo(*job, in.name());
    }
    stale_files_.erase(stale);
  }
  Flush();
  Wake();
  return absl::OkStatus();
}

absl::Status JobManager::NodeUp(NodeRt& node) {
  node.state = v1::NODE_READY;
  if (!node.in_scheduler) {
    absl::StatusOr<core::NodeSpec> spec = api::ToNodeSpec(node.info);
    if (!spec.ok()) return spec.status();
    if (absl::Status st = scheduler_->AddNode(*spec); !st.ok()) return st;
    node.in_scheduler = true;
    uint64_t excluded = node.info.excluded_gpus();
    if (excluded != 0) {
      (void)scheduler_->mutable_state().SetExcludedGpus(node.info.name(), core::GpuSet(excluded));
      node.busy_gpus = excluded;
    }
    AdoptRecoveredTasks(node);
  } else {
    (void)scheduler_->SetSchedulable(node.info.name(), true);
  }
  dirty_nodes_.insert(node.info.name());
  Wake();
  return absl::OkStatus();
}

void JobManager::AgentDisconnected(const std::string& name, AgentLink* link) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second->link != link) return;
  it->second->link = nullptr;
  if (it->second->in_scheduler) (void)scheduler_->SetSchedulable(name, false);
  Log(LogLevel::kWarning, "server", "node %s disconnected; lost after %d ms without it", name,
      config_.node_timeout_ms);
  for (auto& [id, w] : log_waiters_) {
    if (!w->data) {
      w->data.emplace();
      w->data->set_error(absl::StrCat("node ", name, " disconnected"));
    }
  }
  cv_.notify_all();
}

void JobManager::OnHeartbeat(const std::string& name, const v1::Heartbeat& hb) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  NodeRt& node = *it->second;
  node.last_heartbeat = clock_->Now();
  ++stats_.heartbeats;
  if (node.state != v1::NODE_READY && node.link) {
    // Declared lost (silent past the timeout) but its stream is alive: it is
    // back. Its tasks were moved or ended meanwhile; Reconcile below kills the
    // copies it still runs.
    Log(LogLevel::kInfo, "server", "node %s is heard from again", name);
    if (absl::Status st = NodeUp(node); !st.ok()) {
      Log(LogLevel::kWarning, "server", "node %s cannot come back: %s", name, std::string(st.message()));
    }
  }
  core::PortRanges in_use;
  for (const auto& r : hb.ports_in_use()) {
    if (r.begin() >= core::kMinPort && r.begin() <= r.end() && r.end() <= core::kMaxPort) in_use.Add({r.begin(), r.end()});
  }
  node.ports_in_use = std::move(in_use);
  if (hb.busy_gpu_mask() != node.busy_gpus && node.in_scheduler) {
    absl::Status st = scheduler_->mutable_state().SetExcludedGpus(name, core::GpuSet(hb.busy_gpu_mask()));
    if (st.ok()) {
      node.busy_gpus = hb.busy_gpu_mask();
      Wake();
    }
  }
  Reconcile(node, hb);
  Flush();
}

namespace {
// Heartbeats in a row that must leave out a task its agent had shown it has
// before the server takes it as gone from its node. Statuses and heartbeats
// share the agent's one ordered stream, and an agent lists a task's final
// status in its heartbeats for a while after the end, so a task that ended
// normally is never taken as gone.
constexpr int kMissingBeats = 3;
// A launch the agent has not shown it has after this many heartbeats is sent
// again (a launch order lost with a server that died; the agent ignores one
// for a task it already has).
constexpr int kUnackedBeats = 10;
}  // namespace

void JobManager::Reconcile(NodeRt& node, const v1::Heartbeat& hb) {
  absl::Time now = clock_->Now();
  std::set<std::string> reported;
  for (const v1::TaskStatus& st : hb.tasks()) {
    reported.insert(api::TaskName(st.job(), st.role(), st.index()));
    JobRt* job = FindJob(st.job());
    int i = job ? FindTask(*job, st.role(), st.index()) : -1;
    bool ours = i >= 0 && job->rec.tasks(i).node() == node.info.name() &&
                !api::IsTerminal(job->rec.tasks(i).state()) && LaunchOf(st) >= job->launch_base[i];
    if (ours) job->acked[i] = true;
    if (api::IsTerminal(st.state())) {
      // An end whose own report was lost (a broken stream, a server that
      // died before writing it): agents repeat recent ends in heartbeats.
      if (ours) ApplyTaskStatus(node.info.name(), st, now);
      continue;
    }
    // Not ours (any more): rescheduled elsewhere, or unknown to the store.
    // Ours but its job is ending: the kill order may have been lost with a
    // server that died; it goes again (the agent ignores a repeated one).
    if (ours && !job->ending) continue;
    v1::ServerMessage msg;
    v1::KillTask* k = msg.mutable_kill();
    k->set_job(st.job());
    k->set_role(st.role());
    k->set_index(st.index());
    k->set_grace_ms(config_.kill_grace_ms);
    k->set_reason(ours ? job->rec.message() : "the server has no record of this task on this node");
    if (!ours) {
      Log(LogLevel::kWarning, "server", "node %s runs %s it should not; killing it", node.info.name(),
          api::TaskName(st.job(), st.role(), st.index()));
    }
    if (node.link) node.link->Send(std::move(msg));
  }
  // Tasks the server has as live here that the agent no longer runs.
  for (auto [job, i] : TasksOn(node.info.name())) {
    const v1::TaskRecord& t = job->rec.tasks(i);
    if (api::IsTerminal(t.state()) || reported.count(api::TaskName(job->rec.name(), t.role(), t.index()))) {
      job->missing_beats[i] = 0;
      continue;
    }
    ++job->missing_beats[i];
    // A task of a job being stopped that its agent does not have is done,
    // whether or not its launch ever arrived.
    bool stopping = job->ending || job->preempting;
    if ((job->acked[i] || stopping) && job->missing_beats[i] >= kMissingBeats) {
      TaskGone(*job, i, node.info.name(), now);
    } else if (!job->acked[i] && job->missing_beats[i] >= kUnackedBeats && t.state() == v1::TASK_LAUNCHING) {
      Log(LogLevel::kWarning, "server", "node %s has not shown %s after %d heartbeats; sending its launch again",
          node.info.name(), api::TaskName(job->rec.name(), t.role(), t.index()), kUnackedBeats);
      LaunchTask(*job, i);
    }
  }
}

void JobManager::TaskGone(JobRt& job, int i, const std::string& node, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  job.missing_beats[i] = 0;
  std::string name = api::TaskName(job.rec.name(), t->role(), t->index());
  const v1::ReplicaSpec* rs = nullptr;
  for (const auto& r : job.rec.spec().replicas()) {
    if (r.role() == t->role()) rs = &r;
  }
  std::string why = absl::StrCat("node ", node, " no longer runs it (it ended while its report could not be kept)");
  Log(LogLevel::kWarning, "server", "%s: %s", name, why);
  bool restart = rs && rs->restart_policy() != v1::RESTART_NEVER && t->restart_count() < rs->max_restarts();
  if (!job.ending && !job.preempting && restart) {
    t->set_attempt(t->attempt() + 1);
    t->set_restart_count(t->restart_count() + 1);
    t->set_state(v1::TASK_LAUNCHING);
    AddEvent(job, "task_restarted", absl::StrCat(name, ": ", why, "; started again (attempt ", t->attempt() + 1, ")"),
             now);
    LaunchTask(job, i);
    Persist(job);
    return;
  }
  v1::TaskStatus st;
  st.set_job(job.rec.name());
  st.set_role(t->role());
  st.set_index(t->index());
  st.set_attempt(t->attempt());
  st.set_state(job.ending || job.preempting ? v1::TASK_KILLED : v1::TASK_FAILED);
  st.mutable_exit()->set_exit_code(-1);
  st.mutable_exit()->set_message(why);
  TaskEnded(job, i, st, now);
  Persist(job);
}

void JobManager::OnTaskStatus(const std::string& node, const v1::TaskStatus& st) {
  std::lock_guard<std::mutex> lock(mu_);
  ApplyTaskStatus(node, st, clock_->Now());
  Flush();
}

void JobManager::ApplyTaskStatus(const std::string& node, const v1::TaskStatus& st, absl::Time now) {
  JobRt* job = FindJob(st.job());
  int i = job ? FindTask(*job, st.role(), st.index()) : -1;
  if (i < 0 || job->rec.tasks(i).node() != node || LaunchOf(st) < job->launch_base[i]) return;
  v1::TaskRecord* t = job->rec.mutable_tasks(i);
  if (api::IsTerminal(t->state())) return;
  job->acked[i] = true;
  t->set_attempt(std::max(t->attempt(), st.attempt()));
  std::string name = api::TaskName(job->rec.name(), t->role(), t->index());
  switch (st.state()) {
    case v1::TASK_RUNNING: {
      if (t->state() == v1::TASK_RUNNING) break;
      t->set_state(v1::TASK_RUNNING);
      t->set_start_time_ms(ToMs(now));
      if (job->rec.state() == v1::JOB_SCHEDULED) SetJobState(*job, v1::JOB_STARTING, now);
      bool all = std::all_of(job->rec.tasks().begin(), job->rec.tasks().end(), [](const v1::TaskRecord& o) {
        return o.state() == v1::TASK_RUNNING || api::IsTerminal(o.state());
      });
      if (all && job->rec.state() == v1::JOB_STARTING && !job->ending) {
        SetJobState(*job, v1::JOB_RUNNING, now);
        AddEvent(*job, "started", absl::StrCat("all ", job->rec.tasks_size(), " tasks running"), now);
      }
      break;
    }
    case v1::TASK_RESTARTING:
      t->set_state(v1::TASK_RESTARTING);
      t->set_restart_count(t->restart_count() + 1);
      *t->mutable_exit() = st.exit();
      AddEvent(*job, "task_restarted",
               absl::StrCat(name, " ended (", DescribeExit(st.exit()), ") and restarts (attempt ",
                            st.attempt() + 1, ")"),
               now);
      break;
    case v1::TASK_SUCCEEDED:
    case v1::TASK_FAILED:
    case v1::TASK_KILLED:
      TaskEnded(*job, i, st, now);
      break;
    default:
      break;
  }
  Persist(*job);
}

void JobManager::TaskEnded(JobRt& job, int i, const v1::TaskStatus& st, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  t->set_state(st.state());
  *t->mutable_exit() = st.exit();
  t->set_end_time_ms(ToMs(now));
  if (job.in_scheduler) (void)scheduler_->TaskFinished(job.rec.name(), t->role(), t->index());
  Wake();
  if (job.ending || job.preempting) {
    MaybeFinish(job, now);
    return;
  }
  std::string name = api::TaskName(job.rec.name(), t->role(), t->index());
  if (st.state() == v1::TASK_SUCCEEDED) {
    CheckSuccess(job, now);
  } else {
    EndJob(job, v1::JOB_FAILED,
           absl::StrCat("task ", name, " failed: ", DescribeExit(st.exit()), " after ", t->attempt() + 1,
                        t->attempt() == 0 ? " attempt" : " attempts"),
           now);
  }
  MaybeFinish(job, now);
}

void JobManager::CheckSuccess(JobRt& job, absl::Time now) {
  const auto& tasks = job.rec.tasks();
  auto done = [](const v1::TaskRecord& t) { return t.state() == v1::TASK_SUCCEEDED; };
  if (job.rec.spec().success_policy() == v1::SUCCESS_CHIEF) {
    for (const auto& t : tasks) {
      if ((t.role() == "chief" || t.role() == "master") && t.index() == 0 && done(t)) {
        EndJob(job, v1::JOB_SUCCEEDED, absl::StrCat("the ", t.role(), " completed"), now);
        return;
      }
    }
    return;
  }
  bool any_worker = std::any_of(tasks.begin(), tasks.end(), [](const auto& t) { return api::IsWorkerRole(t.role()); });
  for (const auto& t : tasks) {
    if ((!any_worker || api::IsWorkerRole(t.role())) && !done(t)) return;
  }
  EndJob(job, v1::JOB_SUCCEEDED, any_worker ? "all workers completed" : "all tasks completed", now);
}

void JobManager::CheckNodes(absl::Time now) {
  // Rounds run on every event (thousands a second under load); liveness
  // needs checking only at the tick's pace, not on each of them.
  if (now - last_liveness_check_ < absl::Milliseconds(100)) return;
  last_liveness_check_ = now;
  absl::Duration timeout = absl::Milliseconds(config_.node_timeout_ms);
  for (auto& [name, node] : nodes_) {
    if (node->state == v1::NODE_READY && now - node->last_heartbeat > timeout) NodeLost(*node, now);
  }
  // Tasks recovered from the store whose node never came back.
  if (now - started_ > timeout) {
    for (auto& [name, node] : nodes_) {
      if (node->state == v1::NODE_LOST && !node->in_scheduler && node->registered == absl::Time()) {
        node->registered = now;  // handle once
        NodeLost(*node, now);
      }
    }
  }
}

void JobManager::NodeLost(NodeRt& node, absl::Time now) {
  const std::string name = node.info.name();
  node.state = v1::NODE_LOST;
  Log(LogLevel::kWarning, "server", "node %s lost: no heartbeat for %d ms", name, config_.node_timeout_ms);
  std::vector<std::pair<JobRt*, int>> moved;
  for (auto [job, i] : TasksOn(name)) {
    v1::TaskRecord* t = job->rec.mutable_tasks(i);
    if (api::IsTerminal(t->state())) continue;
    if (job->in_scheduler) (void)scheduler_->TaskFinished(job->rec.name(), t->role(), t->index());
    moved.emplace_back(job, i);
  }
  if (node.in_scheduler) {
    std::vector<std::string> requeued;
    (void)scheduler_->RemoveNode(name, &requeued);
    node.in_scheduler = false;
  }
  for (auto [job, i] : moved) {
    v1::TaskRecord* t = job->rec.mutable_tasks(i);
    std::string tname = api::TaskName(job->rec.name(), t->role(), t->index());
    const v1::ReplicaSpec* rs = nullptr;
    for (const auto& r : job->rec.spec().replicas()) {
      if (r.role() == t->role()) rs = &r;
    }
    if (job->ending || job->preempting) {
      t->set_state(v1::TASK_KILLED);
      MaybeFinish(*job, now);
    } else if (!rs || rs->restart_policy() == v1::RESTART_NEVER) {
      t->set_state(v1::TASK_FAILED);
      t->mutable_exit()->set_message(absl::StrCat("lost with node ", name));
      EndJob(*job, v1::JOB_FAILED, absl::StrCat("task ", tname, " was lost with node ", name,
                                                " (restart policy Never)"), now);
    } else if (!ReplaceTask(*job, i, now)) {
      Requeue(*job, absl::StrCat("task ", tname, " was lost with node ", name, " and no other node can take it now"),
              now);
    }
    Persist(*job);
  }
  dirty_nodes_.insert(name);
  Wake();
}

bool JobManager::ReplaceTask(JobRt& job, int i, absl::Time now) {
  core::ClusterState& cs = scheduler_->mutable_state();
  auto slot = cs.FindJob(job.rec.name());
  if (!slot) return false;
  const core::JobState& js = cs.job(*slot);
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  int role = -1;
  for (size_t r = 0; r < js.request.roles.size(); ++r) {
    if (js.request.roles[r].name == t->role()) role = static_cast<int>(r);
  }
  if (role < 0) return false;
  const core::RoleRequest& rr = js.request.roles[role];
  for (core::NodeId n = 0; n < cs.NodeSlots(); ++n) {
    const core::NodeState& ns = cs.node(n);
    if (!ns.present || !ns.schedulable || !rr.node_selector.Matches(cs.labels(n))) continue;
    if (!rr.rack.empty() && (ns.rack < 0 || cs.racks()[ns.rack] != rr.rack)) continue;
    core::NodeResources nr{ns.capacity, cs.topology(n), ns.free};
    absl::StatusOr<core::TaskPlacement> p = core::PlaceOnNode(nr, rr.resource);
    if (!p.ok()) continue;
    cs.AllocateTask(*slot, role, t->index(), n, p->allocation);
    std::string old = t->node();
    t->set_node(ns.name);
    IndexTask(job, ns.name);
    *t->mutable_allocation() = api::ToProto(p->allocation);
    t->set_state(v1::TASK_LAUNCHING);
    t->set_attempt(t->attempt() + 1);
    t->set_restart_count(t->restart_count() + 1);
    // A moved job master has a new address: the others learn it from the
    // "jobmaster" file PushFiles rewrites below.
    if (t->role() == "jobmaster") job.job_master = JobMasterAddress(job);
    AddEvent(job, "task_moved", absl::StrCat(api::TaskName(job.rec.name(), t->role(), t->index()), " was lost with node ",
                                             old, "; restarted on ", ns.name, " (attempt ", t->attempt() + 1, ")"),
             now);
    LaunchTask(job, i);
    PushFiles(job, i);  // the others' hosts files now name the new node
    return true;
  }
  return false;
}

void JobManager::AdoptRecoveredTasks(NodeRt& node) {
  core::ClusterState& cs = scheduler_->mutable_state();
  auto n = cs.FindNode(node.info.name());
  if (!n) return;
  for (auto [job, i] : TasksOn(node.info.name())) {
    const v1::TaskRecord& t = job->rec.tasks(i);
    if (!job->recovered_placed || api::IsTerminal(t.state())) continue;
    auto slot = cs.FindJob(job->rec.name());
    if (!slot) continue;
    const core::JobState& js = cs.job(*slot);
    for (size_t r = 0; r < js.request.roles.size(); ++r) {
      if (js.request.roles[r].name != t.role()) continue;
      core::Resource a = api::ToCore(t.allocation());
      if (core::FitsIn(a, cs.node(*n).free)) {
        cs.AllocateTask(*slot, static_cast<int>(r), t.index(), *n, a);
      } else {
        Log(LogLevel::kError, "server", "%s cannot be adopted on %s: its allocation is not free there",
            api::TaskName(job->rec.name(), t.role(), t.index()), node.info.name());
      }
    }
  }
}

void JobManager::OnLogData(const v1::LogData& data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = log_waiters_.find(data.request_id());
  if (it == log_waiters_.end()) return;
  it->second->data = data;
  cv_.notify_all();
}

absl::StatusOr<v1::LogData> JobManager::ReadLog(const std::string& jname, const std::string& role, int index,
                                                int attempt, int64_t offset, int max_bytes, bool stderr) {
  std::unique_lock<std::mutex> lock(mu_);
  JobRt* job = FindJob(jname);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", jname, "' does not exist"));
  int i = FindTask(*job, role, index);
  if (i < 0) return absl::NotFoundError(absl::StrCat("job ", jname, " has no task ", role, "/", index));
  const v1::TaskRecord& t = job->rec.tasks(i);
  if (t.node().empty()) return absl::FailedPreconditionError(absl::StrCat(api::TaskName(jname, role, index), " never ran"));
  auto nit = nodes_.find(t.node());
  if (nit == nodes_.end() || !nit->second->link) {
    return absl::UnavailableError(absl::StrCat("node ", t.node(), " that keeps the logs is not connected"));
  }
  uint64_t id = next_log_request_++;
  auto waiter = std::make_shared<LogWaiter>();
  log_waiters_[id] = waiter;
  v1::ServerMessage msg;
  v1::LogRead* r = msg.mutable_read_log();
  r->set_request_id(id);
  r->set_job(jname);
  r->set_role(role);
  r->set_index(index);
  r->set_attempt(attempt < 0 ? t.attempt() : attempt);
  r->set_offset(offset);
  r->set_max_bytes(max_bytes);
  r->set_stderr(stderr);
  nit->second->link->Send(std::move(msg));
  bool ok = cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiter->data.has_value(); });
  log_waiters_.erase(id);
  if (!ok) return absl::DeadlineExceededError(absl::StrCat("node ", t.node(), " did not answer for the log in 10 s"));
  if (!waiter->data->error().empty()) return absl::NotFoundError(waiter->data->error());
  return *waiter->data;
}

absl::StatusOr<std::vector<std::pair<std::string, int>>> JobManager::TasksOf(const std::string& jname) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRt* job = FindJob(jname);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", jname, "' does not exist"));
  std::vector<std::pair<std::string, int>> out;
  for (const auto& t : job->rec.tasks()) out.emplace_back(t.role(), t.index());
  return out;
}

}  // namespace trainyard::server
