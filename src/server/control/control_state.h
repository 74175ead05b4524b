// ControlState: the server's logic as one single-threaded state machine over
// jobs, tasks and nodes. Events come in with `now` (a submission, a kill, an
// agent's registration, heartbeat, task status or disconnect, a scheduling
// tick, a job master's verdict, the store's answer); effects go out through
// the ExecutionBackend (launch, kill, files) and the Persister
// (what to write). No sockets, threads, locks or clock reads: the shell
// (JobManager) owns those and calls one event at a time. Tests drive it
// with explicit times and a fake backend.
//
// Handler files by concern: control_jobs.cc (submission, kill, verdicts,
// ends, requeue, events), control_schedule.cc (rounds, placements,
// preemptions, launches and their environment), control_agents.cc
// (registration, heartbeats, task statuses, reconciliation),
// control_nodes.cc (liveness, node loss, moving and adopting tasks,
// recovery), control_stops.cc (a node whose agent stops on purpose, a
// worker its job master found hung), control_admin.cc (cordon, drain,
// remove; nodes taken out of placement for failing launches or low disk),
// control_views.cc (one job's or node's view, where a job's logs are). The
// rooms' other units (each with its header: job_counts.h, order_desk.h,
// task_launch.h, ...; docs/architecture.md lists them) hold what these
// handlers coordinate.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/task_env.h"
#include "common/logging.h"
#include "common/token_bucket.h"
#include "core/resources/port_ranges.h"
#include "core/scheduler/scheduler.h"
#include "proto/service.pb.h"
#include "server/admission.h"
#include "server/config.h"
#include "server/execution_backend.h"
#include "server/logs/log_places.h"
#include "server/control/attempts.h"
#include "server/control/deadline_watch.h"
#include "server/control/gate_book.h"
#include "server/control/invariants.h"
#include "server/control/job_counts.h"
#include "server/control/job_intake.h"
#include "server/control/job_map.h"
#include "server/control/job_retention.h"
#include "server/control/node_info.h"
#include "server/control/node_table.h"
#include "server/control/order_desk.h"
#include "server/control/persister.h"
#include "server/control/schedule_desk.h"
#include "server/control/task_launch.h"
#include "server/control/view_publisher.h"
#include "server/schedules.h"
#include "server/stats.h"
#include "server/view_store.h"
#include "store/state_store.h"

namespace trainyard::server {

// A submission validated and named, waiting for its record to be durable.
struct PreparedJob {
  v1::JobRecord rec;
  v1::JobEventRecord first_event;
  core::JobRequest request;  // what the scheduler gets once the record is durable
};

class ControlState {
 public:
  // REQUIRES: backend outlives this object.
  ControlState(ServerConfig config, std::unique_ptr<core::Scheduler> scheduler, ExecutionBackend* backend,
               absl::Time now);
  ControlState(const ControlState&) = delete;
  ControlState& operator=(const ControlState&) = delete;
  ~ControlState();

  // ---- recovery ----
  // Takes in what the store holds: live jobs and nodes (snapshot) and the
  // finished jobs. Call once, before any other event.
  void Recover(StoreSnapshot snapshot, std::vector<v1::JobRecord> finished, absl::Time now);
  // The address the server is reachable on; job masters report to it.
  void SetServerAddress(const std::string& address) { server_address_ = address; }

