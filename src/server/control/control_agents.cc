// ControlState: agents — registration, heartbeats, task statuses and
// reconciliation — and what follows from them: job success and failure,
// tasks restarted, and tasks their agent no longer has.
#include <signal.h>

#include <algorithm>
#include <optional>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "api/convert.h"
#include "api/restart_budgets.h"
#include "api/roles.h"
#include "common/logging.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"
#include "server/control/reconcile_rule.h"

namespace trainyard::server {
namespace {

// The server's attempt number of the launch a status belongs to.
int LaunchOf(const v1::TaskStatus& st) { return st.has_launch_attempt() ? st.launch_attempt() : st.attempt(); }

// False for a status of another job that had this name (deleted since);
// a status that does not say (0) is taken to be the job's.
bool SameJob(const v1::TaskStatus& st, uint64_t id) { return st.job_id() == 0 || st.job_id() == id; }

std::string DescribeExit(const v1::TaskExit& e) {
  if (e.oom_killed()) return "killed by the kernel for running out of memory (OOM)";
  if (e.signal() != 0) return absl::StrCat("killed by signal ", e.signal());
  if (!e.message().empty() && e.exit_code() <= 0) return e.message();
  return absl::StrCat("exit code ", e.exit_code());
}

// Agents send delta heartbeats (only what changed in their GPU and port
// use) and a full one at least every this many beats.
constexpr int kFullHeartbeatEvery = 30;

// A job master that the server stopped at its job's end and that ended as
// asked: exit code 0 (its answer to SIGTERM) or the SIGTERM itself.
bool MasterStoppedWithItsJob(const v1::TaskRecord& t, const v1::TaskStatus& st) {
  if (!api::IsJobMasterRole(t.role()) || st.state() != v1::TASK_KILLED) return false;
  const v1::TaskExit& e = st.exit();
  return !e.oom_killed() && ((e.signal() == 0 && e.exit_code() == 0) || e.signal() == SIGTERM);
}

}  // namespace

absl::Status ControlState::RegisterAgent(const v1::NodeInfo& in, uint64_t session, absl::Time now) {
  if (absl::Status st = CheckNodeInfo(in); !st.ok()) return st;
  NodeRt* known = FindNode(in.name());
  if (known && known->connected() && known->session != session) {
    return absl::AlreadyExistsError(absl::StrCat("node name '", in.name(), "' is already in use by a connected agent at ",
                                                 known->info.address(), "; give this agent another --name"));
  }
  NodeRt& node = known ? *known : AddNode(in.name(), std::make_unique<NodeRt>());
  v1::NodeInfo old_info = node.info;
  node.info = in;
  LimitGpuFaults(&node.info);
  node.info.clear_ports_in_use();  // a moment's state: not for the store
  core::Resource capacity = api::ToCore(in.capacity());
  std::string ports_warning;
  capacity.ports = ServingPorts(in, config_.default_port_range, &ports_warning);
  if (!ports_warning.empty()) Say(LogLevel::kWarning, "%s", ports_warning);
  *node.info.mutable_capacity() = api::ToProto(capacity);
  const uint64_t old_session = node.session;
  node.session = session;
  // What the registration orders the node (kills of tasks it can no longer
  // hold) waits for its answer: an agent takes anything else first as a
  // refusal.
  orders_.HoldFor(in.name());
  node.last_heartbeat = node.heard = now;
  node.registered = now;
  node.agent_stopping = node.drained_sent = false;
  node.stop_reason.clear();
  // An agent that registers again (restarted after its node was fixed) is
  // tried again; failing launches take it out once more.
  node.launch_faults = 0;
  node.fault_reason.clear();
  node.reported_busy_gpus = in.excluded_gpus();
  absl::Status up = node.in_scheduler ? RefreshNodeSpec(node, old_info) : absl::OkStatus();
  if (up.ok()) up = NodeUp(node);
  if (!up.ok()) {
    // Refused: the stream that asked is closed without a disconnect (it
    // never registered), so it must not stay the node's session, or every
    // later registration of the node would be refused as a duplicate.
    node.session = old_session;
    UpdateSchedulable(node);
    orders_.ReleaseHeld();  // to the stream before, if it is still there
    return up;
  }
  SetPortsInUse(node, RangesOf(in.ports_in_use()));
  Say(LogLevel::kInfo, "node %s registered from %s: %d GPUs, %d MB, %.1f vcores", in.name(),
      in.address(), in.topology().gpu_count(), static_cast<int>(in.capacity().memory_mb()),
      in.capacity().vcores_milli() / 1000.0);
  v1::Registered ack;
  ack.set_node(in.name());
  ack.set_heartbeat_interval_ms(config_.heartbeat_interval_ms);
  ack.set_full_heartbeat_every(kFullHeartbeatEvery);
  ack.set_quiet_heartbeat_interval_ms(QuietHeartbeatIntervalMs(config_));
  *ack.mutable_serving_ports() = node.info.capacity().ports();
  ack.set_sample_interval_ms(config_.task_sample_interval_ms);
  backend_->Registered(in.name(), session, ack);
  orders_.ReleaseHeld();
  CatchUp(node, now);
  wants_round_ = true;
  return absl::OkStatus();
}

void ControlState::CatchUp(NodeRt& node, absl::Time now) {
  const std::string name = node.info.name();
  // Its GPU faults (an agent that found some before this registration):
  // after the answer, so kill orders for the tasks on them come after it.
  ApplyGpuFaults(node, now);
  SyncExcludedGpus(node);
  // Tasks placed here that never reached the agent (it was away) go again.
  std::optional<EnvContext> ctx;  // of ctx_job: one per job, not one per task
  const JobRt* ctx_job = nullptr;
  for (auto [job, i] : TasksOn(name)) {
    // Not one told to leave (a drain, a GPU fault): it goes elsewhere once
    // its kill is answered or it is found gone.
    if (!job->ending && !job->recovered_placed && !job->task_rt[i].evicting &&
        job->rec.tasks(i).state() == v1::TASK_LAUNCHING) {
      if (ctx_job != job) ctx = EnvContextFor(*job, nodes_, config_.checkpoint_root), ctx_job = job;
      LaunchTask(*job, i, &*ctx);
    }
    // Told to leave while the node was away (drained): the order goes again.
    const v1::TaskRecord& t = job->rec.tasks(i);
    if (job->task_rt[i].evicting) {
      std::string why = GpuFaultWhy(node, t.allocation().gpu_mask());
      SendKill(name, job->rec.name(), job->rec.id(), t.role(), t.index(), config_.kill_grace_ms,
               why.empty() ? absl::StrCat("node ", name, " is drained") : why);
    }
  }
  // Files (hosts, job master address) that changed while it was away.
  if (auto stale = stale_files_.find(name); stale != stale_files_.end()) {
    for (const std::string& job_name : stale->second) {
      if (JobRt* job = FindJob(job_name)) PushFilesTo(*job, name);
    }
    stale_files_.erase(stale);
  }
}

void ControlState::AgentDisconnected(const std::string& name, uint64_t session) {
  NodeRt* n = FindNode(name);
  if (!n || n->session != session) return;
  n->session = 0;
  // The node stays known until it is declared lost; only new placements stop.
  UpdateSchedulable(*n);
  Say(LogLevel::kWarning, "node %s disconnected; lost after %d ms without it", name,
      config_.node_timeout_ms);
}

void ControlState::OnHeartbeat(const std::string& name, const v1::Heartbeat& hb, absl::Time now) {
  NodeRt* found = FindNode(name);
  if (!found) return;
  NodeRt& node = *found;
  if (node.connected()) stats_.heartbeat_gap_seconds.Observe(std::max(0.0, absl::ToDoubleSeconds(now - node.last_heartbeat)));
  node.last_heartbeat = node.heard = now;
  ++stats_.heartbeats;
  publisher_.HeartbeatsMoved();
  if (node.state != v1::NODE_READY && node.connected()) {
    // Declared lost (silent past the timeout) but its stream is alive: it is
    // back. Its tasks were moved or ended meanwhile; Reconcile below kills the
    // copies it still runs.
    Say(LogLevel::kInfo, "node %s is heard from again", name);
    if (absl::Status st = NodeUp(node); !st.ok()) {
      Say(LogLevel::kWarning, "node %s cannot come back: %s", name, std::string(st.message()));
    }
  }
  // A delta heartbeat leaves out what its last full one said (the GPU and
  // port use); an unset data_free_mb is unchanged (CheckDisk keeps it).
  if (!hb.use_unchanged()) {
    SetPortsInUse(node, RangesOf(hb.ports_in_use()));
    node.reported_busy_gpus = hb.busy_gpu_mask();
  }
  CheckDisk(node, hb);
  if (hb.images_given()) {
    // At most a few hundred references of a few hundred bytes shown.
    node.info.mutable_images()->Assign(hb.images().begin(),
                                       hb.images().begin() + std::min(hb.images_size(), 256));
    for (std::string& image : *node.info.mutable_images()) {
      if (image.size() > 512) image.resize(512);
    }
    publisher_.TouchOwnView(node);
  }
  if (hb.gpu_faults_given()) {
    *node.info.mutable_gpu_faults() = hb.gpu_faults();
    LimitGpuFaults(&node.info);
    publisher_.TouchOwnView(node);
    ApplyGpuFaults(node, now);
  }
  SyncExcludedGpus(node);
  Reconcile(node, hb, now);
  if (node.agent_stopping) MaybeDrained(name);
}

void ControlState::SetPortsInUse(NodeRt& node, core::PortRanges in_use) {
  // Only the ports tasks are placed on (an agent that predates
  // Registered.serving_ports lists all its sockets). No round is asked for:
  // sockets come and go on a busy node with every heartbeat, and a job
  // waiting for a port that closed is tried at the loop's next periodic
  // round.
  in_use = in_use.Intersect(RangesOf(node.info.capacity().ports()));
  if (in_use == node.ports_in_use) return;
  node.ports_in_use = std::move(in_use);
  // Its own view only: a busy node's sockets change with most heartbeats,
  // and checking every node's view for each would scale with the cluster.
  publisher_.TouchOwnView(node);
  PushPortsInUse(node);
}

void ControlState::PushPortsInUse(const NodeRt& node) {
  if (!node.in_scheduler) return;
  absl::Status st = scheduler_->SetPortsInUse(node.info.name(), node.ports_in_use);
  if (!st.ok()) Say(LogLevel::kWarning, "node %s: %s", node.info.name(), std::string(st.message()));
}

void ControlState::Reconcile(NodeRt& node, const v1::Heartbeat& hb, absl::Time now) {
  // The tasks the agent listed that the server knows, as (job, task): a
  // task is found by its job's name, role and index, as TasksOn's are.
  std::vector<std::pair<const JobRt*, int>> reported;
  reported.reserve(static_cast<size_t>(hb.tasks_size()));
  int strays = 0;  // running tasks the server does not count here
  for (const v1::TaskStatus& st : hb.tasks()) {
    JobRt* job = FindJob(st.job());
    int i = job ? FindTask(*job, st.role(), st.index()) : -1;
    if (i >= 0) reported.emplace_back(job, i);
    bool ours = i >= 0 && SameJob(st, job->rec.id()) && job->rec.tasks(i).node() == node.info.name() &&
                !api::IsTerminal(job->rec.tasks(i).state()) && LaunchOf(st) >= job->task_rt[i].launch_base;
    if (ours) Acknowledge(job->task_rt[i]);
    if (api::IsTerminal(st.state())) {
      // An end whose own report was lost (a broken stream, a server that
      // died before writing it): agents repeat recent ends in heartbeats.
      if (ours) ApplyTaskStatus(node.info.name(), st, now);
      continue;
    }
    // Not ours (any more): rescheduled elsewhere, or unknown to the store.
    // Ours but its job is ending: the kill order may have been lost with a
    // server that died; it goes again (the agent ignores a repeated one).
    // Not while the job is ordered to checkpoint: its tasks run until they
    // saved (StopWithGrace).
    if (ours && (!job->ending || job->checkpoint.id() > 0)) continue;
    if (!ours) {
      ++strays;
      Say(LogLevel::kWarning, "node %s runs %s it should not; killing it", node.info.name(),
          api::TaskName(st.job(), st.role(), st.index()));
    }
    SendKill(node.info.name(), st.job(), st.job_id(), st.role(), st.index(), config_.kill_grace_ms,
             ours ? job->rec.message() : "the server has no record of this task on this node");
  }
  // The GPUs a refused launch found held come back once no stray runs.
  if (strays == 0 && node.held_gpus != 0) {
    node.held_gpus = 0;
    SyncExcludedGpus(node);
  }
  NotListed(node, std::move(reported), now);
}

void ControlState::NotListed(NodeRt& node, std::vector<std::pair<const JobRt*, int>> listed_tasks, absl::Time now) {
  auto by_task = [](const std::pair<const JobRt*, int>& a, const std::pair<const JobRt*, int>& b) {
    return std::less<const JobRt*>()(a.first, b.first) || (a.first == b.first && a.second < b.second);
  };
  std::sort(listed_tasks.begin(), listed_tasks.end(), by_task);
  for (auto [job, i] : TasksOn(node.info.name())) {
    const v1::TaskRecord& t = job->rec.tasks(i);
    bool listed =
        std::binary_search(listed_tasks.begin(), listed_tasks.end(), std::pair<const JobRt*, int>(job, i), by_task);
    switch (OnBeat(job->task_rt[i], {.listed = listed,
                                     .ended = api::IsTerminal(t.state()),
                                     .stopping = job->ending || job->preempting,
                                     .launching = t.state() == v1::TASK_LAUNCHING})) {
      case Unlisted::kGone:
        TaskGone(*job, i, node.info.name(), now);
        break;
      case Unlisted::kLaunchAgain:
        Say(LogLevel::kWarning, "node %s has not shown %s after %d heartbeats; sending its launch again",
            node.info.name(), api::TaskName(job->rec.name(), t.role(), t.index()), kUnackedBeats);
        LaunchTask(*job, i);
        break;
      case Unlisted::kWait:
        break;
    }
  }
}

void ControlState::TaskGone(JobRt& job, int i, const std::string& node, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  job.task_rt[i].missing_beats = 0;
  std::string name = api::TaskName(job.rec.name(), t->role(), t->index());
  std::string why = absl::StrCat("node ", node, " no longer runs it (it ended while its report could not be kept)");
  Say(LogLevel::kWarning, "%s: %s", name, why);
  if (job.task_rt[i].evicting && !job.ending && !job.preempting) {
    MoveEvicted(job, i, v1::TaskExit(), now);
    return;
  }
  // Its node is alive and it is started again there: its end, unknown, was
  // most likely the program's own (a report lost with a server that died),
  // so it spends the failure budget (maxRestarts), not the node-loss one,
  // which by default would let it restart forever.
  if (!job.ending && !job.preempting && MayRestart(job, i, v1::ATTEMPT_FAILED)) {
    std::string budget = RecordAttempt(
        job, i, {.attempt = t->attempt(), .attempt_class = v1::ATTEMPT_FAILED, .restarted = true}, now, &stats_);
    t->set_attempt(t->attempt() + 1);
    t->set_restart_count(t->restart_count() + 1);
    ++stats_.restarts_lost;
    SetTaskState(job, i, v1::TASK_LAUNCHING, now);
    AddEvent(job, "task_restarted",
             absl::StrCat(name, " attempt ", t->attempt() - 1, " FAILED: ", why, "; started again (attempt ",
                          t->attempt(), "; ", budget, ")"),
             now);
    LaunchTask(job, i);
    Persist(job);
    return;
  }
  EndLostTask(job, i, why, now, v1::ATTEMPT_FAILED);
}

void ControlState::EndLostTask(JobRt& job, int i, const std::string& why, absl::Time now, v1::AttemptClass c) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  v1::TaskStatus st;
  st.set_job(job.rec.name());
  st.set_role(t.role());
  st.set_index(t.index());
  st.set_attempt(t.attempt());
  st.set_state(job.ending || job.preempting ? v1::TASK_KILLED : v1::TASK_FAILED);
  st.set_attempt_class(c);
  st.mutable_exit()->set_exit_code(-1);
  st.mutable_exit()->set_message(why);
  TaskEnded(job, i, st, now);
  Persist(job);
}

