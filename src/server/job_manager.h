// JobManager: the thin shell around the server's ControlState. It owns the
// one mutex, the scheduling thread and the clock; the store and the
// execution backend (AgentStreams: agents over gRPC streams) are the
// server's (the backend is handed to the control state behind the launch
// contract); every client, agent and
// store event is a turn (Turn): it takes the lock, reads the clock once and
// hands the event to the control state; what the turn leaves to do (the
// persister's next write to the store, the submissions it answers, the
// schedules' runs it submits) runs once the lock is released. No helper
// lets go of the lock in the middle of an event (only a wait on a condition
// releases it, and a turn never waits while it has effects left). Waits (a
// kill or a verdict answered once durable) come after the turn, never
// inside the control state. Reads (describe, jobs, nodes,
// queues) come from the ViewStore the control state publishes to, never
// under the lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/scheduler/scheduler.h"
#include "proto/service.pb.h"
#include "server/execution_backend.h"
#include "server/launch_contract.h"
#include "server/config.h"
#include "server/control/control_state.h"
#include "server/logs/log_hub.h"
#include "server/stats.h"
#include "server/view_store.h"
#include "store/state_store.h"

namespace trainyard::server {

class JobManager {
 public:
  // Orders for the nodes go to `backend` (the agents' AgentStreams in a
  // server), completed by the launch contract; neither it nor `store` is
  // owned, and both outlive the manager.
  JobManager(ServerConfig config, StateStore* store, std::unique_ptr<core::Scheduler> scheduler,
             ExecutionBackend* backend, const Clock* clock);
  ~JobManager();

  // Loads jobs and nodes from the store. Call once, before Start.
  absl::Status Recover();
  // Starts the scheduling / liveness thread.
  void Start();
  // Stops it; agents' links must be gone before the manager is destroyed.
  void Stop();

  // ---- clients ----
  // Validates `spec` (already parsed), makes it durable and queues it.
  // Errors: InvalidArgument naming the field; Unavailable when the store
  // cannot keep it (nothing is acknowledged then).
  absl::StatusOr<v1::SubmitResponse> Submit(v1::JobSpec spec);
  // The same without blocking: `done` runs once the job is durable and taken
  // in, or at once on a validation error; Submit waits on it. It runs
  // without the lock on the loop's thread (after the round that took the job
  // in), on the store's (a store error, or no loop running), or on Stop's:
  // it must be quick and must not wait for this object (call Submit).
  using SubmitDone = std::function<void(absl::StatusOr<v1::SubmitResponse>)>;
  void SubmitAsync(v1::JobSpec spec, SubmitDone done) { SubmitAsync(std::move(spec), {}, std::move(done)); }
  // With the problems of parsing the spec's YAML (`spec` holds what did
  // parse), answered in one error with those of validating it.
  void SubmitAsync(v1::JobSpec spec, std::vector<std::string> parse_problems, SubmitDone done);
  absl::StatusOr<v1::JobView> Describe(const std::string& job);
  // The job's published view without its events (whose job it is, its id);
  // nullptr when there is no such job. Reads only the ViewStore.
  std::shared_ptr<const v1::JobView> JobSummary(const std::string& job);
  std::vector<v1::JobView> ListJobs(bool include_finished);
  // One page of the jobs that match the request's filters (user, queue,
  // states), in id order (ListJobsRequest's page_size, page_token,
  // without_tasks); InvalidArgument for a page token this server did not give.
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request);
  // Accounting: finished jobs (deleted ones too) in pages, and usage per
  // user or queue over a period (AccountBook). Reads only the ViewStore.
  absl::StatusOr<v1::HistoryResponse> History(const v1::HistoryRequest& request);
  absl::StatusOr<v1::UsageResponse> Usage(const v1::UsageRequest& request);
  // Deletes a finished job (ControlState::DeleteJob); answered once its
  // rename is durable, when its name is free again.
  absl::StatusOr<v1::DeleteJobResponse> DeleteJob(const std::string& job);
  // Node administration (ControlState::Cordon, Uncordon, Drain,
  // RemoveNode), answered once durable with the node's view.
  enum class NodeAdmin { kCordon, kUncordon, kDrain, kRemove };
  absl::StatusOr<v1::NodeAdminResponse> AdministerNode(NodeAdmin what, const v1::NodeAdminRequest& request);
  // Kills a job: tasks get SIGTERM then SIGKILL; state KILLED. Answered once
  // the end is durable.
  absl::StatusOr<v1::JobState> Kill(const std::string& job, const std::string& reason);
  // Releases a held job, or the held elements of an array (ControlState::
  // Release); answered once durable. Returns the jobs released.
  absl::StatusOr<std::vector<std::string>> Release(const std::string& job);
  // The jobs a name stands for: an array's elements, or the job itself.
  std::vector<std::string> DependencyTargets(const std::string& job);
  std::vector<v1::NodeView> ListNodes();
  v1::ListQueuesResponse ListQueues();
  // A job master's verdict: SUCCEEDED ends the job and stops its other
  // tasks (parameter servers); FAILED ends it with the reason.
  absl::Status ReportOutcome(const v1::JobOutcomeRequest& request);
  // A job master's report of a hung worker (ControlState::WorkerFailed).
  absl::Status ReportWorkerFailure(const v1::WorkerFailureRequest& request);
  // A job master's answer to an order to checkpoint (ControlState::CheckpointReported).
  absl::Status ReportCheckpoint(const v1::CheckpointReport& report);

