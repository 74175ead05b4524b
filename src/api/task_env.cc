// Task environment construction, per framework.
#include "api/task_env.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/resources/gpu_set.h"
#include "nlohmann/json.hpp"
#include "api/convert.h"

namespace trainyard::api {
namespace {

std::string HostPort(const PlacedTaskView& t) {
  return absl::StrCat(t.address, ":", t.ports.empty() ? 0 : t.ports.front());
}

// Tasks of the job in a stable order: role order of the spec, then index.
std::vector<const PlacedTaskView*> Ordered(const TaskEnvInput& in) {
  std::vector<const PlacedTaskView*> out;
  for (const auto& rs : in.spec->replicas()) {
    std::vector<const PlacedTaskView*> role;
    for (const auto& t : in.tasks) {
      if (t.role == rs.role()) role.push_back(&t);
    }
    std::sort(role.begin(), role.end(), [](auto* a, auto* b) { return a->index < b->index; });
    out.insert(out.end(), role.begin(), role.end());
  }
  return out;
}

std::string TfConfig(const TaskEnvInput& in, const PlacedTaskView& self) {
  nlohmann::json cluster = nlohmann::json::object();
  for (const PlacedTaskView* t : Ordered(in)) {
    if (!TraitsOf(in.spec->framework(), t->role).in_tf_cluster) continue;
    cluster[t->role].push_back(HostPort(*t));
  }
  nlohmann::json config;
  config["cluster"] = cluster;
  config["task"] = {{"type", self.role}, {"index", self.index}};
  return config.dump();
}

void PytorchEnv(const TaskEnvInput& in, const PlacedTaskView& self, TaskEnv* out) {
  // Rank 0 is the "master" role when there is one, else worker 0.
  std::vector<const PlacedTaskView*> ranks;
  for (const PlacedTaskView* t : Ordered(in)) {
    RoleTraits traits = TraitsOf(in.spec->framework(), t->role);
    if (traits.torch_rank0) ranks.insert(ranks.begin(), t);
    else if (traits.torch_rank) ranks.push_back(t);
  }
  std::vector<std::string> nodes;  // node rank = first appearance in rank order
  for (const PlacedTaskView* t : ranks) {
    if (std::find(nodes.begin(), nodes.end(), t->node) == nodes.end()) nodes.push_back(t->node);
  }
  int rank = -1, local_rank = 0, local_world = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i]->node == self.node) {
      if (ranks[i] == &self || (ranks[i]->role == self.role && ranks[i]->index == self.index)) {
        rank = static_cast<int>(i);
        local_rank = local_world;
      }
      ++local_world;
    }
  }
  if (rank < 0 || ranks.empty()) return;
  out->env["MASTER_ADDR"] = ranks[0]->address;
  out->env["MASTER_PORT"] = absl::StrCat(ranks[0]->ports.empty() ? 0 : ranks[0]->ports.front());
  out->env["RANK"] = absl::StrCat(rank);
  out->env["WORLD_SIZE"] = absl::StrCat(ranks.size());
  out->env["LOCAL_RANK"] = absl::StrCat(local_rank);
  out->env["LOCAL_WORLD_SIZE"] = absl::StrCat(local_world);
  int node_rank = static_cast<int>(std::find(nodes.begin(), nodes.end(), self.node) - nodes.begin());
  out->env["NODE_RANK"] = absl::StrCat(node_rank);
}

// One "ADDRESS slots=N" line per node of the MPI workers, in task order. The
// launcher is not a rank (it runs mpirun, which starts the ranks on the
// workers), so it has no slot, as in Kubeflow's MPIJob.
std::string MpiHostfile(const TaskEnvInput& in) {
  std::vector<std::pair<std::string, int>> slots;  // address, tasks, in order
  for (const PlacedTaskView* t : Ordered(in)) {
    if (!TraitsOf(in.spec->framework(), t->role).mpi_host) continue;
    auto it = std::find_if(slots.begin(), slots.end(), [&](auto& s) { return s.first == t->address; });
    if (it == slots.end()) slots.emplace_back(t->address, 1);
    else ++it->second;
  }
  std::string text;
  for (const auto& [addr, n] : slots) absl::StrAppend(&text, addr, " slots=", n, "\n");
  return text;
}

}  // namespace