void ControlState::OnTaskStatus(const std::string& node, const v1::TaskStatus& st, absl::Time now) {
  ApplyTaskStatus(node, st, now);
  MaybeDrained(node);
}

void ControlState::ApplyTaskStatus(const std::string& node, const v1::TaskStatus& st, absl::Time now) {
  JobRt* job = FindJob(st.job());
  int i = job ? FindTask(*job, st.role(), st.index()) : -1;
  if (i < 0 || !SameJob(st, job->rec.id()) || job->rec.tasks(i).node() != node || LaunchOf(st) < job->task_rt[i].launch_base) {
    return;
  }
  v1::TaskRecord* t = job->rec.mutable_tasks(i);
  if (api::IsTerminal(t->state())) return;
  Acknowledge(job->task_rt[i]);
  t->set_attempt(std::max(t->attempt(), st.attempt()));
  if (st.has_limits()) *t->mutable_limits() = st.limits();
  switch (st.state()) {
    case v1::TASK_RUNNING:
      if (t->state() != v1::TASK_RUNNING) TaskRunning(*job, i, node, now);
      break;
    case v1::TASK_RESTARTING:
      TaskRestarting(*job, i, st, now);
      break;
    case v1::TASK_SUCCEEDED:
    case v1::TASK_FAILED:
    case v1::TASK_KILLED:
      if (!job->ending && !job->preempting && job->task_rt[i].evicting) {
        MoveEvicted(*job, i, st.exit(), now);
      } else if (!job->ending && !job->preempting && st.node_fault()) {
        LaunchFault(node, *job, i, st, now);
      } else {
        TaskEnded(*job, i, st, now);
      }
      break;
    default:
      break;
  }
  Persist(*job);
}

