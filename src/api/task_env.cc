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

// A task of the job with its role's traits (the role's kind read from the
// spec once per role, not once per task).
struct OrderedTask {
  const PlacedTaskView* task;
  RoleTraits traits;
};

// Tasks of the job in a stable order: role order of the spec, then index.
// One pass over the tasks by role, then a sort per role: O(T log T) (it was
// a pass per role, O(roles x tasks), for each task's environment).
std::vector<OrderedTask> Ordered(const TaskEnvInput& in) {
  std::map<std::string, std::vector<const PlacedTaskView*>> by_role;
  for (const auto& t : in.tasks) by_role[t.role].push_back(&t);
  std::vector<OrderedTask> out;
  out.reserve(in.tasks.size());
  for (const auto& rs : in.spec->replicas()) {
    auto it = by_role.find(rs.role());
    if (it == by_role.end()) continue;
    std::vector<const PlacedTaskView*>& role = it->second;
    std::stable_sort(role.begin(), role.end(), [](auto* a, auto* b) { return a->index < b->index; });
    RoleTraits traits = TraitsOf(in.spec->framework(), rs);
    for (const PlacedTaskView* t : role) out.push_back({t, traits});
    by_role.erase(it);  // a role the spec names twice (refused at submit) is listed once
  }
  return out;
}

// TF_CONFIG's "cluster": {"ps": ["host:port", ...], "worker": [...]}.
std::string TfCluster(const std::vector<OrderedTask>& ordered) {
  nlohmann::json cluster = nlohmann::json::object();
  for (const auto& [t, traits] : ordered) {
    if (!traits.in_tf_cluster) continue;
    cluster[t->role].push_back(HostPort(*t));
  }
  return cluster.dump();
}

// What nlohmann's dump of {"cluster": C, "task": {"type": R, "index": I}}
// writes (keys sorted), with the cluster's text built once per job.
std::string TfConfig(const JobWideEnv& job, const PlacedTaskView& self) {
  return absl::StrCat("{\"cluster\":", job.tf_cluster, ",\"task\":{\"index\":", self.index,
                      ",\"type\":", nlohmann::json(self.role).dump(), "}}");
}

// Rank 0 is the "master" role when there is one, else worker 0; a node's
// rank is its first appearance in rank order.
void TorchRanks(const std::vector<OrderedTask>& ordered, JobWideEnv* job) {
  std::vector<const PlacedTaskView*> ranks;
  for (const auto& [t, traits] : ordered) {
    if (traits.torch_rank0) ranks.insert(ranks.begin(), t);
    else if (traits.torch_rank) ranks.push_back(t);
  }
  if (ranks.empty()) return;
  std::map<std::string, int> node_rank, node_tasks;
  for (const PlacedTaskView* t : ranks) {
    node_rank.emplace(t->node, static_cast<int>(node_rank.size()));
    ++node_tasks[t->node];
  }
  std::map<std::string, int> seen;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const PlacedTaskView* t = ranks[i];
    job->torch.emplace(std::pair(t->role, t->index),
                       JobWideEnv::TorchRank{.rank = static_cast<int>(i), .local_rank = seen[t->node]++,
                                             .local_world = node_tasks[t->node], .node_rank = node_rank[t->node]});
  }
  job->torch_master_addr = ranks[0]->address;
  job->torch_master_port = absl::StrCat(ranks[0]->ports.empty() ? 0 : ranks[0]->ports.front());
  job->torch_world = static_cast<int>(ranks.size());
}

void PytorchEnv(const JobWideEnv& job, const PlacedTaskView& self, TaskEnv* out) {
  auto it = job.torch.find(std::pair(self.role, self.index));
  if (it == job.torch.end()) return;
  out->env["MASTER_ADDR"] = job.torch_master_addr;
  out->env["MASTER_PORT"] = job.torch_master_port;
  out->env["RANK"] = absl::StrCat(it->second.rank);
  out->env["WORLD_SIZE"] = absl::StrCat(job.torch_world);
  out->env["LOCAL_RANK"] = absl::StrCat(it->second.local_rank);
  out->env["LOCAL_WORLD_SIZE"] = absl::StrCat(it->second.local_world);
  out->env["NODE_RANK"] = absl::StrCat(it->second.node_rank);
}

// One "ADDRESS slots=N" line per node of the MPI workers, in task order. The
// launcher is not a rank (it runs mpirun, which starts the ranks on the
// workers), so it has no slot, as in Kubeflow's MPIJob.
std::string MpiHostfile(const std::vector<OrderedTask>& ordered) {
  std::vector<std::pair<std::string, int>> slots;  // address, tasks, in order
  std::map<std::string, size_t> at;                // address -> its place in slots
  for (const auto& [t, traits] : ordered) {
    if (!traits.mpi_host) continue;
    auto [it, fresh] = at.emplace(t->address, slots.size());
    if (fresh) slots.emplace_back(t->address, 0);
    ++slots[it->second].second;
  }
  std::string text;
  for (const auto& [addr, n] : slots) absl::StrAppend(&text, addr, " slots=", n, "\n");
  return text;
}

// "ADDRESS PORT" of the first MPI worker (with a port) on each address: the
// rank host that `trainyard rsh ADDRESS` asks to run a command there.
std::string MpiRankHosts(const std::vector<OrderedTask>& ordered) {
  std::set<std::string> seen;
  std::string text;
  for (const auto& [t, traits] : ordered) {
    if (!traits.mpi_host || t->ports.empty()) continue;
    if (seen.insert(t->address).second) absl::StrAppend(&text, t->address, " ", t->ports.front(), "\n");
  }
  return text;
}

}  // namespace

