// Client RPC handlers: the caller's credential checked, then thin
// translations onto JobManager.
#include "server/client_service.h"

#include "api/states.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/connection_guard.h"
#include "server/submission.h"

namespace trainyard::server {

grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

grpc::Status ClientService::Counted(GrpcCounters::Method method, grpc::Status st) {
  counters_.Count(method, static_cast<int>(st.error_code()));
  return st;
}

namespace {
absl::string_view Metadata(const grpc::ServerContextBase* ctx, const char* key) {
  auto it = ctx->client_metadata().find(key);
  return it == ctx->client_metadata().end() ? absl::string_view()
                                            : absl::string_view(it->second.data(), it->second.size());
}
}  // namespace

absl::StatusOr<security::Principal> ClientService::Who(const grpc::ServerContextBase* ctx) {
  absl::StatusOr<security::Principal> who = security_->Authenticate(Metadata(ctx, "authorization"));
  if (who.ok()) ConnectionGuard::MarkAuthenticated(Door::kClients, ctx->peer());
  return who;
}

absl::StatusOr<security::Principal> ClientService::WhoWithin(const grpc::ServerContextBase* ctx,
                                                             UserRateLimiter::Call call) {
  absl::StatusOr<security::Principal> who = Who(ctx);
  if (!who.ok() || limits_ == nullptr) return who;
  if (absl::Status st = limits_->Allow(*who, call, absl::Now()); !st.ok()) return st;
  return who;
}

std::unique_ptr<security::CredentialCheck> ClientService::StreamCredential(const grpc::ServerContextBase* ctx) {
  security::ServerSecurity* sec = security_;
  return std::make_unique<security::CredentialCheck>([sec](absl::string_view a) { return sec->Authenticate(a); },
                                                     std::string(Metadata(ctx, "authorization")), absl::Now());
}

absl::Status ClientService::MayActOnJob(const grpc::ServerContextBase* ctx, const std::string& name,
                                        absl::string_view verb) {
  absl::StatusOr<security::Principal> who = Who(ctx);
  if (!who.ok()) return who.status();
  std::shared_ptr<const v1::JobView> job = manager_->JobSummary(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  return security_->access().MayActOnJob(*who, name, {job->user(), job->queue()}, verb);
}

absl::StatusOr<std::shared_ptr<const v1::JobView>> ClientService::MayRunInJob(const grpc::ServerContextBase* ctx,
                                                                               const std::string& name) {
  absl::StatusOr<security::Principal> who = Who(ctx);
  if (!who.ok()) return who.status();
  std::shared_ptr<const v1::JobView> job = manager_->JobSummary(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  if (!security_->enabled() || who->admin || who->user == job->user()) return job;
  return absl::PermissionDeniedError(absl::StrCat("you ('", who->user, "') may not run commands in job ", name,
                                                  "'s tasks: they run as its owner ('", job->user(),
                                                  "'); only its owner or a cluster admin may"));
}

absl::Status ClientService::FromJobMaster(const grpc::ServerContextBase* ctx, const std::string& name) {
  absl::string_view credential = Metadata(ctx, security::kJobTokenMetadata);
  if (!security_->enabled()) return MayActOnJob(ctx, name, "report the outcome of");
  if (credential.empty()) {
    // A master run in the client reports with its user's token: the job's
    // owner or a cluster admin, not a queue's administrator (who may kill
    // the job but not make up how it ended).
    absl::StatusOr<security::Principal> who = Who(ctx);
    if (!who.ok()) return who.status();
    std::shared_ptr<const v1::JobView> job = manager_->JobSummary(name);
    if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
    if (who->admin || who->user == job->user()) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat("you ('", who->user, "') may not report the outcome of job ",
                                                    name, ": only its master, its owner or a cluster admin may"));
  }
  std::shared_ptr<const v1::JobView> job = manager_->JobSummary(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  if (!security_->IsJobCredential(job->id(), credential)) {
    return absl::PermissionDeniedError(absl::StrCat("the job credential is not job ", name,
                                                    "'s: only its own master may report its outcome"));
  }
  ConnectionGuard::MarkAuthenticated(Door::kClients, ctx->peer());
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ClientService::Submit(grpc::CallbackServerContext* ctx, const v1::SubmitRequest* req,
                                                v1::SubmitResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kSubmit);
  if (!who.ok()) {
    counters_.Count(GrpcCounters::kSubmit, static_cast<int>(who.status().code()));
    reactor->Finish(ToGrpc(who.status()));
    return reactor;
  }
  SubmitFromRequest(manager_, *req, {*who, &security_->access()}, [this, reactor, resp](absl::StatusOr<v1::SubmitResponse> r) {
    if (r.ok()) *resp = std::move(*r);
    counters_.Count(GrpcCounters::kSubmit, static_cast<int>(r.status().code()));
    reactor->Finish(r.ok() ? grpc::Status::OK : ToGrpc(r.status()));
  });
  return reactor;
}

grpc::Status ClientService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) {
  if (absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kListJobs); !who.ok()) {
    return Counted(GrpcCounters::kListJobs, ToGrpc(who.status()));
  }
  absl::StatusOr<v1::ListJobsResponse> page = manager_->ListJobs(*req);
  if (!page.ok()) return Counted(GrpcCounters::kListJobs, ToGrpc(page.status()));
  *resp = std::move(*page);
  return Counted(GrpcCounters::kListJobs, grpc::Status::OK);
}

grpc::Status ClientService::History(grpc::ServerContext* ctx, const v1::HistoryRequest* req,
                                    v1::HistoryResponse* resp) {
  if (absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kListJobs); !who.ok()) {
    return Counted(GrpcCounters::kHistory, ToGrpc(who.status()));
  }
  absl::StatusOr<v1::HistoryResponse> page = manager_->History(*req);
  if (!page.ok()) return Counted(GrpcCounters::kHistory, ToGrpc(page.status()));
  *resp = std::move(*page);
  return Counted(GrpcCounters::kHistory, grpc::Status::OK);
}

