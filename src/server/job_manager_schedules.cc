// JobManager: schedules (server/schedules.h). Created, changed and listed
// for the clients; in each loop turn the runs due are taken from the
// control state and submitted through SubmitAsync as their owners' jobs,
// and what each submission answered is recorded in the schedule's history
// at the next turn.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/job_manager.h"

namespace trainyard::server {

absl::StatusOr<v1::ScheduleView> JobManager::CreateSchedule(v1::ScheduleRecord rec,
                                                            std::vector<std::string> parse_problems) {
  // Its own name first: a run's name is made of it.
  if (absl::Status st = Schedules::CheckName(rec.name()); !st.ok()) return st;
  if (size_t bytes = rec.spec().ByteSizeLong(); bytes > Schedules::kMaxSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat("spec: ", bytes, " bytes is above the ", Schedules::kMaxSpecBytes,
                                                   " bytes a schedule's spec may hold"));
  }
  for (const v1::ReplicaSpec& rs : rec.spec().replicas()) {
    if (!rs.secret_env().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replicas.", rs.role(), ".env.", rs.secret_env().begin()->first,
          ": a schedule's spec cannot hold secret values (the schedule keeps its spec to submit again); give the "
          "job a file to read them from"));
    }
  }
  // Checked as each run will be, so a spec no run could submit is refused
  // now, naming the field.
  absl::StatusOr<CheckedSpec> checked =
      CheckSubmission(RunSpec(rec, clock_->Now()), std::move(parse_problems), config_, queues_);
  if (!checked.ok()) return checked.status();
  // The queue its runs go to, named: who may act on it is decided by it.
  if (rec.spec().queue().empty()) rec.mutable_spec()->set_queue(checked->spec.queue());
  absl::StatusOr<v1::ScheduleView> view;
  std::optional<uint64_t> durable;
  {
    Turn turn(this);
    view = control_.CreateSchedule(std::move(rec), clock_->Now());
    if (!view.ok()) return view;
    durable = TakeDurableTarget();
  }
  if (absl::Status st = AwaitDurable(durable); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("schedule ", view->schedule().name(),
                                               " is made, but the server cannot record it: ", st.message()));
  }
  Turn turn(this);
  control_.PublishSchedules(&views_, clock_->Now());
  return view;
}

absl::StatusOr<v1::ScheduleView> JobManager::UpdateSchedule(const std::string& name, v1::ScheduleAction action) {
  std::vector<ScheduleFire> fires;
  absl::StatusOr<v1::ScheduleView> view;
  std::optional<uint64_t> durable;
  {
    Turn turn(this);
    view = control_.UpdateSchedule(name, action, clock_->Now(), &fires);
    if (!view.ok()) return view;
    durable = TakeDurableTarget();
  }
  if (absl::Status st = AwaitDurable(durable); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("schedule ", name, ": the server cannot record the change: ", st.message()));
  }
  {
    Turn turn(this);
    control_.PublishSchedules(&views_, clock_->Now());
  }
  // A run by hand: answered once its job is submitted (or refused), the
  // run at the end of the history this answer shows.
  for (ScheduleFire& fire : fires) {
    absl::Notification answered;
    absl::StatusOr<std::string> job;
    ScheduleFire copy = fire;
    if (absl::Status admitted = run_admission_ ? run_admission_(&copy.spec) : absl::OkStatus(); !admitted.ok()) {
      job = admitted;
    } else {
      SubmitAsync(std::move(copy.spec), {}, [&](absl::StatusOr<v1::SubmitResponse> r) {
        job = r.ok() ? absl::StatusOr<std::string>(r->job()) : absl::StatusOr<std::string>(r.status());
        answered.Notify();
      });
      answered.WaitForNotification();
    }
    {
      Turn turn(this);
      control_.ScheduleRunDone(fire, job, clock_->Now());
      AfterEvent();
      control_.PublishSchedules(&views_, clock_->Now());
    }
    v1::ScheduleRun* run = view->mutable_schedule()->add_runs();
    run->set_time_unix_ms(absl::ToUnixMillis(fire.due));
    run->set_by_hand(true);
    run->set_job(job.ok() ? *job : "");
    run->set_outcome(job.ok() ? "submitted" : "refused");
    if (!job.ok()) run->set_message(std::string(job.status().message()));
    if (job.ok()) view->add_live_jobs(*job);
  }
  return view;
}

std::vector<v1::ScheduleView> JobManager::ListSchedules(const std::string& name) {
  std::vector<v1::ScheduleView> out;
  for (const v1::ScheduleView& v : *views_.Schedules()) {
    if (name.empty() || v.schedule().name() == name) out.push_back(v);
  }
  return out;
}

std::vector<ScheduleFire> JobManager::TakeScheduleWork(absl::Time now) {
  std::vector<std::pair<ScheduleFire, absl::StatusOr<std::string>>> outcomes;
  {
    absl::MutexLock lock(&schedule_outcomes_mu_);
    outcomes.swap(schedule_outcomes_);
  }
  for (const auto& [fire, job] : outcomes) control_.ScheduleRunDone(fire, job, now);
  std::vector<ScheduleFire> fires = control_.TakeDueSchedules(now);
  control_.PublishSchedules(&views_, now);
  return fires;
}

JobManager::SubmitDone JobManager::ScheduleOutcome(ScheduleFire fire) {
  auto shared = std::make_shared<ScheduleFire>(std::move(fire));
  return [this, shared](absl::StatusOr<v1::SubmitResponse> r) {
    absl::MutexLock lock(&schedule_outcomes_mu_);
    shared->spec.Clear();  // submitted: the history needs the rest only
    schedule_outcomes_.emplace_back(std::move(*shared), r.ok() ? absl::StatusOr<std::string>(r->job())
                                                               : absl::StatusOr<std::string>(r.status()));
  };
}

void JobManager::SubmitScheduled(std::vector<ScheduleFire> fires) {
  for (ScheduleFire& fire : fires) {
    v1::JobSpec spec = std::move(fire.spec);
    SubmitDone done = ScheduleOutcome(std::move(fire));
    // As its owner now: a user who lost the queue's access loses its runs.
    if (absl::Status admitted = run_admission_ ? run_admission_(&spec) : absl::OkStatus(); !admitted.ok()) {
      done(admitted);
      continue;
    }
    SubmitAsync(std::move(spec), {}, std::move(done));
  }
}

}  // namespace trainyard::server
