// ClientOptionsFromEnvironment: a worker's identity from the variables every
// Trainyard task gets (see DESIGN.md, "Job model").
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/task_env_names.h"
#include "jobmaster/client/job_master_client.h"

namespace trainyard::jobmaster {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// Parses an optional integer variable; `fallback` when unset.
absl::StatusOr<int> IntEnv(const char* name, int fallback) {
  std::string text = Env(name);
  if (text.empty()) return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s='%s' is not an integer", name, text));
  }
  return value;
}

}  // namespace

std::string ReadMasterAddressFile(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string CurrentMasterAddress(const JobMasterClientOptions& options) {
  std::string from_file = ReadMasterAddressFile(options.master_address_file);
  return from_file.empty() ? options.master_address : from_file;
}

absl::StatusOr<JobMasterClientOptions> ClientOptionsFromEnvironment() {
  JobMasterClientOptions options;
  options.master_address = Env(kJobMasterEnv);
  if (options.master_address.empty()) {
    return absl::FailedPreconditionError(
        "TRAINYARD_JOB_MASTER is not set: it holds the job master's host:port and is set in "
        "every Trainyard task");
  }
  options.master_address_file = Env(kJobMasterFileEnv);
  absl::StatusOr<int> id = IntEnv(kWorkerIdEnv, -1);
  absl::StatusOr<int> index = IntEnv(kIndexEnv, 0);
  absl::StatusOr<int> restarts = IntEnv(kRestartCountEnv, 0);
  for (const auto* s : {&id, &index, &restarts}) {
    if (!s->ok()) return s->status();
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  pb::WorkerInfo& info = options.info;
  info.set_worker_id(*id);
  info.set_ip(host);
  info.set_node_ip(host);
  info.set_role(Env(kRoleEnv));
  info.set_index(*index);
  if (!Env(kJobEnv).empty()) {
    info.set_task_name(absl::StrFormat("%s-%s-%d", Env(kJobEnv), info.role(), *index));
  }
  for (const std::string& part :
       std::vector<std::string>(absl::StrSplit(Env(kPortsEnv), ',', absl::SkipEmpty()))) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(part, &port) || port > 65535) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "TRAINYARD_PORTS='%s' is not a comma-separated list of ports", Env(kPortsEnv)));
    }
    info.add_ports(port);
  }
  options.restart_count = *restarts;
  options.job_secret = Env(kJobSecretEnv);
  return options;
}

}  // namespace trainyard::jobmaster
