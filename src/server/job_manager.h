// JobManager: the server's single source of truth while it runs — jobs and
// their tasks, connected agents, and the scheduler core. Clients and agents
// call into it (through the gRPC services); it persists every change to the
// StateStore, runs scheduling rounds on events (submit, task end, node
// change) and on a short timer, and sends launch / kill orders to agents.
// One mutex guards everything; scheduling happens on its own thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/scheduler/scheduler.h"
#include "proto/service.pb.h"
#include "server/config.h"
#include "api/task_env.h"
#include "store/state_store.h"

namespace trainyard::server {

// One connected agent as the manager sees it. Send never blocks.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  virtual void Send(v1::ServerMessage msg) = 0;
};

// Counters for /metrics and tests.
struct ManagerStats {
  int64_t submitted = 0;
  int64_t rounds = 0;
  int64_t placements = 0;
  int64_t heartbeats = 0;
};

class JobManager {
 public:
  JobManager(ServerConfig config, StateStore* store, std::unique_ptr<core::Scheduler> scheduler,
             const Clock* clock);
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
  // The same without blocking: `done` runs once the job is durable (on the
  // store's thread) or at once on a validation error. Submit waits on it.
  using SubmitDone = std::function<void(absl::StatusOr<v1::SubmitResponse>)>;
  void SubmitAsync(v1::JobSpec spec, SubmitDone done);
  absl::StatusOr<v1::JobView> Describe(const std::string& job);
  std::vector<v1::JobView> ListJobs(bool include_finished);
  // Kills a job: tasks get SIGTERM then SIGKILL; state KILLED.
  absl::StatusOr<v1::JobState> Kill(const std::string& job, const std::string& reason);
  std::vector<v1::NodeView> ListNodes();
  v1::ListQueuesResponse ListQueues();
  // A job master's verdict: SUCCEEDED ends the job and stops its other
  // tasks (parameter servers); FAILED ends it with the reason.
  absl::Status ReportOutcome(const v1::JobOutcomeRequest& request);

  // Reads up to max_bytes of one task attempt's log from its node, starting
  // at `offset`. attempt -1 = the latest. Errors: unknown job/task, node not
  // connected, no answer in time.
  absl::StatusOr<v1::LogData> ReadLog(const std::string& job, const std::string& role, int index,
                                      int attempt, int64_t offset, int max_bytes, bool stderr);
  // Tasks of a job as (role, index), for `logs JOB` without a task.
  absl::StatusOr<std::vector<std::pair<std::string, int>>> TasksOf(const std::string& job);

  // ---- agents ----
  // Registers (or re-registers) a node. Errors: AlreadyExists when another
  // live agent holds the name; InvalidArgument for a bad NodeInfo.
  absl::Status RegisterAgent(const v1::NodeInfo& info, AgentLink* link);
  void AgentDisconnected(const std::string& node, AgentLink* link);
  void OnHeartbeat(const std::string& node, const v1::Heartbeat& hb);
  void OnTaskStatus(const std::string& node, const v1::TaskStatus& status);
  void OnLogData(const v1::LogData& data);

  // The address the server is reachable on (bound, so never port 0); job
  // masters report to it. Call before Start.
  void SetServerAddress(const std::string& address);

  // Runs one scheduling round now (tests, benchmarks).
  void ScheduleNowForTest();
  ManagerStats Stats();
  const ServerConfig& config() const { return config_; }

 private:
  struct TaskRt;
  struct JobRt;
  struct NodeRt;
  struct LogWaiter;

