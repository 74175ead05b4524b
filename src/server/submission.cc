// The shared submission path (see submission.h).
#include "server/submission.h"

#include "absl/strings/str_cat.h"
#include "api/job_spec.h"

namespace trainyard::server {

void SubmitFromRequest(JobManager* manager, const v1::SubmitRequest& req, const Submitter& by,
                       JobManager::SubmitDone done) {
  // The size is checked before anything is parsed: a parse costs several
  // times the text in memory, and the allocator may keep it.
  const int64_t limit = manager->config().max_spec_bytes;
  int64_t size = req.has_spec() ? static_cast<int64_t>(req.spec().ByteSizeLong())
                                : static_cast<int64_t>(req.yaml().size());
  // The flags add to the spec: they count against the same limit.
  size += static_cast<int64_t>(req.array().size());
  for (const std::string& j : req.after_ok()) size += static_cast<int64_t>(j.size());
  for (const std::string& j : req.after_any()) size += static_cast<int64_t>(j.size());
  if (size > limit) {
    done(absl::InvalidArgumentError(absl::StrCat("spec: ", size, " bytes is above the ", limit,
                                                 " bytes this server takes (maxSpecBytes in its config)")));
    return;
  }
  v1::JobSpec spec;
  std::vector<std::string> parse_problems;
  if (req.has_spec()) {
    spec = req.spec();
  } else {
    parse_problems = api::ParseJobSpecYamlInto(req.yaml(), &spec);
  }
  // The client's flags (submit --hold, --after-ok, --after-any, --array)
  // add to what the spec says.
  if (req.hold()) spec.set_hold(true);
  for (const std::string& j : req.after_ok()) spec.mutable_dependencies()->add_after_ok(j);
  for (const std::string& j : req.after_any()) spec.mutable_dependencies()->add_after_any(j);
  if (!req.array().empty()) spec.set_array(req.array());
  // Who may submit what is decided before validation, so a stranger learns
  // nothing of the cluster from the answer.
  if (absl::Status may = by.access->AdmitSubmission(by.who, &spec); !may.ok()) {
    done(may);
    return;
  }
  manager->SubmitAsync(std::move(spec), std::move(parse_problems), std::move(done));
}

absl::StatusOr<v1::ScheduleView> CreateScheduleFromRequest(JobManager* manager, const v1::CreateScheduleRequest& req,
                                                           const Submitter& by) {
  const int64_t limit = manager->config().max_spec_bytes;
  if (static_cast<int64_t>(req.spec_yaml().size()) > limit) {
    return absl::InvalidArgumentError(absl::StrCat("spec: ", req.spec_yaml().size(), " bytes is above the ", limit,
                                                   " bytes this server takes (maxSpecBytes in its config)"));
  }
  v1::ScheduleRecord rec;
  std::vector<std::string> parse_problems = api::ParseJobSpecYamlInto(req.spec_yaml(), rec.mutable_spec());
  if (absl::Status may = by.access->AdmitSubmission(by.who, rec.mutable_spec()); !may.ok()) return may;
  rec.set_name(req.name());
  rec.set_user(rec.spec().user());
  rec.set_cron(req.cron());
  rec.set_time_zone(req.time_zone());
  rec.set_concurrency(req.concurrency());
  return manager->CreateSchedule(std::move(rec), std::move(parse_problems));
}

}  // namespace trainyard::server