grpc::Status ClientService::JobResources(grpc::ServerContext* ctx, const v1::JobResourcesRequest* req,
                                         v1::JobResourcesResponse* resp) {
  // Who may describe a job may see what its tasks use.
  if (absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kListJobs); !who.ok()) {
    return Counted(GrpcCounters::kJobResources, ToGrpc(who.status()));
  }
  absl::StatusOr<v1::JobResourcesResponse> r = manager_->JobResources(*req);
  if (!r.ok()) return Counted(GrpcCounters::kJobResources, ToGrpc(r.status()));
  *resp = std::move(*r);
  return Counted(GrpcCounters::kJobResources, grpc::Status::OK);
}

grpc::Status ClientService::ServiceLink(grpc::ServerContext* ctx, const v1::ServiceLinkRequest* req,
                                        v1::ServiceLinkResponse* resp) {
  absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kListJobs);
  if (!who.ok()) return Counted(GrpcCounters::kServiceLink, ToGrpc(who.status()));
  if (!links_) {
    return Counted(GrpcCounters::kServiceLink, ToGrpc(absl::UnimplementedError("this server proxies no services")));
  }
  absl::StatusOr<v1::ServiceLinkResponse> link = links_->Link(*who, *req);
  if (!link.ok()) return Counted(GrpcCounters::kServiceLink, ToGrpc(link.status()));
  *resp = std::move(*link);
  return Counted(GrpcCounters::kServiceLink, grpc::Status::OK);
}

grpc::Status ClientService::CreateSchedule(grpc::ServerContext* ctx, const v1::CreateScheduleRequest* req,
                                           v1::ScheduleView* resp) {
  // Counted as a submission: each run is one, as its creator's.
  absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kSubmit);
  if (!who.ok()) return Counted(GrpcCounters::kCreateSchedule, ToGrpc(who.status()));
  absl::StatusOr<v1::ScheduleView> view = CreateScheduleFromRequest(manager_, *req, {*who, &security_->access()});
  if (!view.ok()) return Counted(GrpcCounters::kCreateSchedule, ToGrpc(view.status()));
  *resp = std::move(*view);
  return Counted(GrpcCounters::kCreateSchedule, grpc::Status::OK);
}

grpc::Status ClientService::ListSchedules(grpc::ServerContext* ctx, const v1::ListSchedulesRequest* req,
                                          v1::ListSchedulesResponse* resp) {
  // Every user may see every schedule, as every job (a spec holds no secret).
  if (absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kListJobs); !who.ok()) {
    return Counted(GrpcCounters::kListSchedules, ToGrpc(who.status()));
  }
  std::vector<v1::ScheduleView> views = manager_->ListSchedules(req->name());
  if (!req->name().empty() && views.empty()) {
    return Counted(GrpcCounters::kListSchedules,
                   ToGrpc(absl::NotFoundError(absl::StrCat("schedule ", req->name(), " not found"))));
  }
  for (v1::ScheduleView& v : views) *resp->add_schedules() = std::move(v);
  return Counted(GrpcCounters::kListSchedules, grpc::Status::OK);
}

