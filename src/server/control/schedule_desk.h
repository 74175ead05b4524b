// ScheduleDesk: the control state's schedules (server/schedules.h: the
// records, their due times and runs). It creates, pauses, resumes and
// deletes them for the clients; takes the due runs each loop turn through
// their concurrency policy (skip, queue beside, replace); counts the runs
// handed to the shell until their submission is answered; writes every
// change as the schedule's metadata key into the persister's batch, a few
// per batch (etcd's limits); and publishes the views. Whether a run has
// ended is the jobs' business: the desk asks `live`. A run that replaces
// others does not end them itself: it names them (TakeDue) and the control
// state kills them. Part of the control state: single-threaded, no I/O.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"
#include "server/schedules.h"
#include "server/view_store.h"
#include "store/state_store.h"

namespace trainyard::server {

class ScheduleDesk {
 public:
  // Whether a schedule's run has not ended: a job's name, or an array's
  // (live while an element is).
  using Live = std::function<bool(const std::string& run)>;
  // `min_interval`: the shortest interval a new schedule may have
  // (ServerConfig::schedule_min_interval_seconds).
  ScheduleDesk(absl::Duration min_interval, Live live) : min_interval_(min_interval), live_(std::move(live)) {}

  // The schedules kept in the store's metadata (recovery).
  void Recover(const std::map<std::string, std::string>& meta) { schedules_.Recover(meta); }
  const v1::ScheduleRecord* Find(const std::string& name) const { return schedules_.Find(name); }

  // Errors: InvalidArgument (an interval shorter than the server allows, a
  // bad record), AlreadyExists, ResourceExhausted (Schedules' limits).
  absl::StatusOr<v1::ScheduleView> Create(v1::ScheduleRecord rec, absl::Time now, WriteBatch* batch);
  // Pause, resume, delete (the view as it was), or run now (into `fires`).
  // NotFound naming the schedule; InvalidArgument for another action.
  absl::StatusOr<v1::ScheduleView> Update(const std::string& name, v1::ScheduleAction action, absl::Time now,
                                          std::vector<ScheduleFire>* fires, WriteBatch* batch);
  // A run the control state is to end (concurrency: replace): `run` (a job,
  // or an array's name) is replaced by the next run of `schedule`.
  struct Replaced {
    std::string run;
    std::string schedule;
  };
  // The runs due by `now` that their policy lets go (a skipped run is
  // recorded as such), for the shell to submit; the runs they replace go
  // into `replaced`.
  std::vector<ScheduleFire> TakeDue(absl::Time now, std::vector<Replaced>* replaced, WriteBatch* batch);
  // The shell's submission of `fire` was answered: the run's job, or why
  // it was refused.
  void RunDone(const ScheduleFire& fire, const absl::StatusOr<std::string>& job, WriteBatch* batch);
  // The views, when a schedule changed or a second passed (their next runs).
  void Publish(ViewStore* views, absl::Time now);

  // Writes the changes waiting into `batch`, as many as one batch may
  // still take.
  void Write(WriteBatch* batch);
  // The persister's batch was taken: the next one takes kWritesPerBatch again.
  void BatchTaken() { writes_in_batch_ = 0; }
  // A write that carried `key` failed: it is written again as it is now.
  void Rewrite(const std::string& key) { schedules_.Rewrite(key); }

  // A schedule's view: its record (not its spec's commands and env), next
  // run, and runs that have not ended.
  v1::ScheduleView ViewOf(const v1::ScheduleRecord& rec) const;

 private:
  const absl::Duration min_interval_;
  const Live live_;
  Schedules schedules_;
  size_t writes_in_batch_ = 0;  // in the persister's batch now
  // Runs handed to the shell whose submission was not answered yet.
  std::map<std::string, int> submitting_;
  absl::Time next_publish_ = absl::InfinitePast();
};

}  // namespace trainyard::server