std::string JobCheckpointDir(const std::string& root, const std::string& job, uint64_t job_id) {
  return absl::StrCat(root, "/", job, ".", job_id);
}

std::string PortsList(const std::vector<uint32_t>& ports) { return absl::StrJoin(ports, ","); }

void SetAttemptEnv(int attempt, std::map<std::string, std::string>* env) {
  (*env)["TRAINYARD_ATTEMPT"] = absl::StrCat(attempt);
  (*env)["TRAINYARD_RESTART_COUNT"] = absl::StrCat(attempt);
}

void SetTaskSelfEnv(const TaskSelf& self, std::map<std::string, std::string>* env) {
  (*env)["TRAINYARD_JOB"] = self.job;
  (*env)["TRAINYARD_ROLE"] = self.role;
  (*env)["TRAINYARD_INDEX"] = absl::StrCat(self.index);
  (*env)["TRAINYARD_WORKER_ID"] = absl::StrCat(self.worker_id);
  (*env)["TRAINYARD_PORTS"] = PortsList(self.ports);
  (*env)["TRAINYARD_CHECKPOINT_DIR"] = self.checkpoint_dir;
  (*env)["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(self.gpus, ",");
  if (self.gpu_milli > 0) {
    (*env)["TRAINYARD_GPU_SHARE"] = absl::StrCat(self.gpu_milli);
  } else {
    env->erase("TRAINYARD_GPU_SHARE");
  }
  if (self.gpu_milli > 0 && self.gpu_memory_mb > 0) {
    (*env)["TRAINYARD_GPU_MEMORY_MB"] = absl::StrCat(self.gpu_memory_mb);
  } else {
    env->erase("TRAINYARD_GPU_MEMORY_MB");
  }
}

TaskEnv BuildTaskEnv(const TaskEnvInput& in, const PlacedTaskView& self) {
  TaskEnv out;
  auto& env = out.env;
  SetTaskSelfEnv({.job = in.job,
                  .role = self.role,
                  .index = self.index,
                  .worker_id = self.worker_id,
                  .ports = self.ports,
                  .checkpoint_dir = in.checkpoint_dir,
                  .gpus = core::GpuSet(self.gpu_mask).Indices(),
                  .gpu_milli = self.gpu_milli,
                  .gpu_memory_mb = self.gpu_memory_mb},
                 &env);
  env["TRAINYARD_TASK_NAME"] = TaskName(in.job, self.role, self.index);
  env[kTaskUserEnv] = in.spec->user();
  env["TRAINYARD_NODE"] = self.node;
  env["TRAINYARD_NODE_ADDRESS"] = self.address;
  SetAttemptEnv(in.attempt, &env);
  env["TRAINYARD_NUM_WORKERS"] = absl::StrCat(WorkerCount(*in.spec));
  if (!in.job_master.empty()) {
    env[kJobMasterEnv] = in.job_master;
    // Rewritten when the master moves to another node (its node lost): the
    // worker library reads it when it reconnects.
    out.files["jobmaster"] = in.job_master + "\n";
    env["TRAINYARD_JOB_MASTER_FILE"] = "${TRAINYARD_TASK_DIR}/jobmaster";
  }
  std::string hosts;
  for (const PlacedTaskView* t : Ordered(in)) {
    absl::StrAppend(&hosts, t->address, " ", TaskName(in.job, t->role, t->index), "\n");
  }
  out.files["hosts"] = hosts;
  env["TRAINYARD_HOSTS_FILE"] = "${TRAINYARD_TASK_DIR}/hosts";
  switch (in.spec->framework()) {
    case v1::FRAMEWORK_TENSORFLOW:
      env["TF_CONFIG"] = TfConfig(in, self);
      break;
    case v1::FRAMEWORK_PYTORCH:
      PytorchEnv(in, self, &out);
      break;
    case v1::FRAMEWORK_MPI:
      out.files["mpi_hostfile"] = MpiHostfile(in);
      env["TRAINYARD_MPI_HOSTFILE"] = "${TRAINYARD_TASK_DIR}/mpi_hostfile";
      break;
    default:
      break;
  }
  return out;
}

}  // namespace trainyard::api
