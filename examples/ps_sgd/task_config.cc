// TaskConfigFromEnv: TF_CONFIG and TRAINYARD_* parsing for the ps example.
#include "ps_sgd/task_config.h"

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "ps_sgd/wire.h"

extern char** environ;

namespace trainyard::examples {
namespace {

std::string Get(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

absl::StatusOr<int> GetInt(const EnvMap& env, const std::string& name, int fallback) {
  std::string text = Get(env, name);
  if (text.empty()) return fallback;
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", text, "' is not a non-negative integer"));
  }
  return v;
}

// Fills role, index, ps and worker counts from TF_CONFIG.
absl::Status FromTfConfig(const std::string& text, TaskConfig* c) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("TF_CONFIG is not a JSON object");
  const nlohmann::json& task = j.value("task", nlohmann::json::object());
  if (!task.contains("type") || !task["type"].is_string() || !task.contains("index") ||
      !task["index"].is_number_integer()) {
    return absl::InvalidArgumentError("TF_CONFIG.task needs a string \"type\" and an integer \"index\"");
  }
  c->role = task["type"].get<std::string>();
  c->index = task["index"].get<int>();
  const nlohmann::json& cluster = j.value("cluster", nlohmann::json::object());
  auto list = [&](const char* role) {
    std::vector<std::string> out;
    if (cluster.contains(role) && cluster[role].is_array()) {
      for (const auto& e : cluster[role]) out.push_back(e.is_string() ? e.get<std::string>() : "");
    }
    return out;
  };
  c->ps = list("ps");
  int chiefs = static_cast<int>(list("chief").size());
  int workers = static_cast<int>(list("worker").size());
  c->num_workers = chiefs + workers;
  if (c->role == "chief") c->rank = c->index;
  else if (c->role == "worker") c->rank = chiefs + c->index;
  if (c->is_ps() && c->index < static_cast<int>(c->ps.size())) {
    auto hp = SplitHostPort(c->ps[c->index]);
    if (!hp.ok()) return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG.cluster.ps[", c->index, "]: ", hp.status().message()));
    c->listen_port = hp->second;
  }
  return absl::OkStatus();
}

absl::Status Check(const TaskConfig& c) {
  if (c.role != "ps" && c.role != "worker" && c.role != "chief") {
    return absl::InvalidArgumentError(absl::StrCat(
        "role '", c.role, "' (TF_CONFIG.task.type or TRAINYARD_ROLE) is not one of ps, worker, chief"));
  }
  if (c.ps.empty()) {
    return absl::InvalidArgumentError(
        "no parameter servers: TF_CONFIG.cluster.ps is empty and --ps was not given");
  }
  for (size_t i = 0; i < c.ps.size(); ++i) {
    if (auto hp = SplitHostPort(c.ps[i]); !hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ps[", i, "]: ", hp.status().message()));
    }
  }
  if (c.is_ps() && c.index >= static_cast<int>(c.ps.size())) {
    return absl::InvalidArgumentError(absl::StrCat("ps index ", c.index, " is outside the ", c.ps.size(), " parameter servers"));
  }
  if (!c.is_ps() && (c.num_workers < 1 || c.rank >= c.num_workers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker rank ", c.rank, " is outside the job's ", c.num_workers,
        " workers (TF_CONFIG.cluster or TRAINYARD_NUM_WORKERS)"));
  }
  if (c.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("TRAINYARD_CHECKPOINT_DIR is not set: the example checkpoints there");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TaskConfig> TaskConfigFromEnv(const EnvMap& env, const std::string& ps_flag) {
  TaskConfig c;
  std::string tf_config = Get(env, "TF_CONFIG");
  if (!tf_config.empty()) {
    if (absl::Status s = FromTfConfig(tf_config, &c); !s.ok()) return s;
  } else {
    c.role = Get(env, "TRAINYARD_ROLE");
    auto index = GetInt(env, "TRAINYARD_INDEX", 0);
    auto workers = GetInt(env, "TRAINYARD_NUM_WORKERS", 1);
    if (!index.ok()) return index.status();
    if (!workers.ok()) return workers.status();
    c.index = *index;
    c.num_workers = *workers;
    c.rank = c.index;
  }
  if (!ps_flag.empty()) c.ps = absl::StrSplit(ps_flag, ',', absl::SkipEmpty());
  std::string ports = Get(env, "TRAINYARD_PORTS");
  if (c.is_ps() && !ports.empty()) {
    std::string first(ports.substr(0, ports.find(',')));
    if (!absl::SimpleAtoi(first, &c.listen_port) || c.listen_port < 1 || c.listen_port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("TRAINYARD_PORTS='", ports, "' does not start with a port"));
    }
  }
  auto restarts = GetInt(env, "TRAINYARD_RESTART_COUNT", 0);
  if (!restarts.ok()) return restarts.status();
  c.restart_count = *restarts;
  c.checkpoint_dir = Get(env, "TRAINYARD_CHECKPOINT_DIR");
  c.job_master = Get(env, "TRAINYARD_JOB_MASTER");
  c.task_name = Get(env, "TRAINYARD_TASK_NAME");
  if (c.task_name.empty()) c.task_name = absl::StrCat(c.role, "-", c.index);
  if (absl::Status s = Check(c); !s.ok()) return s;
  return c;
}

EnvMap ProcessEnvironment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq != absl::string_view::npos) env[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return env;
}

}  // namespace trainyard::examples
