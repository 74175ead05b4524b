// The launch contract (see launch_contract.h).
#include "server/launch_contract.h"

#include "api/roles.h"
#include "api/task_env.h"
#include "common/logging.h"

namespace trainyard::server {

void TaskSecrets::SetJobCredentials(JobCredentials of, JobCredentials worker_secret_of, JobCredentials user_token_of) {
  job_credentials_ = std::move(of);
  job_worker_secrets_ = std::move(worker_secret_of);
  job_user_tokens_ = std::move(user_token_of);
}

void TaskSecrets::Complete(v1::TaskSpec& task) const {
  auto& env = *task.mutable_env();
  const bool master = api::IsJobMasterRole(task.role());
  if (job_credentials_ && master) env[kJobTokenEnv] = job_credentials_(task.job_id());
  // The secret lets a task register at its job's master: only the master
  // and the tasks given its address get it (a job without a master has
  // nothing to use it for, and an HMAC per launch is not free). The tasks
  // of an MPI job use it too: `trainyard rsh` presents it to the rank host
  // of another node's worker (jobmaster/client/rank_host.h).
  if (job_worker_secrets_ && (master || env.count(kJobMasterEnv) || env.count(api::kMpiRshAgentEnv))) {
    env[kJobSecretEnv] = job_worker_secrets_(task.job_id());
  }
  if (task.user_credential() && job_user_tokens_) env[kTokenEnv] = job_user_tokens_(task.job_id());
  for (const auto& [name, sealed] : task.secret_env()) {
    // What the server set (TRAINYARD_USER, the checkpoint dir, ...) wins, as
    // over plain env: a spec's secret must not choose who the task runs as.
    if (env.count(name)) continue;
    absl::StatusOr<std::string> value = open_secret_ ? open_secret_(sealed) : absl::StatusOr<std::string>(sealed);
    if (!value.ok()) {
      Log(LogLevel::kError, "server", "job %s: secret env %s of %s-%d cannot be opened: %s", task.job(), name,
          task.role(), task.index(), value.status().message());
      continue;
    }
    env[name] = *std::move(value);
  }
  task.clear_secret_env();
}

void LaunchContract::Launch(const std::string& node, v1::TaskSpec task) {
  secrets_->Complete(task);
  inner_->Launch(node, std::move(task));
}

}  // namespace trainyard::server
