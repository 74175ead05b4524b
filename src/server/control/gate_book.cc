// GateBook: what keeps accepted jobs out of the scheduler (gate_book.h).
#include "server/control/gate_book.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/job_array.h"
#include "api/states.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

bool GateBook::Gated(const v1::JobRecord& rec) {
  if (rec.state() != v1::JOB_QUEUED || rec.gate_open()) return false;
  for (const v1::TaskRecord& t : rec.tasks()) {
    if (!t.node().empty()) return false;  // placed before a restart: it passed its gate
  }
  const v1::JobDependencies& deps = rec.spec().dependencies();
  return rec.held() || !deps.after_ok().empty() || !deps.after_any().empty() || rec.array_throttle() > 0;
}

std::vector<std::string> GateBook::DependencyTargets(const std::string& name) const {
  if (auto it = arrays_.find(name); it != arrays_.end()) {
    // An element deleted since may have left its name to another job.
    std::vector<std::string> out;
    for (const std::string& e : it->second) {
      const JobRt* job = FindJobIn(jobs_, e);
      if (job && job->rec.array_job() == name) out.push_back(e);
    }
    return out;
  }
  if (FindJobIn(jobs_, name)) return {name};
  return {};
}

std::vector<std::string> GateBook::UnknownDependencies(const v1::JobSpec& spec) const {
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

void GateBook::ResolveDependencies(const v1::JobSpec& spec, v1::JobRecord* rec) const {
  for (bool ok : {true, false}) {
    const auto& list = ok ? spec.dependencies().after_ok() : spec.dependencies().after_any();
    for (const std::string& dep : list) {
      v1::ResolvedDependency* r = rec->add_resolved_dependencies();
      r->set_name(dep);
      r->set_after_ok(ok);
      for (const std::string& t : DependencyTargets(dep)) {
        if (const JobRt* d = FindJobIn(jobs_, t)) r->add_ids(d->rec.id());
      }
    }
  }
}

int GateBook::ActiveElements(const std::string& array) const {
  int n = 0;
  auto it = arrays_.find(array);
  if (it == arrays_.end()) return 0;
  for (const std::string& name : it->second) {
    const JobRt* e = FindJobIn(jobs_, name);
    if (e && e->in_scheduler && !api::IsTerminal(e->rec.state())) ++n;
  }
  return n;
}

GateBook::Gate GateBook::GateOf(const JobRt& job, std::map<std::string, int>* active) const {
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

void GateBook::Keep(const v1::JobRecord& rec) {
  gated_[rec.id()] = rec.name();
  recheck_.insert(rec.id());
}

std::set<uint64_t> GateBook::TakeRecheck() {
  std::set<uint64_t> out;
  out.swap(recheck_);
  return out;
}

const std::string* GateBook::GatedName(uint64_t id) const {
  auto it = gated_.find(id);
  return it == gated_.end() ? nullptr : &it->second;
}

bool GateBook::Wake(const v1::JobRecord& rec) {
  gated_.erase(rec.id());
  bool woke = false;
  auto wake = [&](std::vector<uint64_t>& ids) {
    recheck_.insert(ids.begin(), ids.end());
    woke = true;
  };
  if (auto w = waiters_.find(rec.id()); w != waiters_.end()) {
    wake(w->second);
    waiters_.erase(w);
  }
  if (rec.array_job().empty()) return woke;
  if (auto t = throttled_.find(rec.array_job()); t != throttled_.end()) {
    wake(t->second);
    throttled_.erase(t);
  }
  return woke;
}

void GateBook::Ended(uint64_t id, v1::JobState state, std::string name) {
  ended_[id] = EndedJob{state, std::move(name)};
}

void GateBook::SortArrays(const std::function<int(const std::string& element)>& index) {
  for (auto& [array, names] : arrays_) {
    std::sort(names.begin(), names.end(),
              [&](const std::string& a, const std::string& b) { return index(a) < index(b); });
  }
}

}  // namespace trainyard::server