  // ---- clients ----
  // Defaults, validates and names a submission and reserves its name.
  // `parse_problems` are those of parsing its YAML (the spec then holds what
  // did parse): they are answered together with validation's. Errors:
  // InvalidArgument, one "field: problem" per line.
  absl::StatusOr<PreparedJob> PrepareSubmit(v1::JobSpec spec, absl::Time now,
                                            std::vector<std::string> parse_problems = {});
  // PrepareSubmit's part after CheckSubmission (server/admission.h), which
  // the caller ran without the lock: names the job, adds its master,
  // checks what its tasks will exec and its user's limits, builds its task
  // records and scheduler request and reserves its name. O(tasks).
  absl::StatusOr<PreparedJob> PrepareChecked(CheckedSpec checked, absl::Time now);
  // A job array (spec.array, api/job_array.h): one PreparedJob per index,
  // named ARRAY-INDEX, where ARRAY is the first free name from spec.name
  // (as PrepareChecked picks one) whose element names are free too. The
  // user's rate limit counts the array once. Each is then committed and
  // taken in by AcceptCommitted as a single job is. Errors: those of
  // PrepareChecked (nothing stays reserved then) and of the array's syntax.
  absl::StatusOr<std::vector<PreparedJob>> PrepareArray(CheckedSpec checked, absl::Time now);
  // Releases a held job (or every held element of an array named `job`):
  // it may be placed from the next round. Returns the jobs released.
  // Errors: NotFound; FailedPrecondition when nothing named is held.
  absl::StatusOr<std::vector<std::string>> Release(const std::string& job, absl::Time now);
  // The jobs `name` stands for in a dependency: an array's elements, or the
  // job itself; empty when neither exists.
  std::vector<std::string> DependencyTargets(const std::string& name) const { return gates_.DependencyTargets(name); }
  // The store answered a prepared job's creation with `st`: the job is taken
  // in, or its reserved name dropped (Unavailable naming the store's error).
  absl::StatusOr<v1::SubmitResponse> AcceptCommitted(PreparedJob& prepared, const absl::Status& st);
  // Ends a job as KILLED (a job that has ended already stays as it is).
  // Returns its state; NotFound for an unknown job.
  absl::StatusOr<v1::JobState> Kill(const std::string& job, const std::string& reason, absl::Time now);
  // A job master's verdict. Errors: NotFound, InvalidArgument (state),
  // FailedPrecondition (a master that was replaced).
  absl::Status ReportOutcome(const v1::JobOutcomeRequest& request, absl::Time now);

  // Deletes a finished job: its name is free for a new job once the write
  // that renames its record (kept under its id as NAME#ID) is durable; call
  // ReleaseName then. Errors: NotFound; FailedPrecondition for a job that
  // has not ended or is still stopping its tasks.
  absl::StatusOr<v1::DeleteJobResponse> DeleteJob(const std::string& job, absl::Time now);
  // Frees the name of a job deleted by DeleteJob (its rename is durable).
  void ReleaseName(const std::string& job);
  // Finished jobs that ended finishedJobRetentionMinutes ago leave the live
  // views as a delete takes them (their records renamed NAME#ID, their
  // accounts kept); a name is free once its rename is durable (WriteDone).
  // Deleted records that ended accountingRetentionDays ago are purged from
  // the store. Checked at most once a minute; RunRound calls it.
  void ExpireFinished(absl::Time now);

  // ---- schedules (control_schedules.cc; the ScheduleDesk keeps them) ----
  // Adds a schedule (written with the next write; answer once durable).
  // Errors: ScheduleDesk::Create's.
  absl::StatusOr<v1::ScheduleView> CreateSchedule(v1::ScheduleRecord rec, absl::Time now) {
    return schedules_.Create(std::move(rec), now, &persister_.batch());
  }
  // Pauses, resumes or deletes a schedule, or runs it now (the run is put
  // in `fires`, whatever its last run does). Errors: NotFound naming it,
  // InvalidArgument for no action.
  absl::StatusOr<v1::ScheduleView> UpdateSchedule(const std::string& name, v1::ScheduleAction action, absl::Time now,
                                                  std::vector<ScheduleFire>* fires) {
    return schedules_.Update(name, action, now, fires, &persister_.batch());
  }
  // The runs due at `now`, after each schedule's concurrency policy spoke:
  // a run due while the last has not ended is skipped (skip), goes beside
  // it (queue), or kills it first (replace). The shell submits them.
  std::vector<ScheduleFire> TakeDueSchedules(absl::Time now);
  // A run's submission was answered: the job it made, or why none.
  void ScheduleRunDone(const ScheduleFire& fire, const absl::StatusOr<std::string>& job, absl::Time /*now*/) {
    schedules_.RunDone(fire, job, &persister_.batch());
  }
  const v1::ScheduleRecord* FindSchedule(const std::string& name) const { return schedules_.Find(name); }
  // Publishes the schedules' views when they changed, and once a second
  // (their runs' jobs end on their own).
  void PublishSchedules(ViewStore* views, absl::Time now) { schedules_.Publish(views, now); }