  // A submission validated and named, waiting for its record to be durable.
  struct PreparedJob {
    v1::JobRecord rec;
    v1::JobEventRecord first_event;
  };
  absl::StatusOr<PreparedJob> PrepareSubmit(v1::JobSpec spec);
  // Takes the job in (or drops its reserved name when `st` says it was not kept).
  absl::StatusOr<v1::SubmitResponse> AcceptCommitted(PreparedJob& prepared, const absl::Status& st);
  void Loop();
  void RunRound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyPlacement(const core::JobPlacement& p, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyPreemption(const core::Preemption& p, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchTask(JobRt& job, int task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // host:port of the job's master as placed now ("" when it has none).
  std::string JobMasterAddress(const JobRt& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The environment and files of task `task` as placed now.
  api::TaskEnv EnvFor(const JobRt& job, int task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends every running task of the job but `except` its files again (the
  // hosts file after a task moved).
  void PushFiles(JobRt& job, int except) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for the job's running tasks on `node` only.
  void PushFilesTo(JobRt& job, const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends task `task` its files; false when its node is not connected.
  bool SendFiles(JobRt& job, int task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KillTasks(JobRt& job, int grace_ms, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndJob(JobRt& job, v1::JobState state, const std::string& message, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinish(JobRt& job, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TaskEnded(JobRt& job, int task, const v1::TaskStatus& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckSuccess(JobRt& job, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckNodes(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NodeLost(NodeRt& node, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the node READY: back in the scheduler (adopting its recovered
  // tasks) and in the store.
  absl::Status NodeUp(NodeRt& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReplaceTask(JobRt& job, int task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Requeue(JobRt& job, const std::string& reason, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdoptRecoveredTasks(NodeRt& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes a job recovered from the store into the scheduler; its placed tasks
  // are adopted as their nodes register.
  // Sizes the per-task bookkeeping of a job from its record: the launch each
  // task's statuses must belong to, and whether its agent had it (RUNNING).
  void LoadTaskState(JobRt& job);
  // False when the job cannot be recovered (logged; it stays in the store).
  bool RecoverIntoScheduler(JobRt& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that a task of `job` is placed on `node` (node_jobs_).
  void IndexTask(const JobRt& job, const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live (job, task) pairs placed on `node` now, from node_jobs_
  // (dropping jobs that have no live task there any more).
  std::vector<std::pair<JobRt*, int>> TasksOn(const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task the server has as live on `node` that its agent no longer runs
  // (its end was lost in a crash): ends it, or starts it again per policy.
  void TaskGone(JobRt& job, int task, const std::string& node, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyTaskStatus(const std::string& node, const v1::TaskStatus& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reconcile(NodeRt& node, const v1::Heartbeat& hb) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddEvent(JobRt& job, const std::string& kind, const std::string& text, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Persist(JobRt& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands batch_ and the dirty jobs to the store (asynchronously, one write
  // in flight at a time).
  void Flush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A Flush's write `seq` was answered with `st`; `names` were its jobs.
  void FlushDone(uint64_t seq, const std::vector<std::string>& names, const absl::Status& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes what changed and waits until the store has it (10 s at most).
  absl::Status WaitDurable(std::unique_lock<std::mutex>& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::JobView View(const JobRt& job, bool with_events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobRt* FindJob(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int FindTask(const JobRt& job, const std::string& role, int index) const;
  absl::Status CheckQueue(const std::string& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddJobMasterRole(v1::JobSpec* spec, const std::string& name);
  void SetJobState(JobRt& job, v1::JobState state, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerConfig config_;
  StateStore* const store_;
  const Clock* const clock_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<core::Scheduler> scheduler_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<JobRt>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<NodeRt>> nodes_ ABSL_GUARDED_BY(mu_);
  // Node -> names of jobs with a task placed there (or once placed there:
  // TasksOn prunes), so node events need not walk every job.
  std::map<std::string, std::set<std::string>> node_jobs_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<LogWaiter>> log_waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_job_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::string server_address_ ABSL_GUARDED_BY(mu_);
  uint64_t next_log_request_ ABSL_GUARDED_BY(mu_) = 1;
  WriteBatch batch_ ABSL_GUARDED_BY(mu_);  // changes not yet handed to the store
  std::set<std::string> dirty_jobs_ ABSL_GUARDED_BY(mu_);  // records to write at Flush
  std::set<std::string> dirty_nodes_ ABSL_GUARDED_BY(mu_);  // node records to write at Flush
  // Node -> jobs whose files changed while the node was disconnected.
  std::map<std::string, std::set<std::string>> stale_files_ ABSL_GUARDED_BY(mu_);
  // Victims waiting for their tasks to stop, so a round need not walk every
  // job ever submitted to find those past their grace.
  std::set<std::string> preempting_ ABSL_GUARDED_BY(mu_);
  // Next suffix to try per submitted name ("train" -> 3 after train, train-2).
  std::map<std::string, int> next_suffix_ ABSL_GUARDED_BY(mu_);
  bool flush_in_flight_ ABSL_GUARDED_BY(mu_) = false;  // a Flush's write not yet answered
  uint64_t flush_seq_sent_ ABSL_GUARDED_BY(mu_) = 0;  // Flush writes handed to the store
  uint64_t flush_seq_done_ ABSL_GUARDED_BY(mu_) = 0;  // ... and answered (in order)
  std::set<uint64_t> failed_flushes_ ABSL_GUARDED_BY(mu_);  // the last failed ones
  absl::Status flush_error_ ABSL_GUARDED_BY(mu_);  // the last write's error, OK once one succeeds
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ManagerStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  absl::Time last_liveness_check_ ABSL_GUARDED_BY(mu_);  // CheckNodes runs at most every 100 ms
  std::thread thread_;
};

}  // namespace trainyard::server
