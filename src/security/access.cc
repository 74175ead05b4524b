// The rules of authorization (see access.h).
#include "security/access.h"

#include "absl/strings/str_cat.h"

namespace trainyard::security {

const api::QueueAcl& AccessPolicy::AclOf(const std::string& queue) const {
  auto it = acls_.find(queue);
  return it == acls_.end() ? default_acl_ : it->second;
}

absl::Status AccessPolicy::AdmitSubmission(const Principal& who, v1::JobSpec* spec) const {
  if (who.anonymous) return absl::OkStatus();  // security is off: the spec says
  if (spec->user().empty()) {
    spec->set_user(who.user);
  } else if (spec->user() != who.user && !who.admin) {
    return absl::PermissionDeniedError(absl::StrCat("user: the spec says '", spec->user(), "' but you are '", who.user,
                                                    "'; leave user: out (the job is then yours) or set it to '",
                                                    who.user, "'"));
  }
  if (who.admin) return absl::OkStatus();
  const std::string& queue = spec->queue().empty() ? default_queue_ : spec->queue();
  const api::QueueAcl& acl = AclOf(queue);
  if (!api::AclAllows(acl.submit_jobs, who.user)) {
    return absl::PermissionDeniedError(absl::StrCat("queue: '", who.user, "' may not submit to queue '", queue,
                                                    "' (its aclSubmitJobs); ask a cluster admin for access"));
  }
  if (spec->priority() == v1::PRIORITY_PRODUCTION && !api::AclAllows(acl.production, who.user)) {
    return absl::PermissionDeniedError(absl::StrCat("priority: '", who.user,
                                                    "' may not submit production work to queue '", queue,
                                                    "' (its aclProduction); use iteration or ptr"));
  }
  return absl::OkStatus();
}

absl::Status AccessPolicy::MayActOnJob(const Principal& who, const std::string& job_name, const JobOwner& job,
                                       absl::string_view verb) const {
  if (who.anonymous || who.admin || who.user == job.user) return absl::OkStatus();
  if (api::AclAllows(AclOf(job.queue).administer_jobs, who.user)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("you ('", who.user, "') may not ", std::string(verb), " job ", job_name,
                                                  ": it belongs to '", job.user,
                                                  "'; only its owner, an administrator of queue '", job.queue,
                                                  "' or a cluster admin may"));
}

absl::Status AccessPolicy::MayAdminister(const Principal& who, absl::string_view verb) {
  if (who.anonymous || who.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("you ('", who.user, "') may not ", std::string(verb), ": only a cluster admin may"));
}

}  // namespace trainyard::security