void ControlState::TaskRunning(JobRt& job, int i, const std::string& node, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  SetTaskState(job, i, v1::TASK_RUNNING, now);
  t->set_start_time_ms(ToMs(now));
  if (NodeRt* n = FindNode(node)) n->launch_faults = 0;
  if (job.rec.state() == v1::JOB_SCHEDULED) SetJobState(job, v1::JOB_STARTING, now);
  // Tasks still waiting for room (minAvailable below count) do not hold
  // back the ones placed: the job runs once all of those do.
  int waiting = 0;
  bool all = std::all_of(job.rec.tasks().begin(), job.rec.tasks().end(), [&waiting](const v1::TaskRecord& o) {
    bool unplaced = o.node().empty() && o.state() == v1::TASK_PENDING;
    waiting += unplaced ? 1 : 0;
    return o.state() == v1::TASK_RUNNING || api::IsTerminal(o.state()) || unplaced;
  });
  if (all && job.rec.state() == v1::JOB_STARTING && !job.ending) {
    SetJobState(job, v1::JOB_RUNNING, now);
    int n = api::JobTaskCount(job.rec.tasks());
    AddEvent(job, "started",
             waiting > 0 ? absl::StrCat(n - waiting, " of ", n, " tasks running; the others wait for room")
             : n == 1    ? std::string("its task is running")
                         : absl::StrCat("all ", n, " tasks running"),
             now);
  }
}

