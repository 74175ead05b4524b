// The client side of the server's gRPC API: submit, list, describe, kill,
// logs (streamed from the node's agent), nodes, queues, and job masters'
// outcome reports.
#pragma once

#include "proto/service.grpc.pb.h"
#include "server/job_manager.h"

namespace trainyard::server {

// Submit is served in gRPC's callback style: the call is answered from the
// store's commit callback, so no thread waits on the disk per submission.
// The other methods are synchronous.
class ClientService final : public v1::Trainyard::WithCallbackMethod_Submit<v1::Trainyard::Service> {
 public:
  explicit ClientService(JobManager* manager) : manager_(manager) {}

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* ctx, const v1::SubmitRequest* req,
                                   v1::SubmitResponse* resp) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse*) override;
  grpc::Status DescribeJob(grpc::ServerContext*, const v1::DescribeJobRequest*, v1::JobView*) override;
  grpc::Status KillJob(grpc::ServerContext*, const v1::KillJobRequest*, v1::KillJobResponse*) override;
  grpc::Status Logs(grpc::ServerContext*, const v1::LogsRequest*, grpc::ServerWriter<v1::LogChunk>*) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*, v1::ListNodesResponse*) override;
  grpc::Status ListQueues(grpc::ServerContext*, const v1::ListQueuesRequest*, v1::ListQueuesResponse*) override;
  grpc::Status ReportJobOutcome(grpc::ServerContext*, const v1::JobOutcomeRequest*,
                                v1::JobOutcomeResponse*) override;

 private:
  JobManager* const manager_;
};

// Maps an absl::Status to a grpc::Status with the same code and message.
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace trainyard::server