grpc::Status ClientService::UpdateSchedule(grpc::ServerContext* ctx, const v1::ScheduleRequest* req,
                                           v1::ScheduleView* resp) {
  // Its owner, an administrator of its queue, or an admin: as a job's.
  absl::StatusOr<security::Principal> who =
      WhoWithin(ctx, req->action() == v1::SCHEDULE_RUN ? UserRateLimiter::kSubmit : UserRateLimiter::kListJobs);
  if (!who.ok()) return Counted(GrpcCounters::kUpdateSchedule, ToGrpc(who.status()));
  std::vector<v1::ScheduleView> found = manager_->ListSchedules(req->name());
  if (req->name().empty() || found.empty()) {
    return Counted(GrpcCounters::kUpdateSchedule,
                   ToGrpc(absl::NotFoundError(absl::StrCat("schedule ", req->name(), " not found"))));
  }
  const v1::ScheduleRecord& rec = found[0].schedule();
  // A run by hand submits a job as the schedule's owner: theirs or an
  // admin's to ask, not a queue administrator's.
  if (req->action() == v1::SCHEDULE_RUN && !who->anonymous && !who->admin && who->user != rec.user()) {
    return Counted(GrpcCounters::kUpdateSchedule,
                   ToGrpc(absl::PermissionDeniedError(absl::StrCat(
                       "you ('", who->user, "') may not run schedule ", rec.name(), ": its runs are '", rec.user(),
                       "''s jobs; only they or a cluster admin may run it by hand"))));
  }
  const char* verb = req->action() == v1::SCHEDULE_PAUSE    ? "pause"
                     : req->action() == v1::SCHEDULE_RESUME ? "resume"
                     : req->action() == v1::SCHEDULE_DELETE ? "delete"
                                                            : "run";
  if (!security_->access().MayActOnJob(*who, rec.name(), {rec.user(), rec.spec().queue()}, verb).ok()) {
    return Counted(GrpcCounters::kUpdateSchedule,
                   ToGrpc(absl::PermissionDeniedError(absl::StrCat(
                       "you ('", who->user, "') may not ", verb, " schedule ", rec.name(), ": it belongs to '",
                       rec.user(), "'; only its owner, an administrator of queue '", rec.spec().queue(),
                       "' or a cluster admin may"))));
  }
  absl::StatusOr<v1::ScheduleView> view = manager_->UpdateSchedule(req->name(), req->action());
  if (!view.ok()) return Counted(GrpcCounters::kUpdateSchedule, ToGrpc(view.status()));
  *resp = std::move(*view);
  return Counted(GrpcCounters::kUpdateSchedule, grpc::Status::OK);
}

grpc::Status ClientService::Usage(grpc::ServerContext* ctx, const v1::UsageRequest* req, v1::UsageResponse* resp) {
  if (absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kListJobs); !who.ok()) {
    return Counted(GrpcCounters::kUsage, ToGrpc(who.status()));
  }
  absl::StatusOr<v1::UsageResponse> usage = manager_->Usage(*req);
  if (!usage.ok()) return Counted(GrpcCounters::kUsage, ToGrpc(usage.status()));
  *resp = std::move(*usage);
  return Counted(GrpcCounters::kUsage, grpc::Status::OK);
}

grpc::Status ClientService::DescribeJob(grpc::ServerContext* ctx, const v1::DescribeJobRequest* req,
                                        v1::JobView* resp) {
  // Every user may describe every job: a view holds no environment.
  if (absl::StatusOr<security::Principal> who = Who(ctx); !who.ok()) {
    return Counted(GrpcCounters::kDescribeJob, ToGrpc(who.status()));
  }
  absl::StatusOr<v1::JobView> v = manager_->Describe(req->job());
  if (!v.ok()) return Counted(GrpcCounters::kDescribeJob, ToGrpc(v.status()));
  *resp = std::move(*v);
  return Counted(GrpcCounters::kDescribeJob, grpc::Status::OK);
}

namespace {
// Bounds on the WatchJob streams open at once (each holds a server thread
// while it waits): per user, and in all.
constexpr int kMaxWatchesPerUser = 32;
constexpr int kMaxWatches = 512;
}  // namespace

bool ClientService::TakeWatch(const std::string& user) {
  absl::MutexLock lock(&watch_mu_);
  int& mine = watches_by_user_[user];
  if (watches_ >= kMaxWatches || mine >= kMaxWatchesPerUser) {
    if (mine == 0) watches_by_user_.erase(user);
    return false;
  }
  ++mine;
  ++watches_;
  return true;
}

