// ControlState: elastic jobs (a role with minCount, docs/elastic.md). Such a
// job runs at any size from its minCount tasks up to its count. Its size
// changes only as a whole: its tasks checkpoint and stop, and it is placed
// again at the size that fits then, with the next membership epoch, worker
// ids dense from 0 and its framework's environment (WORLD_SIZE, TF_CONFIG,
// the MPI hostfile, TRAINYARD_NUM_WORKERS) naming the tasks of that size.
// It grows when room for more of its tasks appears; it shrinks when work
// of a higher priority preempts it and only part of its room is left.
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/convert.h"
#include "api/roles.h"
#include "server/control/control_state.h"
#include "server/control/elastic_roles.h"
#include "server/control/job_rt.h"

namespace trainyard::server {
std::string ControlState::GrowElastic(JobRt& job, absl::Time now) {
  std::vector<std::pair<std::string, int32_t>> want;
  for (const v1::TaskRecord& t : job.rec.tasks()) {
    if (Waiting(t)) want.emplace_back(t.role(), t.index());
  }
  if (want.empty()) return "";
  auto [placed, all] = ElasticSize(FactsOf(job.rec));
  std::string at = absl::StrCat("elastic: runs ", placed, " of ", all, " tasks (membership epoch ",
                                job.rec.membership_epoch(), "); grows when room for more appears");
  // Only a gang that runs whole, and has run at this size a while, grows:
  // each resize costs every task a checkpoint and a restart. A task of it
  // that ended (a worker done before the others) stays ended: the room it
  // left is not a reason to start the job again. Until then one task is
  // tried, not all that wait: this runs every 100 ms.
  bool all_run = job.rec.state() == v1::JOB_RUNNING;
  for (const v1::TaskRecord& t : job.rec.tasks()) {
    if (!t.node().empty() && t.state() != v1::TASK_RUNNING) all_run = false;
  }
  absl::Duration after = absl::Milliseconds(config_.elastic_grow_after_ms);
  bool ready = all_run && now >= job.sized_at + after;
  if (!ready) want.resize(1);
  absl::Status why;
  int fit = scheduler_->RoomForTasks(job.rec.name(), want, &why);
  if (fit == 0) {
    std::string text(why.message());
    // "job j task worker-3: needs ..." or "job j: queue ..." -> what follows.
    size_t colon = text.find(": ");
    std::string job_prefix = absl::StrCat("job ", job.rec.name());
    if (colon != std::string::npos && (absl::StartsWith(text, job_prefix + " task ") ||
                                       text.compare(0, colon, job_prefix) == 0)) {
      text = text.substr(colon + 2);
    }
    return text.empty() ? at : absl::StrCat(at, ": ", text);
  }
  if (!all_run) return absl::StrCat(at, ": room for more; it grows only while all its tasks run");
  if (!ready) {
    return absl::StrCat(at, ": room for more; it grows once it has run ", absl::FormatDuration(after),
                        " at this size (elasticGrowAfterMs)");
  }
  Resize(job,
         absl::StrCat("growing from ", placed, " to ", placed + fit, " of ", all, " tasks: room for ", fit,
                      " more appeared"),
         now);
  return "";
}

void ControlState::Resize(JobRt& job, const std::string& note, absl::Time now) {
  job.preempting = true;
  job.resizing = true;
  preempting_.insert(job.rec.name());
  job.preempted_by.clear();
  job.preempted_note = note;
  job.preempt_deadline = now + absl::Milliseconds(config_.preemption_grace_ms);
  AddEvent(job, "resizing",
           absl::StrCat(note, "; its tasks checkpoint and stop, and it is placed again at the new size"), now);
  // A job with a master is told to checkpoint first (its workers save and
  // report the step); one without gets SIGTERM and the preemption's grace.
  StopWithGrace(job, config_.preemption_grace_ms, note, now);
  MaybeFinish(job, now);
  Persist(job);
}

void ControlState::NewMembership(JobRt& job, absl::Time now) {
  job.sized_at = now;
  AddEvent(job, "membership", NextMembership(&job.rec), now);
}

}  // namespace trainyard::server