  // ---- schedules (job_manager_schedules.cc; docs/schedules.md) ----
  // Creates a schedule of `rec.spec` as `rec.user`'s (admitted already,
  // submission.h): the spec is checked as a run's submission would be
  // (CheckSubmission; `parse_problems` answered with it) and may not hold
  // secret values. Answered once durable.
  absl::StatusOr<v1::ScheduleView> CreateSchedule(v1::ScheduleRecord rec, std::vector<std::string> parse_problems);
  // Pauses, resumes, deletes or runs a schedule now (then answered once the
  // run's job is submitted, the run in the view's history). Durable first.
  absl::StatusOr<v1::ScheduleView> UpdateSchedule(const std::string& name, v1::ScheduleAction action);
  // The published schedules; only `name`'s when it is not "".
  std::vector<v1::ScheduleView> ListSchedules(const std::string& name);
  // Checks each schedule's run as its owner's submission (the queue's ACLs
  // then; a refusal is the run's outcome). Call before Start; without it
  // runs are not checked again (security off).
  using RunAdmission = std::function<absl::Status(v1::JobSpec* spec)>;
  void SetRunAdmission(RunAdmission admit) { run_admission_ = std::move(admit); }

  // ---- the log hub (job_manager_logs.cc) ----
  // `hub` hears of every change to a job (nullptr: no more). Call before
  // Start, and with nullptr before the hub goes.
  void SetLogHub(LogHub* hub);
  // A count that rises while the server's doors are saturated (connections
  // refused at a cap or for want of descriptors, or shut down for
  // newcomers). Each loop turn in which it rose is excused to the nodes
  // (ControlState::ExcuseOverload): liveness is judged on what the server
  // could read. Set before Start.
  void SetOverloadProbe(std::function<int64_t()> probe);
  // Called at each turn of the loop before its round, and before any order
  // leaves for an agent or a job master (the server sets the same on its
  // backend: AgentStreams::SetFence): with an etcd store, a server whose
  // leadership may have lapsed exits there rather than place, launch or
  // kill anything. Set before Start.
  void SetOrderFence(std::function<void()> check);
  // Runs the fence (nothing without one); any thread, no lock.
  void CheckOrderFence() const {
    if (order_fence_) order_fence_();
  }
  // Where the tasks of `job` are. NotFound naming the job.
  absl::StatusOr<JobLogPlaces> LogPlaces(const std::string& job);
  // The backend, for the log hub's and the exec relay's orders
  // (ExecutionBackend::ReadLog ...), under the shell's lock.
  bool ReadLog(const std::string& node, v1::LogRead read);
  bool AckLog(const std::string& node, v1::LogAck ack);
  bool CancelLog(const std::string& node, v1::LogCancel cancel);
  bool OpenExec(const std::string& node, v1::ExecOpen open);
  bool ExecInput(const std::string& node, v1::ExecInput input);