void ClientService::GiveBackWatch(const std::string& user) {
  absl::MutexLock lock(&watch_mu_);
  --watches_;
  if (--watches_by_user_[user] <= 0) watches_by_user_.erase(user);
}

grpc::Status ClientService::WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                                     grpc::ServerWriter<v1::JobView>* writer) {
  // Who may describe a job may watch it (a view holds no environment).
  absl::StatusOr<security::Principal> who = Who(ctx);
  if (!who.ok()) return Counted(GrpcCounters::kWatchJob, ToGrpc(who.status()));
  if (!TakeWatch(who->user)) {
    return Counted(GrpcCounters::kWatchJob,
                   grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                absl::StrCat("too many job watches open (", kMaxWatchesPerUser, " per user, ",
                                             kMaxWatches, " in all); close one or poll describe")));
  }
  std::unique_ptr<security::CredentialCheck> credential = StreamCredential(ctx);
  const ViewStore& views = manager_->Views();
  ViewStore::Versions seen = views.CurrentVersions();
  uint64_t id = 0;    // the job's id, from its first view: the name may be reused
  std::string sent;   // the state and reason last sent
  grpc::Status status;
  for (;;) {
    if (ctx->IsCancelled()) {
      status = grpc::Status(grpc::StatusCode::CANCELLED, "the watch was cancelled");
      break;
    }
    if (!credential->Valid(absl::Now())) {
      status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the watch's credential is no longer valid");
      break;
    }
    // The published summary (shared, not copied) says whether there is
    // anything to send; the full view is made only then.
    std::shared_ptr<const v1::JobView> job = manager_->JobSummary(req->job());
    if (!job || (id != 0 && job->id() != id)) {
      status = grpc::Status(grpc::StatusCode::NOT_FOUND,
                            absl::StrCat("job '", req->job(), "' ", id == 0 ? "does not exist" : "was deleted"));
      break;
    }
    id = job->id();
    std::string now = absl::StrCat(job->state(), " ", job->reason());
    if (now != sent) {
      absl::StatusOr<v1::JobView> v = manager_->Describe(req->job());
      if (!v.ok() || v->id() != id) {
        status = grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("job '", req->job(), "' was deleted"));
        break;
      }
      sent = absl::StrCat(v->state(), " ", v->reason());
      bool end = api::IsTerminal(v->state());
      if (!writer->Write(*v) || end) break;  // a closed stream, or the end sent
    }
    // Until the jobs' views move (not the nodes' or queues', which move
    // every round), or a second passes: cancellation and the credential are
    // looked at again.
    absl::Time until = absl::Now() + absl::Seconds(1);
    ViewStore::Versions moved = views.AwaitChange(seen, until);
    while (moved.jobs == seen.jobs && absl::Now() < until) {
      seen = moved;
      moved = views.AwaitChange(seen, until);
    }
    seen = moved;
  }
  GiveBackWatch(who->user);
  return Counted(GrpcCounters::kWatchJob, status);
}

grpc::Status ClientService::KillJob(grpc::ServerContext* ctx, const v1::KillJobRequest* req,
                                    v1::KillJobResponse* resp) {
  if (absl::Status may = MayActOnJob(ctx, req->job(), "kill"); !may.ok()) {
    return Counted(GrpcCounters::kKillJob, ToGrpc(may));
  }
  absl::StatusOr<v1::JobState> st = manager_->Kill(req->job(), req->reason());
  if (!st.ok()) return Counted(GrpcCounters::kKillJob, ToGrpc(st.status()));
  resp->set_state(*st);
  return Counted(GrpcCounters::kKillJob, grpc::Status::OK);
}

grpc::Status ClientService::ReleaseJob(grpc::ServerContext* ctx, const v1::ReleaseJobRequest* req,
                                       v1::ReleaseJobResponse* resp) {
  // Authorized as kill is; an array's name by its first element (one owner).
  std::vector<std::string> named = manager_->DependencyTargets(req->job());
  const std::string& checked = named.empty() ? req->job() : named.front();
  if (absl::Status may = MayActOnJob(ctx, checked, "release"); !may.ok()) {
    return Counted(GrpcCounters::kReleaseJob, ToGrpc(may));
  }
  absl::StatusOr<std::vector<std::string>> released = manager_->Release(req->job());
  if (!released.ok()) return Counted(GrpcCounters::kReleaseJob, ToGrpc(released.status()));
  for (std::string& j : *released) resp->add_released(std::move(j));
  return Counted(GrpcCounters::kReleaseJob, grpc::Status::OK);
}

