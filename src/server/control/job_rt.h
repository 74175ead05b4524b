// JobRt: the control state's runtime record of one job (its JobRecord, what
// the store keeps, and beside it what only the running server knows), with a
// TaskRt per task; and the small functions of one job's record that the
// control state's handlers and rooms share. Part of the control state.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/states.h"
#include "core/resources/port_ranges.h"
#include "proto/service.pb.h"
#include "server/control/node_table.h"
#include "server/event_list.h"
#include "server/logs/log_places.h"

namespace trainyard::server {

// The server's runtime record of one task of a job, beside its TaskRecord
// (which is what the store keeps): what the heartbeat reconcile and the
// drain need to know of its current launch.
struct TaskRt {
  // The attempt number at which the current launch started; a status with
  // a lower attempt is from an older launch and ignored.
  int launch_base = 0;
  // Heartbeats in a row from its node that did not list it, and whether the
  // agent has shown it has the current launch (a status or a heartbeat
  // entry of that attempt).
  int missing_beats = 0;
  bool acked = false;
  // Told to leave a drained node; once it has stopped it is placed
  // elsewhere without charging its restart budget.
  bool evicting = false;
};

struct JobRt {
  v1::JobRecord rec;            // spec, state, tasks (TaskRecord)
  bool in_scheduler = false;    // known to the scheduler core
  bool ending = false;          // final state decided; tasks being stopped
  bool preempting = false;      // victim; requeued once its tasks stop
  // An elastic job stopping to be placed again at a new size (preempting
  // too, with no preempted_by): no budget is charged (docs/elastic.md).
  bool resizing = false;
  // An elastic job's current size was placed then: it grows no sooner
  // than elasticGrowAfterMs after.
  absl::Time sized_at = absl::InfinitePast();
  std::string preempted_by;
  // "preempted by job X (priority production) at T": leads the pending
  // reason until the job is placed again, so the queue's own reason does
  // not hide why a job that ran is waiting.
  std::string preempted_note;
  bool unschedulable = false;   // its last reason said it can never fit
  absl::Time preempt_deadline;
  // When it last went back to the queue (InfinitePast: never; it has waited
  // since its submission): the pending-time histogram's start.
  absl::Time queued_since = absl::InfinitePast();
  std::string job_master;       // host:port of its master task, "" if none
  // An order to checkpoint, given to its master while its tasks are to be
  // stopped with a grace (a preemption, a time limit): the tasks are stopped
  // once the master reports its workers saved, or at the order's deadline.
  // id 0: none open; `orders` counts the ids given.
  v1::CheckpointOrder checkpoint;
  int64_t orders = 0;
  std::string stop_reason;      // the stop's reason, for the kill that ends the order
  // Per task, by its index in rec.tasks.
  std::vector<TaskRt> task_rt;
  bool recovered_placed = false;  // placed before a restart; waiting for nodes
  // Per role: its first task. A role's tasks follow it by index (as the job
  // was made), so FindTask looks one up without a pass over all of them.
  std::map<std::string, int, std::less<>> role_start;
  // The event log as describe shows it. Jobs recovered from the store load
  // their earlier events on first describe (events_loaded false until then).
  EventList events;
  bool events_loaded = true;
  // Which of its queue's counts holds it (JobCounts).
  enum class Counted : uint8_t { kNone, kPending, kRunning };
  Counted counted = Counted::kNone;
};

// Sizes the per-task bookkeeping of a job from its record: the launch each
// task's statuses must belong to, and whether its agent had it (RUNNING).
void LoadTaskState(JobRt& job);
// The index in job.rec.tasks of task `index` of `role`; -1 when it has none.
int FindTask(const JobRt& job, const std::string& role, int index);
// The spec of the role of task `task`; null when the spec has no such role.
const v1::ReplicaSpec* ReplicaOf(const JobRt& job, int task);

int64_t ToMs(absl::Time t);
// When a finished job ended (Unix ms): its end time, else (records from
// before every end had one) when it was deleted, else submitted.
int64_t EndOf(const v1::JobRecord& rec);
// The store's metadata key under which the next job id is kept when jobs
// are purged (a purged job may have had the highest id).
inline constexpr char kNextJobIdFloor[] = "next_job_id_floor";
// Notes a launch of `t` at its attempt on its node: sets launch_attempt
// and appends to launches (a launch sent again is not new; the oldest go
// past 100).
void RecordLaunch(v1::TaskRecord& t);
// Where the job's tasks keep their logs, for the log hub: each task's
// launches (which node ran which attempts) and the state of those nodes, so
// an attempt is read where it ran, not where the task is now.
JobLogPlaces LogPlacesOf(const JobRt& job, const NodeTable& nodes);
v1::JobEvent ToView(const v1::JobEventRecord& e);
// A job recovered from the store gets the events written before the restart,
// then those since (which may be in the store too: not twice).
void LoadStoredEvents(JobRt* job, const std::vector<v1::JobEventRecord>& stored);

// A task waiting for a place: pending, on no node.
inline bool Waiting(const v1::TaskRecord& t) { return t.node().empty() && t.state() == v1::TASK_PENDING; }

}  // namespace trainyard::server
