// Service links (see service_links.h).
#include "server/service_links.h"

#include "absl/strings/str_cat.h"

namespace trainyard::server {

namespace {

uint32_t FirstPort(const v1::TaskView& t) { return t.ports().empty() ? 0 : t.ports(0).begin(); }

}  // namespace

void ServiceLinks::SetListener(std::string scheme, std::string host, int port) {
  absl::MutexLock lock(&mu_);
  scheme_ = std::move(scheme);
  host_ = std::move(host);
  port_ = port;
}

absl::StatusOr<const v1::TaskView*> ServiceLinks::ServiceTask(const v1::JobView& job, const std::string& role,
                                                               int index) {
  const v1::TaskView* first_service = nullptr;
  for (const v1::TaskView& t : job.tasks()) {
    if (!t.service()) continue;
    if (!first_service) first_service = &t;
    if (!role.empty() && t.role() == role && t.index() == index) return &t;
  }
  if (role.empty()) {
    if (first_service) return first_service;
    return absl::NotFoundError(absl::StrCat("job ", job.name(), " has no service role (a role of kind: service)"));
  }
  for (const v1::TaskView& t : job.tasks()) {
    if (t.role() == role && t.index() == index) {
      return absl::NotFoundError(absl::StrCat("task ", t.name(), " is not a service: its role '", role,
                                              "' is not of kind: service"));
    }
  }
  return absl::NotFoundError(absl::StrCat("job ", job.name(), " has no task ", role, "/", index));
}

absl::StatusOr<v1::ServiceLinkResponse> ServiceLinks::Link(const security::Principal& who,
                                                           v1::ServiceLinkRequest req) const {
  std::shared_ptr<const v1::JobView> job = jobs_(req.job());
  if (!job) return absl::NotFoundError(absl::StrCat("job '", req.job(), "' does not exist"));
  if (security_->enabled() && !who.admin && who.user != job->user()) {
    return absl::PermissionDeniedError(absl::StrCat("you ('", who.user, "') may not open job ", req.job(),
                                                    "'s services: they run as its owner ('", job->user(),
                                                    "'); only its owner or a cluster admin may"));
  }
  absl::StatusOr<const v1::TaskView*> task = ServiceTask(*job, req.role(), req.index());
  if (!task.ok()) return task.status();
  const v1::TaskView& t = **task;
  if (t.state() != v1::TASK_RUNNING || t.node_address().empty() || FirstPort(t) == 0) {
    return absl::FailedPreconditionError(absl::StrCat("service ", t.name(), " is ", v1::TaskState_Name(t.state()),
                                                      ": its link is made once it runs"));
  }
  v1::ServiceLinkResponse out;
  {
    absl::MutexLock lock(&mu_);
    if (port_ == 0) {
      return absl::FailedPreconditionError(
          "this server has no HTTP listener (--http-listen): services are reached through it");
    }
    out.set_http_scheme(scheme_);
    out.set_http_host(host_);
    out.set_http_port(port_);
  }
  absl::Time expires = clock_->Now() + lifetime_;
  security::ServiceGrant grant{.job = job->name(),
                               .job_id = job->id(),
                               .role = t.role(),
                               .index = t.index(),
                               .user = who.user,
                               .admin = who.admin,
                               .expires_unix_s = absl::ToUnixSeconds(expires)};
  out.set_path(absl::StrCat("/proxy/", security_->ServiceGrantText(grant), "/"));
  out.set_expires_unix_ms(grant.expires_unix_s * 1000);
  out.set_node(t.node());
  out.set_port(FirstPort(t));
  return out;
}

absl::StatusOr<ServiceTarget> ServiceLinks::Resolve(absl::string_view text) const {
  absl::StatusOr<security::ServiceGrant> grant =
      security_->OpenServiceGrant(text, absl::ToUnixSeconds(clock_->Now()));
  if (!grant.ok()) return grant.status();
  std::shared_ptr<const v1::JobView> job = jobs_(grant->job);
  if (!job || job->id() != grant->job_id) {
    return absl::NotFoundError(absl::StrCat("job ", grant->job, " of this link no longer exists"));
  }
  if (security_->enabled() && !grant->admin && grant->user != job->user()) {
    return absl::PermissionDeniedError(absl::StrCat("the link's user ('", grant->user, "') no longer owns job ",
                                                    grant->job));
  }
  absl::StatusOr<const v1::TaskView*> task = ServiceTask(*job, grant->role, grant->index);
  if (!task.ok()) return task.status();
  const v1::TaskView& t = **task;
  if (t.state() != v1::TASK_RUNNING || t.node_address().empty() || FirstPort(t) == 0) {
    return absl::UnavailableError(absl::StrCat("service ", t.name(), " is ", v1::TaskState_Name(t.state()),
                                               " (job ", job->name(), " is ", v1::JobState_Name(job->state()), ")"));
  }
  return ServiceTarget{.host = t.node_address(),
                       .port = FirstPort(t),
                       .prefix = absl::StrCat("/proxy/", text),
                       .job = job->name(),
                       .task = t.name()};
}

}  // namespace trainyard::server
