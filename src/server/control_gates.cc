// ControlState: gates — jobs accepted but kept out of the scheduler until
// they may run: held (until `trainyard release`), waiting for their
// dependencies (after-ok, after-any; an after-ok one that ends otherwise
// than SUCCEEDED fails the job), or an array element beyond its array's %N.
// Also job arrays' creation and names. The texts are api/job_array.h's.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/convert.h"
#include "api/job_array.h"
#include "api/job_spec.h"
#include "common/check.h"
#include "common/logging.h"
#include "server/control_state.h"
#include "server/control_state_internal.h"

namespace trainyard::server {

bool ControlState::Gated(const v1::JobRecord& rec) {
  if (rec.state() != v1::JOB_QUEUED) return false;
  for (const v1::TaskRecord& t : rec.tasks()) {
    if (!t.node().empty()) return false;  // placed before a restart: it passed its gate
  }
  const v1::JobDependencies& deps = rec.spec().dependencies();
  return rec.held() || !deps.after_ok().empty() || !deps.after_any().empty() || rec.array_throttle() > 0;
}

std::vector<std::string> ControlState::DependencyTargets(const std::string& name) const {
  if (auto it = arrays_.find(name); it != arrays_.end()) {
    // An element deleted since may have left its name to another job.
    std::vector<std::string> out;
    for (const std::string& e : it->second) {
      const JobRt* job = FindJob(e);
      if (job && job->rec.array_job() == name) out.push_back(e);
    }
    return out;
  }
  if (FindJob(name)) return {name};
  return {};
}

std::vector<std::string> ControlState::UnknownDependencies(const v1::JobSpec& spec) const {
  // Every user may describe every job (ClientService::DescribeJob), so a
  // dependency may name any job there is.
  std::vector<std::string> problems;
  for (auto [key, list] : {std::pair{"afterOk", &spec.dependencies().after_ok()},
                           std::pair{"afterAny", &spec.dependencies().after_any()}}) {
    for (int i = 0; i < list->size(); ++i) {
      if (DependencyTargets(list->Get(i)).empty()) {
        problems.push_back(absl::StrCat("dependencies.", key, "[", i, "]: job '", list->Get(i),
                                        "' does not exist (trainyard jobs -a lists them)"));
      }
    }
  }
  return problems;
}

int ControlState::ActiveElements(const std::string& array) const {
  int n = 0;
  auto it = arrays_.find(array);
  if (it == arrays_.end()) return 0;
  for (const std::string& name : it->second) {
    const JobRt* e = FindJob(name);
    if (e && e->in_scheduler && !api::IsTerminal(e->rec.state())) ++n;
  }
  return n;
}

ControlState::Gate ControlState::GateOf(const JobRt& job, std::map<std::string, int>* active) const {
  const v1::JobRecord& rec = job.rec;
  if (rec.held()) return {Gate::kWait, api::HeldReason(rec.name())};
  Gate wait;
  for (bool ok : {true, false}) {
    const auto& list = ok ? rec.spec().dependencies().after_ok() : rec.spec().dependencies().after_any();
    for (const std::string& dep : list) {
      std::vector<std::string> targets = DependencyTargets(dep);
      if (targets.empty() && ok) return {Gate::kFail, api::DependencyFailedMessage(dep, "and was deleted")};
      for (const std::string& t : targets) {
        const JobRt* d = FindJob(t);
        if (!d) continue;  // deleted: it had ended
        v1::JobState s = d->rec.state();
        if (!api::IsTerminal(s)) {
          if (wait.kind == Gate::kOpen) wait = {Gate::kWait, api::WaitingForReason(dep, ok)};
        } else if (ok && s != v1::JOB_SUCCEEDED) {
          return {Gate::kFail, api::DependencyFailedMessage(t, api::JobStateName(s))};
        }
      }
    }
  }
  if (wait.kind != Gate::kOpen) return wait;
  if (rec.array_throttle() > 0) {
    auto [it, fresh] = active->try_emplace(rec.array_job(), 0);
    if (fresh) it->second = ActiveElements(rec.array_job());
    if (it->second >= rec.array_throttle()) return {Gate::kWait, api::ThrottleReason(rec.array_job(), rec.array_throttle())};
  }
  return {};
}

void ControlState::KeepGated(JobRt& job) {
  gated_[job.rec.id()] = job.rec.name();
  std::map<std::string, int> active;
  Gate g = GateOf(job, &active);
  // A failed dependency is acted on by the next round (CheckGates).
  if (g.kind == Gate::kWait) job.rec.set_pending_reason(g.text);
  wants_round_ = true;
}

bool ControlState::OpenGate(JobRt& job, absl::Time now) {
  absl::StatusOr<core::JobRequest> req = api::ToJobRequest(job.rec);
  absl::Status added = req.ok() ? scheduler_->AddJob(*req) : req.status();
  if (!added.ok()) {
    EndJob(job, v1::JOB_FAILED, absl::StrCat("the scheduler refused the job: ", added.message()), now);
    return false;
  }
  job.in_scheduler = true;
  std::string was = job.rec.pending_reason();
  job.rec.set_pending_reason("waiting for the scheduler");
  AddEvent(job, "eligible", absl::StrCat("may be placed now", was.empty() ? "" : absl::StrCat(" (was: ", was, ")")),
           now);
  Persist(job);
  return true;
}

void ControlState::CheckGates(absl::Time now) {
  std::map<std::string, int> active;  // per array, counted once a round
  for (auto it = gated_.begin(); it != gated_.end();) {
    JobRt* job = FindJob(it->second);
    if (!job || job->ending || job->rec.state() != v1::JOB_QUEUED || job->rec.id() != it->first) {
      it = gated_.erase(it);
      continue;
    }
    Gate g = GateOf(*job, &active);
    if (g.kind == Gate::kWait) {
      if (job->rec.pending_reason() != g.text) {
        job->rec.set_pending_reason(g.text);
        Persist(*job);
      }
      ++it;
      continue;
    }
    it = gated_.erase(it);
    if (g.kind == Gate::kFail) {
      EndJob(*job, v1::JOB_FAILED, g.text, now);
    } else if (OpenGate(*job, now) && !job->rec.array_job().empty()) {
      ++active[job->rec.array_job()];
    }
  }
}

absl::StatusOr<std::vector<std::string>> ControlState::Release(const std::string& name, absl::Time now) {
  std::vector<std::string> targets = DependencyTargets(name);
  if (targets.empty()) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  std::vector<std::string> released;
  for (const std::string& t : targets) {
    JobRt* job = FindJob(t);
    if (!job || !job->rec.held() || api::IsTerminal(job->rec.state())) continue;
    job->rec.set_held(false);
    AddEvent(*job, "released", "released: it may be placed once nothing else holds it back", now);
    std::map<std::string, int> active;
    Gate g = GateOf(*job, &active);
    job->rec.set_pending_reason(g.kind == Gate::kWait ? g.text : "waiting for the scheduler");
    Persist(*job);
    released.push_back(t);
  }
  if (released.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", name, " is not held (only a job submitted with --hold, ",
                                                      "or hold: true, waits for trainyard release)"));
  }
  wants_round_ = true;
  return released;
}

