// ServerJobTerminator: the default way a job master ends its job — it tells
// the Trainyard server the outcome (ReportJobOutcome), which then stops the
// job's remaining tasks (parameter servers above all). The call runs on its
// own thread so the master's event loop never waits on the network; it is
// retried with backoff until the server answers or gives up for good. A
// failed worker is reported the same way (ReportWorkerFailure): the server
// stops that attempt and the task's restart policy decides, so the master
// never ends a job for a failure its budget may still cover.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jobmaster/job_terminator.h"

namespace grpc {
class Channel;
class ChannelCredentials;
class ClientContext;
}

namespace trainyard::jobmaster {

// What a report carries to show the server it may speak for the job
// (docs/security.md): the job's credential when the master runs as the
// job's task, or the user's token when it runs inside the submitting client.
struct ReportCredentials {
  std::string job_token;  // sent as metadata "trainyard-job-token"
  std::string bearer;     // sent as "authorization: Bearer ..."
  // The CA (PEM) the server's certificate must be signed by (a server that
  // serves TLS); "" = plaintext.
  std::string server_ca_pem;
};

// The credentials of a channel to the server: TLS verified with
// `server_ca_pem` when there is one, else plaintext.
std::shared_ptr<grpc::ChannelCredentials> ServerChannelCredentials(const ReportCredentials& credentials);
// A channel to the server at `address`, or to whichever of a list of
// servers leads (common/server_list_channel.h), with those credentials.
std::shared_ptr<grpc::Channel> ServerChannel(const std::string& address, const ReportCredentials& credentials);

// Puts the credentials on a call's context.
void PresentCredentials(const ReportCredentials& credentials, grpc::ClientContext* ctx);

// Where this master serves, as the server computes it: the node's address
// and the task's first port (TRAINYARD_NODE_ADDRESS, TRAINYARD_PORTS). ""
// outside a task.
std::string ReportedMasterAddress();

class ServerJobTerminator : public JobTerminator {
 public:
  // `also` (may be nullptr) is told too, e.g. to print the outcome.
  ServerJobTerminator(std::string server_address, JobTerminator* also, ReportCredentials credentials = {});
  ~ServerJobTerminator() override;
  void Terminate(const JobEnd& end) override;
  bool WorkerFailed(const WorkerFailure& failure) override;
  // Reports the answer with ReportCheckpoint (retried as a failure report is).
  void Checkpointed(const CheckpointResult& result) override;
  // Waits (up to `seconds`) for the report to be delivered; true when it was
  // or when there was nothing to report (the master was stopped first).
  bool WaitDelivered(int seconds);

 private:
  struct State;
  std::string address_;
  JobTerminator* also_;
  ReportCredentials credentials_;
  std::shared_ptr<State> state_;
  std::thread thread_;
  std::vector<std::thread> failure_threads_;  // one per report, joined at the end
};

}  // namespace trainyard::jobmaster
