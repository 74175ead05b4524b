// Client RPC handlers: thin translations onto JobManager.
#include "server/client_service.h"

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

grpc::ServerUnaryReactor* ClientService::Submit(grpc::CallbackServerContext* ctx, const v1::SubmitRequest* req,
                                                v1::SubmitResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  SubmitFromRequest(manager_, *req, [this, reactor, resp](absl::StatusOr<v1::SubmitResponse> r) {
    if (r.ok()) *resp = std::move(*r);
    counters_.Count(GrpcCounters::kSubmit, static_cast<int>(r.status().code()));
    reactor->Finish(r.ok() ? grpc::Status::OK : ToGrpc(r.status()));
  });
  return reactor;
}

grpc::Status ClientService::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) {
  for (auto& j : manager_->ListJobs(*req)) *resp->add_jobs() = std::move(j);
  return Counted(GrpcCounters::kListJobs, grpc::Status::OK);
}

grpc::Status ClientService::DescribeJob(grpc::ServerContext*, const v1::DescribeJobRequest* req,
                                        v1::JobView* resp) {
  absl::StatusOr<v1::JobView> v = manager_->Describe(req->job());
  if (!v.ok()) return Counted(GrpcCounters::kDescribeJob, ToGrpc(v.status()));
  *resp = std::move(*v);
  return Counted(GrpcCounters::kDescribeJob, grpc::Status::OK);
}

grpc::Status ClientService::KillJob(grpc::ServerContext*, const v1::KillJobRequest* req,
                                    v1::KillJobResponse* resp) {
  absl::StatusOr<v1::JobState> st = manager_->Kill(req->job(), req->reason());
  if (!st.ok()) return Counted(GrpcCounters::kKillJob, ToGrpc(st.status()));
  resp->set_state(*st);
  return Counted(GrpcCounters::kKillJob, grpc::Status::OK);
}

grpc::Status ClientService::DeleteJob(grpc::ServerContext*, const v1::DeleteJobRequest* req,
                                      v1::DeleteJobResponse* resp) {
  absl::StatusOr<v1::DeleteJobResponse> r = manager_->DeleteJob(req->job());
  if (!r.ok()) return Counted(GrpcCounters::kDeleteJob, ToGrpc(r.status()));
  *resp = std::move(*r);
  return Counted(GrpcCounters::kDeleteJob, grpc::Status::OK);
}

namespace {
// The admin verbs: authorization (the caller must be a cluster admin) goes
// here once principals exist.
grpc::Status Administer(JobManager* manager, JobManager::NodeAdmin what, const v1::NodeAdminRequest* req,
                        v1::NodeAdminResponse* resp) {
  absl::StatusOr<v1::NodeAdminResponse> r = manager->AdministerNode(what, *req);
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}
}  // namespace

grpc::Status ClientService::CordonNode(grpc::ServerContext*, const v1::NodeAdminRequest* req,
                                       v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kCordonNode, Administer(manager_, JobManager::NodeAdmin::kCordon, req, resp));
}

grpc::Status ClientService::UncordonNode(grpc::ServerContext*, const v1::NodeAdminRequest* req,
                                         v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kUncordonNode, Administer(manager_, JobManager::NodeAdmin::kUncordon, req, resp));
}

grpc::Status ClientService::DrainNode(grpc::ServerContext*, const v1::NodeAdminRequest* req,
                                      v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kDrainNode, Administer(manager_, JobManager::NodeAdmin::kDrain, req, resp));
}

grpc::Status ClientService::RemoveNode(grpc::ServerContext*, const v1::NodeAdminRequest* req,
                                       v1::NodeAdminResponse* resp) {
  return Counted(GrpcCounters::kRemoveNode, Administer(manager_, JobManager::NodeAdmin::kRemove, req, resp));
}

grpc::Status ClientService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                      v1::ListNodesResponse* resp) {
  for (auto& n : manager_->ListNodes()) *resp->add_nodes() = std::move(n);
  return Counted(GrpcCounters::kListNodes, grpc::Status::OK);
}

grpc::Status ClientService::ListQueues(grpc::ServerContext*, const v1::ListQueuesRequest*,
                                       v1::ListQueuesResponse* resp) {
  *resp = manager_->ListQueues();
  return Counted(GrpcCounters::kListQueues, grpc::Status::OK);
}

grpc::Status ClientService::ReportJobOutcome(grpc::ServerContext*, const v1::JobOutcomeRequest* req,
                                             v1::JobOutcomeResponse*) {
  return Counted(GrpcCounters::kReportJobOutcome, ToGrpc(manager_->ReportOutcome(*req)));
}

grpc::Status ClientService::ReportWorkerFailure(grpc::ServerContext*, const v1::WorkerFailureRequest* req,
                                                v1::WorkerFailureResponse*) {
  return Counted(GrpcCounters::kReportWorkerFailure, ToGrpc(manager_->ReportWorkerFailure(*req)));
}

}  // namespace trainyard::server