  // ---- admin: nodes (control_admin.cc) ----
  // Errors: NotFound naming the node. Cordon: no new task lands on the node;
  // its tasks stay. Uncordon: it takes tasks again (this also clears the
  // server's own reasons to keep tasks off it: a node whose launches failed
  // is tried again). Both are persisted.
  absl::Status Cordon(const std::string& node, const std::string& reason);
  absl::Status Uncordon(const std::string& node);
  // Cordons (or uncordons) single GPUs of the node: no task is placed on a
  // cordoned GPU; tasks on it stay. Persisted. Uncordon of the whole node
  // uncordons its GPUs too. Errors: NotFound naming the node;
  // InvalidArgument naming a GPU the node does not have.
  absl::Status CordonGpus(const std::string& node, const std::vector<int>& gpus, bool cordon);
  // No new task lands on the node, and its tasks leave: a task with a restart
  // policy is stopped (kill grace) and placed elsewhere without charging its
  // restart budget; a job with a task of policy Never there is requeued
  // whole, as a preemption does. Returns the tasks told to leave.
  absl::StatusOr<int> Drain(const std::string& node, const std::string& reason, absl::Time now);
  // Forgets a LOST node (FailedPrecondition for one that is not LOST or
  // whose agent is connected); the tasks still recorded there are moved.
  absl::Status RemoveNode(const std::string& node, absl::Time now);
  // The node's view (nullopt: unknown node).
  std::optional<v1::NodeView> NodeViewOf(const std::string& node) const;

  // ---- agents ----
  // Registers (or re-registers) a node whose agent speaks on `session`
  // (unique per connection, never 0). Errors: AlreadyExists when another
  // live session holds the name; InvalidArgument for a bad NodeInfo.
  absl::Status RegisterAgent(const v1::NodeInfo& info, uint64_t session, absl::Time now);
  // The agent's stream on `session` closed (ignored when the node has
  // another session by now).
  void AgentDisconnected(const std::string& node, uint64_t session);
  void OnHeartbeat(const std::string& node, const v1::Heartbeat& hb, absl::Time now);
  void OnTaskStatus(const std::string& node, const v1::TaskStatus& status, absl::Time now);
  // The node's agent is stopping on purpose and stops its tasks (control_stops.cc):
  // no new placements there; each job with a task there is stopped and put
  // back in the queue once its tasks have ended, without charging a
  // restart. The backend hears Drained once the node has no task left.
  void AgentDraining(const std::string& node, const std::string& reason, absl::Time now);
  // A job master's report that a worker failed while its process runs (it
  // stopped pinging): that attempt is stopped as a failure, and the task's
  // restart policy decides (control_stops.cc). Errors: NotFound (job or
  // worker), FailedPrecondition (a master that was replaced).
  absl::Status WorkerFailed(const v1::WorkerFailureRequest& request, absl::Time now);
  // A job master's answer to the job's order to checkpoint: its workers
  // saved (the step is kept for their next start as TRAINYARD_RESUME_STEP)
  // or none checkpoints; either way its tasks are stopped now.
  // FailedPrecondition for an order that is not open (or a replaced master).
  absl::Status CheckpointReported(const v1::CheckpointReport& report, absl::Time now);

  // ---- the loop ----
  // One scheduling round: node liveness, overdue preemption victims, the
  // scheduler core's decisions applied, pending reasons.
  void RunRound(absl::Time now);
  // True when an event asked for a round; cleared by TakeRoundRequest.
  bool TakeRoundRequest() {
    bool r = wants_round_;
    wants_round_ = false;
    return r;
  }
  // The gap since the shell last ran events: a server that itself stalled
  // (stopped, starved) must not judge nodes by the silence it caused.
  // Moves every READY node's last heartbeat forward by `gap`.
  void ExcuseStall(absl::Duration gap);
  // The server's doors were saturated for the last `gap` (connections
  // refused or shut down for newcomers): heartbeats may have waited on the
  // server, not on their nodes. Moves each READY node's last heartbeat
  // forward by `gap`, but never lets a node be silent for more than
  // kOverloadSilenceFactor node timeouts (a flood that never ends must not
  // hide a node that is really gone).
  void ExcuseOverload(absl::Duration gap, absl::Time now);
  static constexpr int kOverloadSilenceFactor = 3;

