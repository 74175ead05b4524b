// The one path a submission takes into the server, whichever API it came
// by (gRPC's Trainyard.Submit, REST's POST /api/v1/jobs): the size check
// before anything is parsed, the YAML parse, then JobManager::SubmitAsync's
// validation, naming and durable write. One home, so both APIs refuse the
// same specs with the same messages and create the same jobs.
#pragma once

#include "proto/service.pb.h"
#include "security/access.h"
#include "server/job_manager.h"

namespace trainyard::server {

// Who submits, and the rules that decide what they may submit.
struct Submitter {
  security::Principal who;
  const security::AccessPolicy* access = nullptr;  // must outlive the call
};

// Submits `req` (YAML text or a JobSpec) for `by` (the job is theirs, see
// AccessPolicy::AdmitSubmission); `done` runs once the job is durable and
// taken in (JobManager::SubmitAsync says on which thread: it must be quick)
// or at once with the error: InvalidArgument naming the
// field (or the size above maxSpecBytes), PermissionDenied naming `user`,
// `queue` or `priority`, Unavailable when the store cannot keep it.
void SubmitFromRequest(JobManager* manager, const v1::SubmitRequest& req, const Submitter& by,
                       JobManager::SubmitDone done);

// Creates a schedule of `req`'s spec for `by` through the same steps: the
// size check, the parse, AccessPolicy::AdmitSubmission (its runs are
// `by`'s jobs, in the queue and priority `by` may submit to), then
// JobManager::CreateSchedule. Errors as SubmitFromRequest's, and those of
// the schedule (name, cron, time_zone).
absl::StatusOr<v1::ScheduleView> CreateScheduleFromRequest(JobManager* manager, const v1::CreateScheduleRequest& req,
                                                           const Submitter& by);

}  // namespace trainyard::server