void ControlState::TaskRestarting(JobRt& job, int i, const v1::TaskStatus& st, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  SetTaskState(job, i, v1::TASK_RESTARTING, now);
  t->set_restart_count(t->restart_count() + 1);
  ++stats_.restarts_exit;
  *t->mutable_exit() = st.exit();
  v1::AttemptClass c = ClassOfEnd(job, st);
  std::string budget = RecordAttempt(
      job, i, {.attempt = st.attempt(), .attempt_class = c, .exit = st.exit(), .restarted = true}, now, &stats_);
  AddEvent(job, "task_restarted",
           absl::StrCat(api::TaskName(job.rec.name(), t->role(), t->index()), " attempt ", st.attempt(), " ",
                        api::AttemptClassName(c), " (", DescribeExit(st.exit()), "), restarting as attempt ",
                        st.attempt() + 1, budget.empty() ? "" : absl::StrCat(" (", budget, ")")),
           now);
}

void ControlState::TaskEnded(JobRt& job, int i, const v1::TaskStatus& st, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  if (job.ending && !job.preempting && MasterStoppedWithItsJob(*t, st)) {
    // Its end is the job's own, not a kill a person should look into.
    SetTaskState(job, i, v1::TASK_SUCCEEDED, now);
    t->clear_exit();
    t->mutable_exit()->set_message("stopped with the job");
  } else {
    SetTaskState(job, i, st.state(), now);
    *t->mutable_exit() = st.exit();
  }
  t->set_end_time_ms(ToMs(now));
  v1::AttemptClass c = MasterStoppedWithItsJob(*t, st) && job.ending && !job.preempting ? v1::ATTEMPT_SUCCEEDED
                                                                                       : ClassOfEnd(job, st);
  std::string budget =
      RecordAttempt(job, i, {.attempt = st.attempt(), .attempt_class = c, .exit = st.exit()}, now, &stats_);
  if (job.in_scheduler) {
    absl::Status freed = scheduler_->TaskFinished(job.rec.name(), t->role(), t->index());
    if (!freed.ok()) Say(LogLevel::kDebug, "%s: %s", job.rec.name(), std::string(freed.message()));
  }
  RoomFreed();
  if (job.ending || job.preempting) {
    MaybeFinish(job, now);
    return;
  }
  std::string name = api::TaskName(job.rec.name(), t->role(), t->index());
  if (st.state() == v1::TASK_SUCCEEDED) {
    CheckSuccess(job, i, now);
  } else if (ServiceBesideTraining(job, *t)) {
    // A service (a TensorBoard) that failed for good does not end the
    // training it runs beside (docs/services.md).
    AddEvent(job, "service_failed",
             absl::StrCat("service ", name, " failed: ", DescribeExit(st.exit()), " after ", t->attempt() + 1,
                          t->attempt() == 0 ? " attempt" : " attempts", " (", api::AttemptClassName(c),
                          budget.empty() ? "" : absl::StrCat("; ", budget), "); the job goes on without it"),
             now);
  } else {
    EndJob(job, v1::JOB_FAILED,
           absl::StrCat("task ", name, " failed: ", DescribeExit(st.exit()), " after ", t->attempt() + 1,
                        t->attempt() == 0 ? " attempt" : " attempts", " (", api::AttemptClassName(c),
                        budget.empty() ? "" : absl::StrCat("; ", budget), ")"),
           now);
  }
  MaybeFinish(job, now);
}

bool ControlState::ServiceBesideTraining(const JobRt& job, const v1::TaskRecord& task) const {
  if (!api::TraitsOf(job.rec.spec(), task.role()).service) return false;
  for (const v1::ReplicaSpec& rs : job.rec.spec().replicas()) {
    if (rs.kind() != v1::ROLE_KIND_SERVICE && !api::IsJobMasterRole(rs.role())) return true;
  }
  return false;
}

void ControlState::CheckSuccess(JobRt& job, int task, absl::Time now) {
  std::optional<std::string> done = api::SuccessAfter(job.rec.spec(), job.rec.tasks(), job.rec.tasks(task));
  if (done) EndJob(job, v1::JOB_SUCCEEDED, *done, now);
}

}  // namespace trainyard::server