  // ---- persistence ----
  // The next write for the store (nullopt: one in flight, or nothing new).
  std::optional<Persister::Write> TakeWrite();
  void WriteDone(const Persister::Write& write, const absl::Status& st, bool stopping);
  Persister& persister() { return persister_; }

  // ---- views (built and published by the ViewPublisher) ----
  // Publishes the views of the jobs that changed since the last call.
  void PublishJobs(ViewStore* views) { publisher_.PublishJobs(views); }
  // Publishes the node and queue views when anything changed since the
  // last call (the shell calls this at most every 5 ms). A change of
  // heartbeat times alone goes out at most once a second, and checks no
  // node's view: every node's heartbeat changes its time every second, and
  // that alone must cost the server nothing per node.
  void PublishNodesAndQueues(ViewStore* views, absl::Time now) { publisher_.PublishNodesAndQueues(views, now); }
  // True when node or queue views changed since they were last published.
  bool NodeViewsChanged() const { return publisher_.NodeViewsChanged(); }
  // Whether PublishJobs has anything to put out.
  bool JobViewsChanged() const { return publisher_.JobViewsChanged(); }
  // Publishes up to `max` of the jobs recovered from the store whose views
  // are not out yet; returns how many are left.
  size_t PublishRecovered(ViewStore* views, size_t max) { return publisher_.PublishRecovered(views, max); }
  absl::StatusOr<v1::JobView> Describe(const std::string& job) const;
  // A job's id and whether its events before a restart are still in the
  // store only (describe then reads them there).
  struct EventsState {
    uint64_t id = 0;
    bool loaded = true;
  };
  std::optional<EventsState> JobEventsState(const std::string& job) const;
  // Hands in the events read from the store for a recovered job.
  void SetStoredEvents(const std::string& job, const std::vector<v1::JobEventRecord>& stored);
  std::vector<v1::JobView> ListJobs(bool include_finished) const { return publisher_.JobViews(include_finished); }
  std::vector<v1::NodeView> ListNodes() const { return publisher_.NodeViews(); }
  // Every node's view, built again only for the nodes that changed (all
  // are checked when `sweep`, else only those touched since the last one).
  ViewStore::NodesPtr PublishedNodes(bool sweep = true) { return publisher_.PublishedNodes(sweep); }
  v1::ListQueuesResponse ListQueues() const { return publisher_.QueuesView(); }
  // Where the tasks of `job` are, for the log hub (LogPlacesOf, job_rt.h).
  // NotFound naming the job.
  absl::StatusOr<JobLogPlaces> LogPlaces(const std::string& job) const;
  ManagerStats Stats() const { return stats_; }
  // OK, or Internal naming the first broken invariant (invariants.h).
  absl::Status CheckInvariantsForTest() const { return CheckControlInvariants(jobs_, nodes_, scheduler_->state()); }
  const ServerConfig& config() const { return config_; }
  // Its log lines (what it noticed: a node lost, a task killed where it
  // should not run, ...) are an effect like a launch: they go to `sink`
  // when one is set (a test reads them; it runs under the shell's lock and
  // must not call back), else to the daemon's log as component "server".
  using LogSink = std::function<void(LogLevel level, const std::string& line)>;
  void SetLogSink(LogSink sink) { log_sink_ = std::move(sink); }

 private:
  using NodeRt = ::trainyard::server::NodeRt;

