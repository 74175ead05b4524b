// Who may do what (docs/security.md, "What each check stops"): the one home
// of the rules of authorization, which the gRPC services and the HTTP API
// both call before anything reaches the job manager.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "api/queue_config_yaml.h"
#include "proto/trainyard.pb.h"
#include "security/principal.h"

namespace trainyard::security {

// Whose a job is: its user and queue, as its view shows them.
struct JobOwner {
  std::string user;
  std::string queue;
};

class AccessPolicy {
 public:
  // `acls`: each queue's ACL (api::QueueConfigFile::acls; empty when there
  // is no queue file: every queue then has the default ACL). `default_queue`:
  // the queue of a spec that names none.
  AccessPolicy(api::QueueAcls acls, std::string default_queue)
      : acls_(std::move(acls)), default_queue_(std::move(default_queue)) {}

  // Makes `spec` the caller's: its user is `who` (an admin may name another
  // user). Errors: PermissionDenied naming `user` for a spec that names
  // someone else, `queue` when the queue's aclSubmitJobs leaves the caller
  // out, `priority` for production work the queue's aclProduction does not
  // allow.
  absl::Status AdmitSubmission(const Principal& who, v1::JobSpec* spec) const;

  // OK when `who` may `verb` (kill, delete, read the logs of) `job`: its
  // owner, an administrator of its queue, or a cluster admin. Errors:
  // PermissionDenied naming the job's user and what to do.
  absl::Status MayActOnJob(const Principal& who, const std::string& job_name, const JobOwner& job,
                           absl::string_view verb) const;

  // OK when `who` is a cluster admin; else PermissionDenied naming `verb`.
  static absl::Status MayAdminister(const Principal& who, absl::string_view verb);

 private:
  const api::QueueAcl& AclOf(const std::string& queue) const;

  api::QueueAcls acls_;
  std::string default_queue_;
  api::QueueAcl default_acl_;
};

}  // namespace trainyard::security
