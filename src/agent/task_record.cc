// JSON encoding of TaskRecord with nlohmann::json.
#include "agent/task_record.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"

namespace trainyard::agent {
namespace {

// oom_max_restarts of a launch that has none (nullopt).
constexpr int kOomCountsAsFailure = -2;


using nlohmann::json;

json AccountToJson(const std::optional<TaskAccount>& a) {
  if (!a) return nullptr;
  return json{{"name", a->name}, {"uid", a->uid}, {"gid", a->gid}, {"groups", a->groups}, {"home", a->home}};
}

// A restarted agent restarts the task as the account it was started as.
std::optional<TaskAccount> AccountFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  return TaskAccount{.name = j.at("name").get<std::string>(),
                     .uid = j.at("uid").get<uint32_t>(),
                     .gid = j.at("gid").get<uint32_t>(),
                     .groups = j.at("groups").get<std::vector<uint32_t>>(),
                     .home = j.at("home").get<std::string>()};
}

json ImageToJson(const TaskImage& i) {
  json volumes = json::array();
  for (const BundleMount& v : i.volumes) {
    volumes.push_back(json{{"source", v.source}, {"destination", v.destination}, {"read_only", v.read_only}});
  }
  return json{{"ref", i.ref}, {"digest", i.digest}, {"rootfs", i.rootfs}, {"env", i.env}, {"volumes", volumes}};
}

TaskImage ImageFromJson(const json& j) {
  TaskImage i;
  i.ref = j.at("ref").get<std::string>();
  i.digest = j.at("digest").get<std::string>();
  i.rootfs = j.at("rootfs").get<std::string>();
  i.env = j.at("env").get<std::vector<std::string>>();
  for (const json& v : j.at("volumes")) {
    i.volumes.push_back({v.at("source").get<std::string>(), v.at("destination").get<std::string>(),
                         v.at("read_only").get<bool>()});
  }
  return i;
}

json LaunchToJson(const TaskLaunch& l) {
  json j = json{{"job", l.key.job},
              {"key_job_id", l.key.job_id},
              {"user", l.user},
              {"run_as", AccountToJson(l.run_as)},
              {"job_id", l.job_id},
              {"role", l.key.role},
              {"index", l.key.index},
              {"worker_id", l.worker_id},
              {"attempt", l.attempt},
              {"command", l.command},
              {"env", l.env},
              {"working_dir", l.working_dir},
              {"gpus", l.gpus.bits()},
              {"gpu_milli", l.gpu_milli},
              {"gpu_memory_mb", l.gpu_memory_mb},
              {"mps_pipe_dir", l.mps_pipe_dir},
              {"mps_log_dir", l.mps_log_dir},
              {"ports", l.ports.ToString()},
              {"checkpoint_dir", l.checkpoint_dir},
              {"memory_limit_mb", l.memory_limit_mb},
              {"vcores_milli", l.vcores_milli},
              {"restart_policy", static_cast<int>(l.restart_policy)},
              {"max_restarts", l.max_restarts},
              {"oom_max_restarts", l.oom_max_restarts.value_or(kOomCountsAsFailure)},
              {"backoff_initial_ms", absl::ToInt64Milliseconds(l.backoff_initial)},
              {"backoff_max_ms", absl::ToInt64Milliseconds(l.backoff_max)},
              {"kill_grace_ms", absl::ToInt64Milliseconds(l.kill_grace)}};
  if (l.image) j["image"] = ImageToJson(*l.image);
  return j;
}

TaskLaunch LaunchFromJson(const json& j) {
  TaskLaunch l;
  l.key = {j.at("job").get<std::string>(), j.at("role").get<std::string>(), j.at("index").get<int>()};
  l.job_id = j.value("job_id", uint64_t{0});  // records written before it was kept have none
  // Records of agents from before places were named by the job's id lack
  // key_job_id: their task's logs and work dir are where that agent put
  // them, under the job's name, and the adopted task keeps them there.
  l.key.job_id = j.value("key_job_id", uint64_t{0});
  l.user = j.value("user", std::string());
  if (j.contains("run_as")) l.run_as = AccountFromJson(j.at("run_as"));
  l.worker_id = j.at("worker_id").get<int>();
  l.attempt = j.at("attempt").get<int>();
  l.command = j.at("command").get<std::vector<std::string>>();
  l.env = j.at("env").get<std::map<std::string, std::string>>();
  l.working_dir = j.at("working_dir").get<std::string>();
  l.gpus = core::GpuSet(j.at("gpus").get<uint64_t>());
  // Records written before GPU shares lack these: whole GPUs.
  l.gpu_milli = j.value("gpu_milli", 0);
  l.gpu_memory_mb = j.value("gpu_memory_mb", int64_t{0});
  l.mps_pipe_dir = j.value("mps_pipe_dir", std::string());
  l.mps_log_dir = j.value("mps_log_dir", std::string());
  absl::StatusOr<core::PortRanges> ports = core::PortRanges::Parse(j.at("ports").get<std::string>());
  if (ports.ok()) l.ports = *ports;
  l.checkpoint_dir = j.at("checkpoint_dir").get<std::string>();
  l.memory_limit_mb = j.at("memory_limit_mb").get<int64_t>();
  l.vcores_milli = j.at("vcores_milli").get<int64_t>();
  l.restart_policy = static_cast<RestartPolicy>(j.at("restart_policy").get<int>());
  l.max_restarts = j.at("max_restarts").get<int>();
  // Records written before OOM kills had a budget of their own lack it.
  if (int oom = j.value("oom_max_restarts", kOomCountsAsFailure); oom != kOomCountsAsFailure) {
    l.oom_max_restarts = oom;
  }
  l.backoff_initial = absl::Milliseconds(j.at("backoff_initial_ms").get<int64_t>());
  l.backoff_max = absl::Milliseconds(j.at("backoff_max_ms").get<int64_t>());
  l.kill_grace = absl::Milliseconds(j.at("kill_grace_ms").get<int64_t>());
  if (j.contains("image")) l.image = ImageFromJson(j.at("image"));
  return l;
}

}  // namespace

