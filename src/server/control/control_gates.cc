// ControlState: gates — jobs accepted but kept out of the scheduler until
// they may run: held (until `trainyard release`), waiting for their
// dependencies (after-ok, after-any; an after-ok one that ends otherwise
// than SUCCEEDED fails the job), or an array element beyond its array's %N.
// The GateBook (gate_book.h) judges the gates; this acts on them. Also job
// arrays' creation and names. The texts are api/job_array.h's.
#include "absl/strings/str_cat.h"
#include "api/convert.h"
#include "api/job_array.h"
#include "common/check.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

void ControlState::KeepGated(JobRt& job) {
  gates_.Keep(job.rec);
  std::map<std::string, int> active;
  GateBook::Gate g = gates_.GateOf(job, &active);
  // A failed dependency is acted on by the next round (CheckGates).
  if (g.kind == GateBook::Gate::kWait) job.rec.set_pending_reason(g.text);
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
  if (gates_.Wake(job.rec)) wants_round_ = true;
}

void ControlState::CheckGates(absl::Time now) {
  // Only the jobs something woke (GateBook::TakeRecheck).
  std::map<std::string, int> active;  // per array, counted once a round
  for (uint64_t id : gates_.TakeRecheck()) {
    const std::string* name = gates_.GatedName(id);
    if (name == nullptr) continue;
    JobRt* job = FindJob(*name);
    if (!job || job->ending || job->rec.state() != v1::JOB_QUEUED || job->rec.id() != id) {
      gates_.Ungate(id);
      continue;
    }
    GateBook::Gate g = gates_.GateOf(*job, &active);
    if (g.kind == GateBook::Gate::kWait) {
      if (job->rec.pending_reason() != g.text) {
        job->rec.set_pending_reason(g.text);
        Persist(*job);
      }
      if (g.waiting_on != 0) {
        gates_.WaitOn(g.waiting_on, id);
      } else if (g.throttled) {
        gates_.Throttle(job->rec.array_job(), id);
      }
      continue;
    }
    gates_.Ungate(id);
    if (g.kind == GateBook::Gate::kFail) {
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
    GateBook::Gate g = gates_.GateOf(*job, &active);
    job->rec.set_pending_reason(g.kind == GateBook::Gate::kWait ? g.text : "waiting for the scheduler");
    Persist(*job);
    gates_.Recheck(job->rec.id());
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
  for (const PreparedJob& p : out) gates_.AddElement(array, p.rec.name());
  return out;
}

}  // namespace trainyard::server