grpc::Status ClientService::DeleteJob(grpc::ServerContext* ctx, const v1::DeleteJobRequest* req,
                                      v1::DeleteJobResponse* resp) {
  if (absl::Status may = MayActOnJob(ctx, req->job(), "delete"); !may.ok()) {
    return Counted(GrpcCounters::kDeleteJob, ToGrpc(may));
  }
  absl::StatusOr<v1::DeleteJobResponse> r = manager_->DeleteJob(req->job());
  if (!r.ok()) return Counted(GrpcCounters::kDeleteJob, ToGrpc(r.status()));
  *resp = std::move(*r);
  return Counted(GrpcCounters::kDeleteJob, grpc::Status::OK);
}

// The node admin verbs: cluster admins only.
grpc::Status ClientService::Administer(grpc::ServerContext* ctx, JobManager::NodeAdmin what,
                                       const v1::NodeAdminRequest* req, v1::NodeAdminResponse* resp) {
  absl::StatusOr<security::Principal> who = Who(ctx);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status may = security::AccessPolicy::MayAdminister(*who, "cordon, uncordon, drain or remove nodes");
      !may.ok()) {
    return ToGrpc(may);
  }
  absl::StatusOr<v1::NodeAdminResponse> r = manager_->AdministerNode(what, *req);
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ClientService::CordonNode(grpc::ServerContext* ctx, const v1::NodeAdminRequest* req,
                                       v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kCordonNode, Administer(ctx, JobManager::NodeAdmin::kCordon, req, resp));
}

grpc::Status ClientService::UncordonNode(grpc::ServerContext* ctx, const v1::NodeAdminRequest* req,
                                         v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kUncordonNode, Administer(ctx, JobManager::NodeAdmin::kUncordon, req, resp));
}

grpc::Status ClientService::DrainNode(grpc::ServerContext* ctx, const v1::NodeAdminRequest* req,
                                      v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kDrainNode, Administer(ctx, JobManager::NodeAdmin::kDrain, req, resp));
}

grpc::Status ClientService::RemoveNode(grpc::ServerContext* ctx, const v1::NodeAdminRequest* req,
                                       v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kRemoveNode, Administer(ctx, JobManager::NodeAdmin::kRemove, req, resp));
}

grpc::Status ClientService::ListNodes(grpc::ServerContext* ctx, const v1::ListNodesRequest*,
                                      v1::ListNodesResponse* resp) {
  if (absl::StatusOr<security::Principal> who = Who(ctx); !who.ok()) {
    return Counted(GrpcCounters::kListNodes, ToGrpc(who.status()));
  }
  for (auto& n : manager_->ListNodes()) *resp->add_nodes() = std::move(n);
  return Counted(GrpcCounters::kListNodes, grpc::Status::OK);
}

namespace {

// The upper bound (ms) of the bucket that holds quantile `q`; -1 above the
// last bound, 0 with no observation.
double QuantileBoundMs(const Histogram& h, double q) {
  if (h.count() == 0) return 0;
  for (int i = 0; i < h.buckets(); ++i) {
    if (static_cast<double>(h.cumulative(i)) >= q * static_cast<double>(h.count())) return h.bound(i) * 1000;
  }
  return -1;
}

}  // namespace

grpc::Status ClientService::GetClusterStatus(grpc::ServerContext* ctx, const v1::ClusterStatusRequest*,
                                             v1::ClusterStatus* resp) {
  // Limited as listing jobs is: it may read etcd.
  if (absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kListJobs); !who.ok()) {
    return Counted(GrpcCounters::kGetClusterStatus, ToGrpc(who.status()));
  }
  if (status_source_) status_source_(resp);
  const ViewStore& views = manager_->Views();
  if (ViewStore::NodesPtr nodes = views.Nodes()) {
    for (const ViewStore::NodeEntry& n : *nodes) {
      resp->set_nodes(resp->nodes() + 1);
      if (n.view && n.view->info().state() == v1::NODE_READY) resp->set_nodes_ready(resp->nodes_ready() + 1);
    }
  }
  for (const auto& [queue_state, count] : views.StateCounts().jobs) {
    if (queue_state.second == v1::JOB_RUNNING) resp->set_jobs_running(resp->jobs_running() + static_cast<int32_t>(count));
    if (queue_state.second == v1::JOB_QUEUED) resp->set_jobs_queued(resp->jobs_queued() + static_cast<int32_t>(count));
  }
  if (ViewStore::StatsPtr stats = views.Stats()) {
    resp->set_store_commit_p50_ms(QuantileBoundMs(stats->store.commit_seconds, 0.5));
    resp->set_store_commit_p99_ms(QuantileBoundMs(stats->store.commit_seconds, 0.99));
  }
  return Counted(GrpcCounters::kGetClusterStatus, grpc::Status::OK);
}