std::string ControlState::FreeName(const std::string& base, const std::vector<int>& elements) {
  auto taken = [&](const std::string& name) {
    if (NameTaken(name)) return true;
    for (int i : elements) {
      if (NameTaken(api::ArrayElementName(name, i))) return true;
    }
    return false;
  };
  if (!taken(base)) return base;
  int& n = next_suffix_[base];
  if (n < 2) n = 2;
  while (taken(absl::StrCat(base, "-", n))) ++n;
  return absl::StrCat(base, "-", n++);
}

absl::StatusOr<std::vector<PreparedJob>> ControlState::PrepareArray(CheckedSpec checked, absl::Time now) {
  absl::StatusOr<api::ArrayRange> range = api::ParseArrayRange(checked.spec.array());
  if (!range.ok()) return range.status();
  std::string array = FreeName(checked.spec.name(), range->indices);
  std::vector<PreparedJob> out;
  out.reserve(range->indices.size());
  for (int index : range->indices) {
    ArrayPlace place{.array = array, .index = index, .throttle = range->throttle, .first = out.empty()};
    absl::StatusOr<PreparedJob> p = PrepareNamed(checked, api::ArrayElementName(array, index), now, &place);
    if (!p.ok()) {
      // What was reserved for the earlier elements is given back.
      for (PreparedJob& done : out) {
        absl::StatusOr<v1::SubmitResponse> undone = AcceptCommitted(done, p.status());
        TY_CHECK(!undone.ok(), "an array element was taken in after its array failed");
      }
      return p.status();
    }
    out.push_back(*std::move(p));
  }
  std::vector<std::string>& names = arrays_[array];
  for (const PreparedJob& p : out) names.push_back(p.rec.name());
  return out;
}

}  // namespace trainyard::server
