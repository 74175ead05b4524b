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
#include "server/control/control_state.h"
#include "server/control/control_state_internal.h"

namespace trainyard::server {

bool ControlState::Gated(const v1::JobRecord& rec) {
  if (rec.state() != v1::JOB_QUEUED || rec.gate_open()) return false;
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

void ControlState::ResolveDependencies(const v1::JobSpec& spec, v1::JobRecord* rec) const {
  for (bool ok : {true, false}) {
    const auto& list = ok ? spec.dependencies().after_ok() : spec.dependencies().after_any();
    for (const std::string& dep : list) {
      v1::ResolvedDependency* r = rec->add_resolved_dependencies();
      r->set_name(dep);
      r->set_after_ok(ok);
      for (const std::string& t : DependencyTargets(dep)) {
        if (const JobRt* d = FindJob(t)) r->add_ids(d->rec.id());
      }
    }
  }
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
  // By id, as resolved at submission: a job that took a dependency's name
  // since is not it, and one deleted since is judged by how it ended.
  for (const v1::ResolvedDependency& dep : rec.resolved_dependencies()) {
    for (uint64_t id : dep.ids()) {
      auto e = ended_.find(id);
      if (e == ended_.end()) {
        if (wait.kind == Gate::kOpen) wait = {Gate::kWait, api::WaitingForReason(dep.name(), dep.after_ok()), id};
      } else if (dep.after_ok() && e->second.state != v1::JOB_SUCCEEDED) {
        return {Gate::kFail, api::DependencyFailedMessage(e->second.name, api::JobStateName(e->second.state))};
      }
    }
  }
  if (wait.kind != Gate::kOpen) return wait;
  if (rec.array_throttle() > 0) {
    auto [it, fresh] = active->try_emplace(rec.array_job(), 0);
    if (fresh) it->second = ActiveElements(rec.array_job());
    if (it->second >= rec.array_throttle()) {
      return {Gate::kWait, api::ThrottleReason(rec.array_job(), rec.array_throttle()), 0, true};
    }
  }
  return {};
}

void ControlState::KeepGated(JobRt& job) {
  gated_[job.rec.id()] = job.rec.name();
  gate_recheck_.insert(job.rec.id());
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
  job.rec.set_gate_open(true);  // durable: never gated again (Gated)
  std::string was = job.rec.pending_reason();
  job.rec.set_pending_reason("waiting for the scheduler");
  AddEvent(job, "eligible", absl::StrCat("may be placed now", was.empty() ? "" : absl::StrCat(" (was: ", was, ")")),
           now);
  Persist(job);
  return true;
}

void ControlState::WakeGates(const JobRt& job) {
  gated_.erase(job.rec.id());
  auto wake = [this](std::vector<uint64_t>& ids) {
    gate_recheck_.insert(ids.begin(), ids.end());
    wants_round_ = true;
  };
  if (auto w = waiters_.find(job.rec.id()); w != waiters_.end()) {
    wake(w->second);
    waiters_.erase(w);
  }
  if (job.rec.array_job().empty()) return;
  if (auto t = throttled_.find(job.rec.array_job()); t != throttled_.end()) {
    wake(t->second);
    throttled_.erase(t);
  }
}

void ControlState::CheckGates(absl::Time now) {
  // Only the jobs something woke (gate_recheck_): see control_state.h.
  std::set<uint64_t> check;
  check.swap(gate_recheck_);
  std::map<std::string, int> active;  // per array, counted once a round
  for (uint64_t id : check) {
    auto it = gated_.find(id);
    if (it == gated_.end()) continue;
    JobRt* job = FindJob(it->second);
    if (!job || job->ending || job->rec.state() != v1::JOB_QUEUED || job->rec.id() != id) {
      gated_.erase(it);
      continue;
    }
    Gate g = GateOf(*job, &active);
    if (g.kind == Gate::kWait) {
      if (job->rec.pending_reason() != g.text) {
        job->rec.set_pending_reason(g.text);
        Persist(*job);
      }
      if (g.waiting_on != 0) {
        waiters_[g.waiting_on].push_back(id);
      } else if (g.throttled) {
        throttled_[job->rec.array_job()].push_back(id);
      }
      continue;
    }
    gated_.erase(it);
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
    gate_recheck_.insert(job->rec.id());
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
    ArrayPlace place{.array = array,
                      .index = index,
                      .throttle = range->throttle,
                      .first = out.empty(),
                      .count = static_cast<int>(range->indices.size())};
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
