// Service links (docs/services.md): the grants that let a user reach a
// service task's port through the server's HTTP proxy, made for the gRPC
// ServiceLink call and the REST route, and checked again on every proxied
// request. A link's path carries its grant ("/proxy/GRANT/"), so the
// service's pages, served in a sandbox without the dashboard's token, reach
// their own relative paths and nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/service.pb.h"
#include "security/principal.h"
#include "security/server_security.h"

namespace trainyard::server {

// Where a proxied request goes: the task's node address and its service
// port, and what the proxy tells the service (X-Forwarded-Prefix).
struct ServiceTarget {
  std::string host;
  uint32_t port = 0;
  std::string prefix;  // "/proxy/GRANT"
  std::string job;
  std::string task;    // JOB-ROLE-INDEX
};

class ServiceLinks {
 public:
  // A job's published view (with its tasks) by name; nullptr: none.
  using JobLookup = std::function<std::shared_ptr<const v1::JobView>(const std::string& name)>;
  // `security` and `clock` outlive this. Links last `lifetime`.
  ServiceLinks(security::ServerSecurity* security, JobLookup jobs, const Clock* clock,
               absl::Duration lifetime = absl::Hours(12))
      : security_(security), jobs_(std::move(jobs)), clock_(clock), lifetime_(lifetime) {}

  // The HTTP listener the links are on, once it is bound ("" host: every
  // address); until then Link answers FailedPrecondition.
  void SetListener(std::string scheme, std::string host, int port) ABSL_LOCKS_EXCLUDED(mu_);

  // A link for `who` to the service task req.role/req.index of job
  // req.job (role "" = the job's first service). Only the job's owner or a
  // cluster admin may (the service runs as the owner, like exec). Errors:
  // NotFound (no job, no such task, a task that is not a service),
  // PermissionDenied, FailedPrecondition (not running yet, no HTTP
  // listener).
  absl::StatusOr<v1::ServiceLinkResponse> Link(const security::Principal& who, v1::ServiceLinkRequest req) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Where the request under "/proxy/GRANT" goes, checked now: the grant
  // is this server's and unexpired, its job is the same job (same id), its
  // user still owns it (or was an admin), the task is a running service.
  // Errors: PermissionDenied (the grant), NotFound (the job or task is
  // gone), Unavailable (the task is not running now).
  absl::StatusOr<ServiceTarget> Resolve(absl::string_view grant) const;

 private:
  // The task of `job` named role/index that is a service, or an error.
  static absl::StatusOr<const v1::TaskView*> ServiceTask(const v1::JobView& job, const std::string& role, int index);

  security::ServerSecurity* const security_;
  const JobLookup jobs_;
  const Clock* const clock_;
  const absl::Duration lifetime_;
  mutable absl::Mutex mu_;
  std::string scheme_ ABSL_GUARDED_BY(mu_);
  std::string host_ ABSL_GUARDED_BY(mu_);
  int port_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace trainyard::server
