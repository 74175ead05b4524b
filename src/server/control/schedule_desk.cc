// ScheduleDesk (see schedule_desk.h).
#include "server/control/schedule_desk.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainyard::server {

void ScheduleDesk::Write(WriteBatch* batch) {
  size_t room = Schedules::kWritesPerBatch - std::min(Schedules::kWritesPerBatch, writes_in_batch_);
  for (auto& [key, value] : schedules_.TakeWrites(room)) {
    ++writes_in_batch_;
    if (value.has_value()) {
      batch->PutMeta(key, std::move(*value));
    } else {
      batch->DeleteMeta(key);
    }
  }
}

v1::ScheduleView ScheduleDesk::ViewOf(const v1::ScheduleRecord& rec) const {
  v1::ScheduleView view;
  *view.mutable_schedule() = rec;
  // Every user reads the views: the spec (its env, its commands) is not in
  // them, as a job's is not; its queue and priority are.
  v1::JobSpec* spec = view.mutable_schedule()->mutable_spec();
  v1::JobSpec shown;
  shown.set_queue(spec->queue());
  shown.set_priority(spec->priority());
  *spec = std::move(shown);
  absl::Time next = schedules_.NextDue(rec);
  if (next != absl::InfiniteFuture()) view.set_next_run_unix_ms(absl::ToUnixMillis(next));
  for (const std::string& job : schedules_.Active(rec.name())) {
    if (live_(job)) view.add_live_jobs(job);
  }
  return view;
}

absl::StatusOr<v1::ScheduleView> ScheduleDesk::Create(v1::ScheduleRecord rec, absl::Time now, WriteBatch* batch) {
  std::string name = rec.name();
  if (absl::Status st = Schedules::CheckInterval(rec, min_interval_, now); !st.ok()) return st;
  if (absl::Status st = schedules_.Create(std::move(rec), now); !st.ok()) return st;
  Write(batch);
  return ViewOf(*schedules_.Find(name));
}

absl::StatusOr<v1::ScheduleView> ScheduleDesk::Update(const std::string& name, v1::ScheduleAction action,
                                                      absl::Time now, std::vector<ScheduleFire>* fires,
                                                      WriteBatch* batch) {
  const v1::ScheduleRecord* rec = schedules_.Find(name);
  if (rec == nullptr) return absl::NotFoundError(absl::StrCat("schedule ", name, " not found"));
  v1::ScheduleView before = ViewOf(*rec);
  absl::Status st;
  switch (action) {
    case v1::SCHEDULE_PAUSE: st = schedules_.SetPaused(name, true, now); break;
    case v1::SCHEDULE_RESUME: st = schedules_.SetPaused(name, false, now); break;
    case v1::SCHEDULE_DELETE: st = schedules_.Delete(name); break;
    case v1::SCHEDULE_RUN:
      // By hand: now, whatever its last run does (as a job made from a
      // Kubernetes CronJob by hand).
      fires->push_back(ScheduleFire{.name = name, .due = now, .by_hand = true, .spec = RunSpec(*rec, now)});
      ++submitting_[name];
      break;
    default:
      return absl::InvalidArgumentError("action: one of pause, resume, delete, run");
  }
  if (!st.ok()) return st;
  Write(batch);
  if (action == v1::SCHEDULE_DELETE) return before;
  return ViewOf(*schedules_.Find(name));
}

std::vector<ScheduleFire> ScheduleDesk::TakeDue(absl::Time now, std::vector<Replaced>* replaced, WriteBatch* batch) {
  std::vector<ScheduleFire> fires;
  if (schedules_.EarliestDue() > now) return fires;
  for (const Schedules::Due& due : schedules_.TakeDue(now)) {
    const v1::ScheduleRecord& rec = *schedules_.Find(due.name);
    schedules_.DropEnded(rec.name(), [this](const std::string& job) { return !live_(job); });
    const std::vector<std::string>& runs = schedules_.Active(rec.name());
    std::vector<std::string> live = runs;
    // A run still being submitted counts as running (and has no job to end).
    if (auto s = submitting_.find(rec.name()); s != submitting_.end() && s->second > 0) {
      live.push_back("a run being submitted");
    }
    std::string message =
        due.missed > 0 ? absl::StrCat(due.missed, " earlier run", due.missed > 1 ? "s" : "", " missed (no server ran)")
                       : "";
    auto note = [&message](const std::string& more) { message = message.empty() ? more : message + "; " + more; };
    if (!live.empty()) {
      switch (rec.concurrency()) {
        case v1::CONCURRENCY_QUEUE:
          note(absl::StrCat("beside ", absl::StrJoin(live, ", "), ", not ended"));
          break;
        case v1::CONCURRENCY_REPLACE:
          for (const std::string& run : runs) replaced->push_back(Replaced{.run = run, .schedule = rec.name()});
          note(absl::StrCat("replaced ", absl::StrJoin(live, ", ")));
          break;
        default: {
          v1::ScheduleRun run;
          run.set_time_unix_ms(absl::ToUnixMillis(due.due));
          run.set_outcome("skipped");
          note(absl::StrCat(absl::StrJoin(live, ", "), " has not ended (concurrency: skip)"));
          run.set_message(message);
          schedules_.AddRun(rec.name(), std::move(run));
          continue;
        }
      }
    }
    ++submitting_[rec.name()];
    fires.push_back(ScheduleFire{.name = rec.name(), .due = due.due, .spec = RunSpec(rec, due.due), .message = message});
  }
  Write(batch);
  return fires;
}

void ScheduleDesk::RunDone(const ScheduleFire& fire, const absl::StatusOr<std::string>& job, WriteBatch* batch) {
  if (auto s = submitting_.find(fire.name); s != submitting_.end() && --s->second <= 0) submitting_.erase(s);
  v1::ScheduleRun run;
  run.set_time_unix_ms(absl::ToUnixMillis(fire.due));
  run.set_by_hand(fire.by_hand);
  if (job.ok()) {
    run.set_job(*job);
    run.set_outcome("submitted");
    run.set_message(fire.message);
  } else {
    run.set_outcome("refused");
    run.set_message(std::string(job.status().message()));
  }
  if (schedules_.AddRun(fire.name, std::move(run))) Write(batch);
}

void ScheduleDesk::Publish(ViewStore* views, absl::Time now) {
  if (!schedules_.changed() && now < next_publish_) return;
  auto out = std::make_shared<std::vector<v1::ScheduleView>>();
  out->reserve(schedules_.all().size());
  for (const auto& [name, rec] : schedules_.all()) out->push_back(ViewOf(rec));
  views->PutSchedules(std::move(out));
  schedules_.ClearChanged();
  next_publish_ = now + absl::Seconds(1);
}

}  // namespace trainyard::server