  // ---- agents ----
  // Registers (or re-registers) a node by connection `session` (the number
  // the backend gave it: AgentStreams::Open); once accepted, the backend
  // sends the node's orders there. Errors: AlreadyExists when another live
  // agent holds the name; InvalidArgument for a bad NodeInfo.
  absl::Status RegisterAgent(const v1::NodeInfo& info, uint64_t session);
  // Connection `session` of `node` closed (nothing when a newer one speaks
  // for the node).
  void AgentDisconnected(const std::string& node, uint64_t session);
  void OnHeartbeat(const std::string& node, const v1::Heartbeat& hb);
  void OnTaskStatus(const std::string& node, const v1::TaskStatus& status);
  void OnAgentDraining(const std::string& node, const v1::Draining& draining);
  // Keeps the samples of a node's running tasks (ResourceBook): those of
  // tasks the views place on that node only. Never takes the shell's lock.
  void OnTaskResources(const std::string& node, const v1::TaskResourceReport& report);
  // A job's tasks' samples since `since` (0: all kept) and its sums.
  // NotFound naming the job.
  absl::StatusOr<v1::JobResourcesResponse> JobResources(const v1::JobResourcesRequest& request);

  // The address the server is reachable on (bound, so never port 0); job
  // masters report to it. Call before Start.
  void SetServerAddress(const std::string& address);
  // What launches carry of the jobs' credentials (TaskSecrets, the launch
  // contract). Call before Start.
  void SetJobCredentials(TaskSecrets::JobCredentials of, TaskSecrets::JobCredentials worker_secret_of,
                         TaskSecrets::JobCredentials user_token_of = {});
  // The user of job `id` while it has not ended (what a job's user
  // credential speaks for); nullopt for an ended or unknown job. Thread-safe.
  std::optional<std::string> LiveJobUser(uint64_t id);
  // How secret env values are sealed at submission and opened into launch
  // orders. Call before Start; without it they are kept as given.
  using SecretSealer = std::function<absl::StatusOr<std::string>(const std::string& plain)>;
  void SetSecretValues(SecretSealer seal, TaskSecrets::SecretOpener open);

  // Runs one scheduling round now (tests, benchmarks).
  void ScheduleNowForTest();
  ManagerStats Stats();
  const ServerConfig& config() const { return config_; }
  // The published views, for readers that take them directly (the HTTP API
  // and /metrics), never under the lock; jobs recovered at start-up are
  // published first.
  const ViewStore& Views();