  // control_jobs.cc
  void EndJob(JobRt& job, v1::JobState state, const std::string& message, absl::Time now);
  void MaybeFinish(JobRt& job, absl::Time now);
  void Requeue(JobRt& job, const std::string& reason, absl::Time now);
  // A preempted job whose tasks stopped (or whose grace ran out): back in
  // the queue, each launched task's preemption spent (none for a drain's or
  // an agent shutdown's stop); or FAILED when a task's preemption budget
  // (restartBudgets.preemption) was spent before.
  void EndPreemption(JobRt& job, absl::Time now);
  void AddEvent(JobRt& job, const std::string& kind, const std::string& text, absl::Time now);
  // Whether `task` is a service of a job that has other roles: its failure
  // for good is an event, not the job's end (docs/services.md).
  bool ServiceBesideTraining(const JobRt& job, const v1::TaskRecord& task) const;
  // Marks the job's record for the next write and its view for the next
  // publish.
  void Persist(const JobRt& job);
  // Every job and task state change goes through these: they check the
  // transition against api/states.h's table (an illegal one is a bug).
  void SetJobState(JobRt& job, v1::JobState state, absl::Time now);
  // Sets a task's state (a transition the server makes, else a CHECK). A
  // task that lets its place go adds what it held to its job's usage.
  void SetTaskState(JobRt& job, int task, v1::TaskState state, absl::Time now);
  // Adds what the task held since held_since_ms to its job's usage and
  // counts from now (its allocation is about to change, or it lets go).
  void ChargeHeld(JobRt& job, int task, absl::Time now);
  // Something was freed (a task ended, a job left the scheduler): asks for
  // a round when anything waits for room (a queued job, tasks of a partly
  // placed one, a preemption's victims). With nothing waiting, the round
  // would place nothing; the tick's rounds run all the same.
  void RoomFreed();
  JobRt* FindJob(const std::string& name) { return FindJobIn(jobs_, name); }
  const JobRt* FindJob(const std::string& name) const { return FindJobIn(jobs_, name); }

  // control_gates.cc: jobs kept out of the scheduler until their hold,
  // dependencies and array throttle let them in (docs/job-spec.md, "Arrays,
  // dependencies, hold"), as the GateBook (gates_) judges them. Each round:
  // gated jobs whose gate opened go to the scheduler, those whose after-ok
  // dependency failed end FAILED, the others' reasons are set.
  void CheckGates(absl::Time now);
  void KeepGated(JobRt& job);
  // A job ended: the gated jobs waiting for it, and the throttled elements
  // of its array, are looked at again by the next round.
  void WakeGates(const JobRt& job);
  bool OpenGate(JobRt& job, absl::Time now);
  // A free name for a job, or for an array and all its elements.
  bool NameTaken(const std::string& name) const { return jobs_.count(name) || gates_.IsArray(name); }
  std::string FreeName(const std::string& base, const std::vector<int>& elements);

  // control_schedule.cc
  void ApplyPlacement(const core::JobPlacement& p, absl::Time now);
  void ApplyPreemption(const core::Preemption& p, absl::Time now);
  // Places the tasks of placed jobs that started with a smaller gang
  // (minAvailable below count) as room appears; at most every 100 ms.
  void PlaceWaitingTasks(absl::Time now);
  // Places one waiting task; its error names why it cannot be placed now.
  absl::Status PlaceWaitingTask(JobRt& job, int task, absl::Time now);