grpc::Status ClientService::ListQueues(grpc::ServerContext* ctx, const v1::ListQueuesRequest*,
                                       v1::ListQueuesResponse* resp) {
  if (absl::StatusOr<security::Principal> who = Who(ctx); !who.ok()) {
    return Counted(GrpcCounters::kListQueues, ToGrpc(who.status()));
  }
  *resp = manager_->ListQueues();
  return Counted(GrpcCounters::kListQueues, grpc::Status::OK);
}

grpc::Status ClientService::ReportJobOutcome(grpc::ServerContext* ctx, const v1::JobOutcomeRequest* req,
                                             v1::JobOutcomeResponse*) {
  if (absl::Status from = FromJobMaster(ctx, req->job()); !from.ok()) {
    return Counted(GrpcCounters::kReportJobOutcome, ToGrpc(from));
  }
  return Counted(GrpcCounters::kReportJobOutcome, ToGrpc(manager_->ReportOutcome(*req)));
}

grpc::Status ClientService::ReportWorkerFailure(grpc::ServerContext* ctx, const v1::WorkerFailureRequest* req,
                                                v1::WorkerFailureResponse*) {
  if (absl::Status from = FromJobMaster(ctx, req->job()); !from.ok()) {
    return Counted(GrpcCounters::kReportWorkerFailure, ToGrpc(from));
  }
  return Counted(GrpcCounters::kReportWorkerFailure, ToGrpc(manager_->ReportWorkerFailure(*req)));
}

grpc::Status ClientService::ReportJobMasterSummary(grpc::ServerContext* ctx, const v1::JobMasterSummary* req,
                                                   v1::JobMasterSummaryResponse* resp) {
  if (absl::Status from = FromJobMaster(ctx, req->job()); !from.ok()) {
    return Counted(GrpcCounters::kReportJobMasterSummary, ToGrpc(from));
  }
  // The job's open order to checkpoint, from its published view (no lock on
  // the control state): the master passes it to its workers.
  if (std::shared_ptr<const v1::JobView> job = manager_->JobSummary(req->job());
      job && job->checkpoint_order().id() > 0 && !req->final()) {
    *resp->mutable_checkpoint() = job->checkpoint_order();
  }
  return Counted(GrpcCounters::kReportJobMasterSummary, ToGrpc(masters_.Report(*req, absl::Now())));
}

grpc::Status ClientService::ReportCheckpoint(grpc::ServerContext* ctx, const v1::CheckpointReport* req,
                                             v1::CheckpointReportResponse*) {
  if (absl::Status from = FromJobMaster(ctx, req->job()); !from.ok()) {
    return Counted(GrpcCounters::kReportCheckpoint, ToGrpc(from));
  }
  return Counted(GrpcCounters::kReportCheckpoint, ToGrpc(manager_->ReportCheckpoint(*req)));
}

grpc::Status ClientService::CreateToken(grpc::ServerContext* ctx, const v1::CreateTokenRequest* req,
                                        v1::CreateTokenResponse* resp) {
  absl::StatusOr<security::Principal> who = WhoWithin(ctx, UserRateLimiter::kCreateToken);
  if (!who.ok()) return Counted(GrpcCounters::kCreateToken, ToGrpc(who.status()));
  if (absl::Status may = security::AccessPolicy::MayAdminister(*who, "create tokens"); !may.ok()) {
    return Counted(GrpcCounters::kCreateToken, ToGrpc(may));
  }
  if (!security_->enabled()) {
    return Counted(GrpcCounters::kCreateToken,
                   ToGrpc(absl::FailedPreconditionError("this server runs with --no-auth: it checks no tokens")));
  }
  absl::StatusOr<std::string> token = security_->tokens().Issue(req->user(), req->admin());
  if (!token.ok()) return Counted(GrpcCounters::kCreateToken, ToGrpc(token.status()));
  resp->set_token(*token);
  return Counted(GrpcCounters::kCreateToken, grpc::Status::OK);
}

}  // namespace trainyard::server