 private:

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // AdministerNode's change of the control state; `resp` gets a drain's
  // evictions.
  absl::Status AdministerNodeLocked(NodeAdmin what, const v1::NodeAdminRequest& req, absl::Time now,
                                    v1::NodeAdminResponse* resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Schedules in a loop turn: records what their runs' submissions
  // answered, takes the runs due now (ControlState::TakeDueSchedules).
  std::vector<ScheduleFire> TakeScheduleWork(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Submits the runs as their owners' jobs through SubmitAsync (a turn's
  // effect, without the lock). Each answer is queued for the next turn (a
  // callback of SubmitAsync never takes mu_).
  void SubmitScheduled(std::vector<ScheduleFire> fires) ABSL_LOCKS_EXCLUDED(mu_);
  // The callback that queues a run's answer.
  SubmitDone ScheduleOutcome(ScheduleFire fire);
  // Where the views place each task of a job, by (role, index), kept while
  // its view is the same (OnTaskResources).
  struct TaskPlaces {
    std::shared_ptr<const v1::JobView> view;
    std::map<std::pair<std::string, int>, std::string> nodes;
  };
  std::shared_ptr<const TaskPlaces> PlacesOf(const std::string& job) ABSL_LOCKS_EXCLUDED(places_mu_);
  absl::Mutex places_mu_;
  std::map<std::string, std::shared_ptr<const TaskPlaces>> places_ ABSL_GUARDED_BY(places_mu_);
  size_t places_tasks_ ABSL_GUARDED_BY(places_mu_) = 0;
  absl::Time next_resource_prune_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  RunAdmission run_admission_;
  // Runs' submissions answered, waiting for the loop to record them.
  absl::Mutex schedule_outcomes_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<std::pair<ScheduleFire, absl::StatusOr<std::string>>> schedule_outcomes_
      ABSL_GUARDED_BY(schedule_outcomes_mu_);
  // SubmitAsync's path for a job array (spec.array): every element in one
  // durable batch, taken in and answered together.
  void SubmitArray(CheckedSpec checked, SubmitDone done) ABSL_LOCKS_EXCLUDED(mu_);

  // Submissions the store answered (a job, or an array's elements, and
  // the store's status), for TakeInCommitted.
  struct Committed {
    std::shared_ptr<std::vector<PreparedJob>> jobs;
    bool array = false;  // one answer for all, named by the array
    absl::Status st;
    SubmitDone done;
  };
  using Answers = std::vector<std::pair<SubmitDone, absl::StatusOr<v1::SubmitResponse>>>;
  // What a turn leaves to do once the lock is released, in this order: the
  // persister's next write goes to the store; the submissions it took in
  // are answered (their views published by then); the schedules' runs due
  // are submitted.
  struct Effects {
    std::optional<Persister::Write> write;
    Answers answers;
    std::vector<ScheduleFire> fires;
    bool empty() const { return !write && answers.empty() && fires.empty(); }
  };
  // One event's hold of the lock. When it ends it releases the lock, then
  // runs what the event left in effects_ (RunEffects). A turn never waits
  // on a condition while effects are left (another turn would run them).
  class ABSL_SCOPED_LOCKABLE Turn {
   public:
    explicit Turn(JobManager* m) ABSL_EXCLUSIVE_LOCK_FUNCTION(m->mu_);
    ~Turn() ABSL_UNLOCK_FUNCTION();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    JobManager* const m_;
  };
  void RunEffects(Effects effects) ABSL_LOCKS_EXCLUDED(mu_);
  // A store answer to a submission: the one way a durable submission (or a
  // refused one) is taken in. Queued for the loop's next round while the
  // loop runs (a group commit's submissions go into one round); taken in at
  // once otherwise (before Start, while stopping).
  void OnCommitted(Committed committed) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the persister's next write into effects_, sent when the turn ends
  // (one in flight at a time: none while one is).
  void TakeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends a write to the store, without the lock: its answer, which takes
  // the lock, may come on this thread or on the store's.
  void SendWrite(Persister::Write write) ABSL_LOCKS_EXCLUDED(mu_);
  // One write in one or more batches (several on etcd: docs/store.md),
  // committed one after another; the write is answered when the last one is
  // or at the first failure (what follows it is not sent).
  struct WriteInParts {
    Persister::Write write;
    std::vector<WriteBatch> parts;
    size_t next = 0;
  };
  void CommitPart(std::shared_ptr<WriteInParts> w) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the next write (TakeWrite) and returns which write a durability
  // wait must see answered for the changes made so far: this one, or, while
  // another is in flight, the one after it (taken when that one is
  // answered); nullopt when nothing waits to be written or is in flight.
  std::optional<uint64_t> TakeDurableTarget() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the turn that took it: waits until the store answered `target`
  // (10 s at most) and returns its result.
  absl::Status AwaitDurable(std::optional<uint64_t> target) ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes the loop when an event asked for a round.
  void WakeIfAsked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After each event: wake the loop if asked, publish the jobs that changed,
  // take what the persister gathered (sent when the turn ends).
  void AfterEvent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After an agent's report (a task's status, a heartbeat): as AfterEvent,
  // but the jobs' views go out paced, as the nodes' do. A job's view is
  // built whole, every task, so a 1,000-task job whose tasks report one by
  // one would be built a thousand times for its start; paced, it is built
  // once per pace (at least 2 ms, 20 times what the last build took); what
  // waits goes out with the next report after the pace or the loop's next
  // turn (at most a tick). A reader publishes what waits first
  // (PublishWaitingViews): a read after a report still sees it.
  void AfterAgentEvent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishJobsPaced() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes in what waits in committed_ (those of one group commit usually go
  // into one round: placed together, one write, their views published
  // once); their answers go into effects_, given when the turn ends (a
  // client's callback never runs under the lock).
  void TakeInCommitted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the counters (control state, store, rounds) to views_.
  void PublishStats() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits on cv_ until `done` holds or `timeout` passes; false on timeout.
  template <typename Pred>
  bool WaitFor(absl::Duration timeout, Pred done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Time deadline = absl::Now() + timeout;
    while (!done()) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) return done();
    }
    return true;
  }