  // control_elastic.cc: elastic jobs (a role with minCount, docs/elastic.md).
  // An elastic job placed below its count: when room for more of its tasks
  // appeared (and its size is elasticGrowAfterMs old), Resize; else the
  // reason its other tasks wait.
  std::string GrowElastic(JobRt& job, absl::Time now);
  // Stops the job's tasks (a checkpoint order first, where it has a master)
  // and requeues it, no budget charged: placed again at the size that fits.
  void Resize(JobRt& job, const std::string& note, absl::Time now);
  // At each placement of an elastic job: its next membership epoch, worker
  // ids dense from 0 over the placed tasks, and a "membership" event.
  void NewMembership(JobRt& job, absl::Time now);
  // "preempted by job X (priority production) at T" for the victim of `p`.
  std::string PreemptionNote(const core::Preemption& p, absl::Time now) const;
  // Sets a queued job's pending reason from the core's `reason`, after its
  // preemption note; records when it becomes unschedulable.
  void SetPendingReason(JobRt& job, const std::string& reason, absl::Time now);
  // Launches task `task`; `ctx` (EnvContextFor the job, placement unchanged
  // since) saves building it again for each task of a batch.
  void LaunchTask(JobRt& job, int task, EnvContext* ctx = nullptr);
  // Sends every running task of the job but `except` its files again (the
  // hosts file after a task moved).
  void PushFiles(JobRt& job, int except);
  // The same for the job's running tasks on `node` only.
  void PushFilesTo(JobRt& job, const std::string& node);
  // Sends task `task` its files; false when its node is not connected.
  bool SendFiles(JobRt& job, int task, EnvContext& ctx);
  void KillTasks(JobRt& job, int grace_ms, const std::string& reason);
  // Stops the job's placed tasks so that it gives way (a preemption victim,
  // a job past its time limit) with `grace_ms` to save its work. A job with
  // a master is ordered to checkpoint (DESIGN.md, "Training resilience"):
  // the order goes to the master in the answer to its figures, and the
  // tasks are stopped once it reports that the workers saved
  // (CheckpointReported) or at now + grace_ms (CheckCheckpointDeadlines). A
  // job without one gets SIGTERM now and SIGKILL after the grace.
  void StopWithGrace(JobRt& job, int grace_ms, const std::string& reason, absl::Time now);
  // Closes the job's open order to checkpoint, if any.
  void EndCheckpointOrder(JobRt& job);
  // OK unless a report names a master other than the job's current one (a
  // master cut off on a lost node and replaced, still running).
  absl::Status FromCurrentMaster(const JobRt& job, const std::string& master_address) const;
  // Stops the tasks of jobs whose order's deadline passed.
  void CheckCheckpointDeadlines(absl::Time now);
  // The agent finds the task by the job's id (a reused name names another
  // job's task); `job` is for its messages.
  void SendKill(const std::string& node, const std::string& job, uint64_t job_id, const std::string& role, int index,
                int grace_ms, const std::string& reason);

  // control_agents.cc
  void ApplyTaskStatus(const std::string& node, const v1::TaskStatus& status, absl::Time now);
  // Its agent started task `task` on `node` (the job runs once every
  // placed task does), or restarts it in place after it ended.
  void TaskRunning(JobRt& job, int task, const std::string& node, absl::Time now);
  void TaskRestarting(JobRt& job, int task, const v1::TaskStatus& status, absl::Time now);
  void TaskEnded(JobRt& job, int task, const v1::TaskStatus& status, absl::Time now);
  void CheckSuccess(JobRt& job, int task, absl::Time now);
  void Reconcile(NodeRt& node, const v1::Heartbeat& hb, absl::Time now);
  // Reconcile's second half: the tasks the server has as live on `node`
  // that its heartbeat did not list (`listed_tasks`) are gone after
  // kMissingBeats, or launched again when never acknowledged.
  void NotListed(NodeRt& node, std::vector<std::pair<const JobRt*, int>> listed_tasks, absl::Time now);
  // Records the ports in use on a node as its agent reported them and tells
  // the scheduler when they changed; PushPortsInUse tells it again (a node
  // just added to it).
  void SetPortsInUse(NodeRt& node, core::PortRanges in_use);
  void PushPortsInUse(const NodeRt& node);
  // A task the server has as live on `node` that its agent no longer runs
  // (its end was lost in a crash): ends it, or starts it again per policy.
  void TaskGone(JobRt& job, int task, const std::string& node, absl::Time now);
  // Ends a task its node no longer runs (or can no longer hold): KILLED when
  // its job is being stopped, else FAILED with `why`.
  // `c`: its attempt's class (FAILED for a task its live node no longer runs).
  void EndLostTask(JobRt& job, int task, const std::string& why, absl::Time now,
                   v1::AttemptClass c = v1::ATTEMPT_NODE_LOST);

  // Ends every live job whose limit ran out by `now` (deadlines_) as
  // DEADLINE_EXCEEDED.
  void CheckDeadlines(absl::Time now);