std::string JobCheckpointDir(const std::string& root, const std::string& job, uint64_t job_id) {
  return absl::StrCat(root, "/", job, ".", job_id);
}

std::string PortsList(const std::vector<uint32_t>& ports) { return absl::StrJoin(ports, ","); }

void SetAttemptEnv(int attempt, std::map<std::string, std::string>* env) {
  (*env)[kAttemptEnv] = absl::StrCat(attempt);
  (*env)[kRestartCountEnv] = absl::StrCat(attempt);
}

void SetTaskSelfEnv(const TaskSelf& self, std::map<std::string, std::string>* env) {
  (*env)[kJobEnv] = self.job;
  (*env)[kRoleEnv] = self.role;
  (*env)[kIndexEnv] = absl::StrCat(self.index);
  (*env)[kWorkerIdEnv] = absl::StrCat(self.worker_id);
  (*env)[kPortsEnv] = PortsList(self.ports);
  (*env)[kCheckpointDirEnv] = self.checkpoint_dir;
  (*env)["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(self.gpus, ",");
  if (self.gpu_milli > 0) {
    (*env)[kGpuShareEnv] = absl::StrCat(self.gpu_milli);
  } else {
    env->erase(kGpuShareEnv);
  }
  if (self.gpu_milli > 0 && self.gpu_memory_mb > 0) {
    (*env)[kGpuMemoryMbEnv] = absl::StrCat(self.gpu_memory_mb);
  } else {
    env->erase(kGpuMemoryMbEnv);
  }
}

JobWideEnv BuildJobWideEnv(const TaskEnvInput& in) {
  JobWideEnv job;
  std::vector<OrderedTask> ordered = Ordered(in);
  for (const auto& [t, traits] : ordered) {
    absl::StrAppend(&job.hosts, t->address, " ", TaskName(in.job, t->role, t->index), "\n");
  }
  switch (in.spec->framework()) {
    case v1::FRAMEWORK_TENSORFLOW:
      job.tf_cluster = TfCluster(ordered);
      break;
    case v1::FRAMEWORK_PYTORCH:
      TorchRanks(ordered, &job);
      break;
    case v1::FRAMEWORK_MPI:
      job.mpi_hostfile = MpiHostfile(ordered);
      job.mpi_rank_hosts = MpiRankHosts(ordered);
      break;
    default:
      break;
  }
  return job;
}

TaskEnv BuildTaskEnv(const TaskEnvInput& in, const PlacedTaskView& self) {
  return BuildTaskEnv(in, BuildJobWideEnv(in), self);
}

TaskEnv BuildTaskEnv(const TaskEnvInput& in, const JobWideEnv& job, const PlacedTaskView& self) {
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
  env[kTaskNameEnv] = TaskName(in.job, self.role, self.index);
  env[kTaskUserEnv] = in.spec->user();
  env[kNodeEnv] = self.node;
  env[kNodeAddressEnv] = self.address;
  SetAttemptEnv(in.attempt, &env);
  env[kNumWorkersEnv] = absl::StrCat(in.num_workers >= 0 ? in.num_workers : WorkerCount(*in.spec));
  if (in.membership_epoch > 0) env[kMembershipEpochEnv] = absl::StrCat(in.membership_epoch);
  if (in.resume_step >= 0) env[kResumeStepEnv] = absl::StrCat(in.resume_step);
  if (!in.array_job.empty()) {
    env[kArrayJobEnv] = in.array_job;
    env[kArrayIndexEnv] = absl::StrCat(in.array_index);
  }
  // A service (docs/services.md) is none of its framework's: no job
  // master (nor so its secret), no TF_CONFIG (TensorFlow refuses a task type
  // its cluster does not list), no rank, no MPI rank host; its port is
  // TRAINYARD_SERVICE_PORT, where the server's proxy reaches it.
  const bool service = TraitsOf(*in.spec, self.role).service;
  if (service && !self.ports.empty()) env[kServicePortEnv] = absl::StrCat(self.ports.front());
  if (!in.job_master.empty() && !service) {
    env[kJobMasterEnv] = in.job_master;
    // Rewritten when the master moves to another node (its node lost): the
    // worker library reads it when it reconnects.
    out.files["jobmaster"] = in.job_master + "\n";
    env[kJobMasterFileEnv] = "${TRAINYARD_TASK_DIR}/jobmaster";
  }
  out.files["hosts"] = job.hosts;
  env[kHostsFileEnv] = "${TRAINYARD_TASK_DIR}/hosts";
  switch (service ? v1::FRAMEWORK_NONE : in.spec->framework()) {
    case v1::FRAMEWORK_TENSORFLOW:
      env["TF_CONFIG"] = TfConfig(job, self);
      break;
    case v1::FRAMEWORK_PYTORCH:
      PytorchEnv(job, self, &out);
      break;
    case v1::FRAMEWORK_MPI:
      out.files["mpi_hostfile"] = job.mpi_hostfile;
      env[kMpiHostfileEnv] = "${TRAINYARD_TASK_DIR}/mpi_hostfile";
      out.files["mpi_rank_hosts"] = job.mpi_rank_hosts;
      env[kMpiRankHostsEnv] = "${TRAINYARD_TASK_DIR}/mpi_rank_hosts";
      env[kTrainyardBinEnv] = kTrainyardBinRef;
      env[kMpiRshAgentEnv] = absl::StrCat(kTrainyardBinRef, " rsh");
      // The daemons mpirun starts start no others (each would need the
      // launcher's rsh agent on its own node).
      env["OMPI_MCA_plm_rsh_no_tree_spawn"] = "1";
      break;
    default:
      break;
  }
  return out;
}

}  // namespace trainyard::api
