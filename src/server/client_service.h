// The client side of the server's gRPC API: submit, list, describe, kill,
// logs (streamed from the node's agent), nodes, queues, and job masters'
// outcome reports, token creation. Every call is authenticated and
// authorized (security::ServerSecurity) before the job manager is called.
#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/service.grpc.pb.h"
#include "security/credential_check.h"
#include "security/server_security.h"
#include "server/api_counters.h"
#include "server/exec_relay.h"
#include "server/job_manager.h"
#include "server/logs/log_hub.h"
#include "server/master_metrics.h"
#include "server/service_links.h"
#include "server/user_rate_limiter.h"

namespace trainyard::server {

// Submit and Logs are served in gRPC's callback style: a submission is
// answered once durable and taken in (JobManager::SubmitAsync), so no thread waits on the disk
// per submission, and a log stream is fed by the log hub as agents push, so
// no thread is held per follower. The other methods are synchronous.
class ClientService final
    : public v1::Trainyard::WithCallbackMethod_Submit<
          v1::Trainyard::WithCallbackMethod_Logs<v1::Trainyard::WithCallbackMethod_Exec<v1::Trainyard::Service>>> {
 public:
  // `security` and `limits` (may be null: no rate limits) must outlive the
  // service. A call whose credential checks out marks its connection
  // authenticated (ConnectionGuard): it is then never shut down to make room
  // for a newcomer.
  ClientService(JobManager* manager, LogHub* logs, security::ServerSecurity* security,
                UserRateLimiter* limits = nullptr, ExecRelay* exec = nullptr, const ServiceLinks* links = nullptr)
      : manager_(manager), logs_(logs), security_(security), limits_(limits), exec_(exec), links_(links) {}

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* ctx, const v1::SubmitRequest* req,
                                   v1::SubmitResponse* resp) override;
  grpc::ServerWriteReactor<v1::LogChunk>* Logs(grpc::CallbackServerContext* ctx, const v1::LogsRequest* req) override;
  // A command in a running task (exec_relay.h): only the job's owner or a
  // cluster admin may (it runs as the job's account), not a queue's
  // administrator, who may read its logs and kill it.
  grpc::ServerBidiReactor<v1::ExecRequest, v1::ExecResponse>* Exec(grpc::CallbackServerContext* ctx) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse*) override;
  // `trainyard status`, for any authenticated caller: the server's own part
  // (address, store, leadership) from SetClusterStatusSource, nodes, jobs
  // and the store's latency from the published views.
  grpc::Status GetClusterStatus(grpc::ServerContext*, const v1::ClusterStatusRequest*, v1::ClusterStatus*) override;
  void SetClusterStatusSource(std::function<void(v1::ClusterStatus*)> source) { status_source_ = std::move(source); }
  // A link to a service task's port through the HTTP proxy
  // (service_links.h): the job's owner or a cluster admin, as exec.
  grpc::Status ServiceLink(grpc::ServerContext*, const v1::ServiceLinkRequest*, v1::ServiceLinkResponse*) override;
  // Accounting: every user may read every finished job's account, as they
  // may list every job (an account holds no environment).
  grpc::Status History(grpc::ServerContext*, const v1::HistoryRequest*, v1::HistoryResponse*) override;
  grpc::Status Usage(grpc::ServerContext*, const v1::UsageRequest*, v1::UsageResponse*) override;
  grpc::Status JobResources(grpc::ServerContext*, const v1::JobResourcesRequest*, v1::JobResourcesResponse*) override;
  grpc::Status CreateSchedule(grpc::ServerContext*, const v1::CreateScheduleRequest*, v1::ScheduleView*) override;
  grpc::Status ListSchedules(grpc::ServerContext*, const v1::ListSchedulesRequest*, v1::ListSchedulesResponse*) override;
  grpc::Status UpdateSchedule(grpc::ServerContext*, const v1::ScheduleRequest*, v1::ScheduleView*) override;
  grpc::Status DescribeJob(grpc::ServerContext*, const v1::DescribeJobRequest*, v1::JobView*) override;
  // The job's view, then each change of its state or reason, until it ends.
  // Holds a thread while it waits: bounded per user and in all
  // (RESOURCE_EXHAUSTED past them).
  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest*, grpc::ServerWriter<v1::JobView>*) override;
  grpc::Status KillJob(grpc::ServerContext*, const v1::KillJobRequest*, v1::KillJobResponse*) override;
  grpc::Status ReleaseJob(grpc::ServerContext*, const v1::ReleaseJobRequest*, v1::ReleaseJobResponse*) override;
  grpc::Status DeleteJob(grpc::ServerContext*, const v1::DeleteJobRequest*, v1::DeleteJobResponse*) override;
  grpc::Status CordonNode(grpc::ServerContext*, const v1::NodeAdminRequest*, v1::NodeAdminResponse*) override;
  grpc::Status UncordonNode(grpc::ServerContext*, const v1::NodeAdminRequest*, v1::NodeAdminResponse*) override;
  grpc::Status DrainNode(grpc::ServerContext*, const v1::NodeAdminRequest*, v1::NodeAdminResponse*) override;
  grpc::Status RemoveNode(grpc::ServerContext*, const v1::NodeAdminRequest*, v1::NodeAdminResponse*) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*, v1::ListNodesResponse*) override;
  grpc::Status ListQueues(grpc::ServerContext*, const v1::ListQueuesRequest*, v1::ListQueuesResponse*) override;
  grpc::Status ReportJobOutcome(grpc::ServerContext*, const v1::JobOutcomeRequest*,
                                v1::JobOutcomeResponse*) override;
  grpc::Status ReportWorkerFailure(grpc::ServerContext*, const v1::WorkerFailureRequest*,
                                   v1::WorkerFailureResponse*) override;
  grpc::Status CreateToken(grpc::ServerContext*, const v1::CreateTokenRequest*, v1::CreateTokenResponse*) override;
  // A job master's figures (master_metrics.h), checked as its outcome is.
  // Its answer carries the job's open order to checkpoint, if any.
  grpc::Status ReportJobMasterSummary(grpc::ServerContext*, const v1::JobMasterSummary*,
                                      v1::JobMasterSummaryResponse*) override;
  grpc::Status ReportCheckpoint(grpc::ServerContext*, const v1::CheckpointReport*,
                                v1::CheckpointReportResponse*) override;

  // What each method answered, for /metrics.
  const GrpcCounters& counters() const { return counters_; }
  // The job masters' summed figures, for /metrics.
  JobMasterMetrics& masters() { return masters_; }

 private:
  grpc::Status Counted(GrpcCounters::Method method, grpc::Status st);
  // The caller, from its "authorization" metadata.
  absl::StatusOr<security::Principal> Who(const grpc::ServerContextBase* ctx);
  // Who(), then `call`'s per-user rate limit (RESOURCE_EXHAUSTED over it).
  absl::StatusOr<security::Principal> WhoWithin(const grpc::ServerContextBase* ctx, UserRateLimiter::Call call);
  // For a stream `ctx` opens: its token checked again as it goes on
  // (security/credential_check.h).
  std::unique_ptr<security::CredentialCheck> StreamCredential(const grpc::ServerContextBase* ctx);
  // OK when the caller may `verb` job `name` (its owner, an administrator of
  // its queue, an admin); NotFound for no such job.
  absl::Status MayActOnJob(const grpc::ServerContextBase* ctx, const std::string& name, absl::string_view verb);
  // The job when the caller may run commands in job `name`'s tasks: its
  // owner or a cluster admin; NotFound for no such job.
  absl::StatusOr<std::shared_ptr<const v1::JobView>> MayRunInJob(const grpc::ServerContextBase* ctx,
                                                                 const std::string& name);
  // OK when the call comes from job `name`'s master (its credential), or
  // from a caller that may act on the job (a master inside the client).
  absl::Status FromJobMaster(const grpc::ServerContextBase* ctx, const std::string& name);
  grpc::Status Administer(grpc::ServerContext* ctx, JobManager::NodeAdmin what, const v1::NodeAdminRequest* req,
                          v1::NodeAdminResponse* resp);

  // Watches open now, in all and by user: WatchJob holds a thread of the
  // server's while it waits, so one user's watches are bounded, and all.
  bool TakeWatch(const std::string& user) ABSL_LOCKS_EXCLUDED(watch_mu_);
  void GiveBackWatch(const std::string& user) ABSL_LOCKS_EXCLUDED(watch_mu_);

  JobManager* const manager_;
  LogHub* const logs_;
  security::ServerSecurity* const security_;
  UserRateLimiter* const limits_;
  ExecRelay* const exec_;
  const ServiceLinks* const links_;
  std::function<void(v1::ClusterStatus*)> status_source_;  // set before the server listens
  GrpcCounters counters_;
  JobMasterMetrics masters_;
  absl::Mutex watch_mu_;
  int watches_ ABSL_GUARDED_BY(watch_mu_) = 0;
  absl::flat_hash_map<std::string, int> watches_by_user_ ABSL_GUARDED_BY(watch_mu_);
};

// Maps an absl::Status to a grpc::Status with the same code and message.
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace trainyard::server