  const ServerConfig config_;
  StateStore* const store_;
  const Clock* const clock_;
  // The queue tree, as the scheduler has it (it never changes): what a
  // submission's queue is checked against without the lock.
  const core::QueueConfig queues_;

  ViewStore views_;  // what readers see; its own lock, never mu_
  // Jobs recovered from the store whose views the loop has not published
  // yet (only just after a restart): readers publish the rest first.
  std::atomic<bool> recovered_unpublished_{false};
  // Job views held back by AfterAgentEvent's pace.
  std::atomic<bool> job_views_held_{false};
  absl::Time next_job_publish_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // real time
  // Publishes every recovered job's view still missing (readers, once), and
  // the views held back by the pace.
  void PublishWaitingViews() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Mutex mu_;
  absl::CondVar cv_;       // a store answer, for those who wait for one
  absl::CondVar loop_cv_;  // the loop's own: a round asked for, or the stop
  // The launch contract between the control state and the backend: every
  // launch is completed with secrets_ before the backend sends it.
  TaskSecrets secrets_ ABSL_GUARDED_BY(mu_);
  LaunchContract contract_ ABSL_GUARDED_BY(mu_);
  SecretSealer seal_secret_;  // set before Start, read by submissions without the lock
  // Excuses the time since the last turn to the nodes when the overload
  // probe rose meanwhile.
  void ExcuseOverloadLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seals every secret env value of `spec` in place (none without a sealer).
  absl::Status SealSecrets(v1::JobSpec* spec) const;
  ControlState control_ ABSL_GUARDED_BY(mu_);
  bool round_asked_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Committed> committed_ ABSL_GUARDED_BY(mu_);
  Effects effects_ ABSL_GUARDED_BY(mu_);  // of the turn that holds the lock
  bool loop_running_ ABSL_GUARDED_BY(mu_) = false;  // else submissions are taken in by the store's answer (OnCommitted)
  int submissions_unanswered_by_store_ ABSL_GUARDED_BY(mu_) = 0;  // Stop waits for them
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_loop_ ABSL_GUARDED_BY(mu_);  // when the loop last ran (stall detection)
  std::function<int64_t()> overload_probe_;   // set before Start, then read by the loop only
  std::function<void()> order_fence_;         // set before Start, then read by the loop only
  int64_t last_overload_count_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_overload_log_ ABSL_GUARDED_BY(mu_);
  absl::Time next_publish_ ABSL_GUARDED_BY(mu_);  // of the nodes and queues views
  // While the loop waits: when it will wake by itself (InfinitePast while it
  // runs). WakeIfAsked wakes it sooner for node views changed meanwhile.
  absl::Time loop_sleeps_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Histogram round_seconds_ ABSL_GUARDED_BY(mu_) = LatencyHistogram();
  std::thread thread_;
};

}  // namespace trainyard::server