  // control_stops.cc
  // Stops every task of the job (grace: kill_grace_ms) and requeues it once
  // they have ended, as a preemption does; `note` leads its reason.
  void StopForRequeue(JobRt& job, const std::string& note, absl::Time now);
  // Tells the backend a node whose agent is stopping has no task left (once).
  void MaybeDrained(const std::string& node);

  // control_admin.cc
  // Tells the core whether new tasks may land on the node: connected, READY,
  // its agent not stopping, not cordoned or drained, not degraded.
  void UpdateSchedulable(NodeRt& node);
  NodeRt* FindNode(const std::string& name) { return nodes_.Find(name); }
  const NodeRt* FindNode(const std::string& name) const { return nodes_.Find(name); }
  NodeRt& AddNode(const std::string& name, std::unique_ptr<NodeRt> node) { return nodes_.Add(name, std::move(node)); }
  // Tells a task to leave `node` (`why`: "node N is drained"); once it has
  // stopped, MoveEvicted places it elsewhere.
  void EvictTask(JobRt& job, int task, const std::string& node, const std::string& why, absl::Time now);
  // A task that stopped after its eviction: placed elsewhere, uncharged, or
  // (moved off a faulty GPU or a node its GPU faults drain) charged to its
  // GPU-error budget.
  void MoveEvicted(JobRt& job, int task, const v1::TaskExit& exit, absl::Time now);
  // The node's GPU faults (info.gpu_faults, as its agent last told them)
  // applied: faulty GPUs out of service, the tasks on them (all its tasks,
  // for a fault that drains the node) told to leave (docs/gpu-health.md).
  void ApplyGpuFaults(NodeRt& node, absl::Time now);
  // The GPUs the core keeps out of service on the node: busy with others'
  // processes, faulty, or cordoned by an admin.
  void SyncExcludedGpus(NodeRt& node);
  // The agent refused a launch for a reason of its node: counted against
  // the node, and the task placed elsewhere, uncharged.
  void LaunchFault(const std::string& node, JobRt& job, int task, const v1::TaskStatus& status, absl::Time now);
  // Frees a task in the core and places it elsewhere (MoveWhy), or requeues
  // its job when no node can take it now.
  // `c`: the class its attempt's end is recorded with (uncharged).
  void MoveOrRequeue(JobRt& job, int task, const std::string& why, v1::AttemptClass c, absl::Time now);
  void CheckDisk(NodeRt& node, const v1::Heartbeat& hb);

  // control_nodes.cc
  void CheckNodes(absl::Time now);
  void NodeLost(NodeRt& node, absl::Time now);
  // Marks the node READY: back in the scheduler (adopting its recovered
  // tasks) and in the store.
  absl::Status NodeUp(NodeRt& node);
  // A node that registers again with another spec (capacity, ports,
  // topology): the scheduler takes the new one.
  absl::Status RefreshNodeSpec(NodeRt& node, const v1::NodeInfo& old_info);
  // Why a task moves: the event's text after the task's name ("was lost with
  // node n-1") and whether the move counts against its restart budget.
  struct MoveWhy {
    std::string text;
    bool charge = true;
    // The class its attempt's end is recorded with (a charged move spends
    // its budget).
    v1::AttemptClass attempt_class = v1::ATTEMPT_NODE_LOST;
  };
  bool ReplaceTask(JobRt& job, int task, const MoveWhy& why, absl::Time now);
  void AdoptRecoveredTasks(NodeRt& node);
  // Takes a job recovered from the store into the scheduler; its placed tasks
  // are adopted as their nodes register. False when the job cannot be
  // recovered (logged; it stays in the store).
  bool RecoverIntoScheduler(JobRt& job);
  // Recover's parts: a node as its record left it (LOST until its agent
  // registers); a job not ended (gated, or taken into the scheduler); an
  // ended one (shown, its name taken; a deleted one's account only).
  void RecoverNode(const v1::NodeRecord& n, absl::Time now);
  void RecoverLiveJob(v1::JobRecord rec, absl::Time now);
  void RecoverFinishedJob(v1::JobRecord rec, int64_t accounts_from, absl::Time now);
  // A task held its place since before records said when: from now on
  // (written, so a second restart keeps that).
  void HoldFromNow(v1::JobRecord& rec, absl::Time now);
  // A registered node is told, after the answer to its registration, what
  // it missed while away: kills for the tasks on its GPU faults, the
  // launches that never reached it, the kills of a drain, the files that
  // changed.
  void CatchUp(NodeRt& node, absl::Time now);
  // Records that a task of `job` is placed on `node` (node_jobs_).
  void IndexTask(const JobRt& job, const std::string& node);
  // The live (job, task) pairs placed on `node` now, from node_jobs_
  // (dropping jobs that have no live task there any more).
  std::vector<std::pair<JobRt*, int>> TasksOn(const std::string& node);

