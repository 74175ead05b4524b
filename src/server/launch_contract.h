// The launch contract: what a task receives beside what the control state
// decided for it (api::BuildTaskEnv: its place, peers, ports, files). The
// server adds its credentials and opens its secrets as the launch leaves,
// here and nowhere else, whichever ExecutionBackend carries it:
//   - a job master task: its job's credential (TRAINYARD_JOB_TOKEN);
//   - the job master and every task given its address or an MPI rank host:
//     the job's secret (TRAINYARD_JOB_SECRET);
//   - a role that asked for it (userCredential): the job's user's
//     credential (TRAINYARD_TOKEN);
//   - the spec's secret env, opened (sealed in the store and the views);
//     what the server set wins over a secret of the same name.
// None of these is ever in the store or a view. LaunchContract wraps any
// backend so that what reaches it is the completed launch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "proto/service.pb.h"
#include "server/execution_backend.h"

namespace trainyard::server {

class TaskSecrets {
 public:
  // A job's credential, secret or user token by its id.
  using JobCredentials = std::function<std::string(uint64_t job_id)>;
  // Opens a sealed secret env value (TaskSpec.secret_env).
  using SecretOpener = std::function<absl::StatusOr<std::string>(const std::string& sealed)>;

  // `of`: job masters' credentials; `worker_secret_of`: the job's secret;
  // `user_token_of`: the job's user's credential. Unset: none is added (a
  // server run with --no-auth).
  void SetJobCredentials(JobCredentials of, JobCredentials worker_secret_of, JobCredentials user_token_of = {});
  // Unset: secret values pass as they are (a server without sealing).
  void SetSecretOpener(SecretOpener open) { open_secret_ = std::move(open); }

  // Adds to `task`'s environment what the contract above gives it and
  // clears its secret_env. A secret that cannot be opened (a data dir
  // whose sealing key was replaced) is left out and logged.
  void Complete(v1::TaskSpec& task) const;

 private:
  JobCredentials job_credentials_;
  JobCredentials job_worker_secrets_;
  JobCredentials job_user_tokens_;
  SecretOpener open_secret_;
};

// An ExecutionBackend that completes every launch with `secrets` and hands
// every order to `inner`. Neither is owned.
class LaunchContract final : public ExecutionBackend {
 public:
  LaunchContract(ExecutionBackend* inner, const TaskSecrets* secrets) : inner_(inner), secrets_(secrets) {}
  void Registered(const std::string& node, uint64_t session, const v1::Registered& ack) override {
    inner_->Registered(node, session, ack);
  }
  void Launch(const std::string& node, v1::TaskSpec task) override;
  void Kill(const std::string& node, const v1::KillTask& kill) override { inner_->Kill(node, kill); }
  void UpdateFiles(const std::string& node, const v1::TaskFiles& files) override { inner_->UpdateFiles(node, files); }
  void Drained(const std::string& node) override { inner_->Drained(node); }
  void OrderCheckpoint(const std::string& job_master, uint64_t job_id, const std::string& job,
                       const v1::CheckpointOrder& order) override {
    inner_->OrderCheckpoint(job_master, job_id, job, order);
  }
  bool ReadLog(const std::string& node, v1::LogRead read) override { return inner_->ReadLog(node, std::move(read)); }
  bool AckLog(const std::string& node, v1::LogAck ack) override { return inner_->AckLog(node, std::move(ack)); }
  bool CancelLog(const std::string& node, v1::LogCancel cancel) override {
    return inner_->CancelLog(node, std::move(cancel));
  }
  bool OpenExec(const std::string& node, v1::ExecOpen open) override { return inner_->OpenExec(node, std::move(open)); }
  bool ExecInput(const std::string& node, v1::ExecInput input) override {
    return inner_->ExecInput(node, std::move(input));
  }
  size_t Connected() const override { return inner_->Connected(); }

 private:
  ExecutionBackend* const inner_;
  const TaskSecrets* const secrets_;
};

}  // namespace trainyard::server