std::string TaskRecordPath(const std::string& data_dir, const TaskKey& key) {
  return absl::StrCat(data_dir, "/tasks/", key.Place(), ".json");
}

absl::Status WriteTaskRecord(const std::string& data_dir, const TaskRecord& record) {
  std::string path = TaskRecordPath(data_dir, record.launch.key);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  json j{{"launch", LaunchToJson(record.launch)}, {"attempt", record.attempt},
         {"restarts", record.restarts},           {"oom_restarts", record.oom_restarts},
         {"pid", record.pid},
         {"start_time", record.start_time},       {"cgroup", record.cgroup}};
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump();
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
  }
  // It holds the task's env values: the agent's alone, whatever the umask.
  std::filesystem::permissions(tmp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

void RemoveTaskRecord(const std::string& data_dir, const TaskKey& key) {
  std::error_code ec;
  std::filesystem::remove(TaskRecordPath(data_dir, key), ec);
}

std::vector<TaskRecord> ReadTaskRecords(const std::string& data_dir) {
  std::vector<TaskRecord> records;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(data_dir + "/tasks", ec)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("launch")) {
      Log(LogLevel::kWarning, "supervisor", "skipping task state file %s: not valid JSON",
          entry.path().string());
      continue;
    }
    try {  // nlohmann reports missing or mistyped fields by exception; kept local
      TaskRecord r{.launch = LaunchFromJson(j.at("launch")),
                   .attempt = j.at("attempt").get<int>(),
                   .restarts = j.at("restarts").get<int>(),
                   .oom_restarts = j.value("oom_restarts", 0),
                   .pid = j.at("pid").get<int>(),
                   .start_time = j.at("start_time").get<uint64_t>(),
                   .cgroup = j.at("cgroup").get<std::string>()};
      records.push_back(std::move(r));
    } catch (const json::exception& e) {
      Log(LogLevel::kWarning, "supervisor", "skipping task state file %s: %s",
          entry.path().string(), e.what());
    }
  }
  return records;
}

}  // namespace trainyard::agent