  const ServerConfig config_;
  std::unique_ptr<core::Scheduler> scheduler_;
  ExecutionBackend* const backend_;
  LogSink log_sink_;
  // Every log line of the control state goes through here (SetLogSink).
  template <typename... Args>
  void Say(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
    if (log_sink_) {
      log_sink_(level, absl::StrFormat(format, args...));
    } else if (LogEnabled(level)) {
      LogLine(level, "server", absl::StrFormat(format, args...));
    }
  }
  Persister persister_;
  // Whether a schedule's run (a job, or an array: any element) has not ended.
  bool ScheduledJobLive(const std::string& name) const;
  ScheduleDesk schedules_{absl::Seconds(config_.schedule_min_interval_seconds),
                          [this](const std::string& run) { return ScheduledJobLive(run); }};
  // Every job kept, by name.
  JobMap jobs_;
  // Ended jobs: when they leave the live views and the store.
  JobRetention retention_{config_.finished_job_retention_minutes, config_.accounting_retention_days};
  // Unfinished jobs per queue and user, and the per-user limits.
  JobCounts counts_{config_.max_pending_jobs_per_user, config_.max_submissions_per_second_per_user};
  // An array's element as PrepareArray makes it.
  struct ArrayPlace {
    std::string array;
    int index = 0;
    int throttle = 0;
    bool first = false;
    int count = 1;  // the array's elements
  };
  // PrepareChecked with the job's name chosen (and free).
  absl::StatusOr<PreparedJob> PrepareNamed(CheckedSpec checked, const std::string& name, absl::Time now,
                                           const ArrayPlace* place);
  NodeTable nodes_;  // by name: views list them in order
  // When orders to agents go out: now, after a registration's answer, or
  // after the write that holds what led to them.
  OrderDesk orders_{config_.launch_after_durable, persister_, nodes_, jobs_, backend_};
  // Node -> names of jobs with a task placed there (or once placed there:
  // TasksOn prunes), so node events need not walk every job. Hashed by node
  // (every placement and heartbeat looks one up); each node's jobs in order.
  absl::flat_hash_map<std::string, std::set<std::string>> node_jobs_;
  // Node -> jobs whose files changed while the node was disconnected.
  std::map<std::string, std::set<std::string>> stale_files_;
  // Victims waiting for their tasks to stop, so a round need not walk every
  // job ever submitted to find those past their grace.
  std::set<std::string> preempting_;
  // Jobs with an open order to checkpoint (JobRt::checkpoint).
  std::set<std::string> checkpointing_;
  // Started jobs with a time limit, by when it runs out.
  DeadlineWatch deadlines_;
  // Placed jobs with tasks still waiting for room (minAvailable < count).
  std::set<std::string> partial_;
  absl::Time last_partial_try_;
  // Next suffix to try per submitted name ("train" -> 3 after train, train-2).
  std::map<std::string, int> next_suffix_;
  // The gated jobs, how every job ended, the arrays' elements (GateBook).
  GateBook gates_{jobs_};
  uint64_t next_job_id_ = 1;
  std::string server_address_;
  bool wants_round_ = false;
  // What clients see, and what changed since it was last published.
  ViewPublisher publisher_{config_, jobs_, nodes_, scheduler_, counts_};
  ManagerStats stats_;
  absl::Time started_;
  absl::Time last_liveness_check_;  // CheckNodes runs at most every 100 ms
};

}  // namespace trainyard::server
