// Tests of the task environment each framework gets (task_env.h): what a
// program of that framework reads, for the job shapes its users write.
#include "api/task_env.h"

#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void AddRole(v1::JobSpec* spec, const std::string& role, int count) {
  v1::ReplicaSpec* r = spec->add_replicas();
  r->set_role(role);
  r->set_count(count);
}

// Every task of `spec` placed: task k of the job on node-(k % nodes) at
// 10.0.0.(k % nodes + 1), port 2000 + k.
TaskEnvInput Placed(const v1::JobSpec& spec, int nodes) {
  TaskEnvInput in;
  in.spec = &spec;
  in.job = "j";
  int k = 0;
  for (const auto& rs : spec.replicas()) {
    for (int i = 0; i < rs.count(); ++i, ++k) {
      PlacedTaskView t;
      t.role = rs.role();
      t.index = i;
      t.worker_id = k;
      t.node = "node-" + std::to_string(k % nodes);
      t.address = "10.0.0." + std::to_string(k % nodes + 1);
      t.ports = {static_cast<uint32_t>(2000 + k)};
      in.tasks.push_back(t);
    }
  }
  return in;
}

const PlacedTaskView& Task(const TaskEnvInput& in, const std::string& role, int index) {
  for (const auto& t : in.tasks) {
    if (t.role == role && t.index == index) return t;
  }
  ADD_FAILURE() << "no task " << role << "/" << index;
  return in.tasks.front();
}

TEST(TaskEnvTest, AServiceGetsItsPortAndIsNoMemberOfItsFrameworksCluster) {
  for (v1::Framework fw : {v1::FRAMEWORK_TENSORFLOW, v1::FRAMEWORK_PYTORCH, v1::FRAMEWORK_MPI}) {
    SCOPED_TRACE(v1::Framework_Name(fw));
    v1::JobSpec spec;
    spec.set_framework(fw);
    AddRole(&spec, "worker", 2);
    AddRole(&spec, "board", 1);
    spec.mutable_replicas(1)->set_kind(v1::ROLE_KIND_SERVICE);
    TaskEnvInput in = Placed(spec, 3);  // the service alone on node-2 (10.0.0.3), port 2002
    TaskEnv board = BuildTaskEnv(in, Task(in, "board", 0));
    EXPECT_EQ(board.env.at(kServicePortEnv), "2002");
    EXPECT_EQ(board.env.count("TF_CONFIG"), 0u);
    EXPECT_EQ(board.env.count("RANK"), 0u);
    TaskEnv worker = BuildTaskEnv(in, Task(in, "worker", 1));
    EXPECT_EQ(worker.env.count(kServicePortEnv), 0u);
    EXPECT_EQ(worker.env.at("TRAINYARD_NUM_WORKERS"), "2");
    if (fw == v1::FRAMEWORK_TENSORFLOW) {
      EXPECT_THAT(worker.env.at("TF_CONFIG"), Not(HasSubstr("board")));
    } else if (fw == v1::FRAMEWORK_PYTORCH) {
      EXPECT_EQ(worker.env.at("WORLD_SIZE"), "2");
    } else {
      EXPECT_THAT(worker.files.at("mpi_hostfile"), Not(HasSubstr("10.0.0.3")));
      EXPECT_EQ(board.files.count("mpi_hostfile"), 0u);
      EXPECT_EQ(board.env.count("OMPI_MCA_plm_rsh_agent"), 0u);
    }
    // No job master's address or secret: a service does not talk to it.
    in.job_master = "10.0.0.1:9000";
    EXPECT_EQ(BuildTaskEnv(in, Task(in, "board", 0)).env.count("TRAINYARD_JOB_MASTER"), 0u);
    EXPECT_EQ(BuildTaskEnv(in, Task(in, "worker", 0)).env.at("TRAINYARD_JOB_MASTER"), "10.0.0.1:9000");
    // Every task still finds the service in the job's hosts file.
    EXPECT_THAT(worker.files.at("hosts"), HasSubstr("10.0.0.3 j-board-0"));
  }
}

TEST(TaskEnvTest, MpiHostfileListsTheWorkersOnlyNotTheLauncher) {
  v1::JobSpec spec;
  spec.set_framework(v1::FRAMEWORK_MPI);
  AddRole(&spec, "launcher", 1);
  AddRole(&spec, "worker", 3);
  TaskEnvInput in = Placed(spec, 1);  // all four on one node
  TaskEnv env = BuildTaskEnv(in, Task(in, "launcher", 0));
  EXPECT_EQ(env.files.at("mpi_hostfile"), "10.0.0.1 slots=3\n");
  EXPECT_EQ(env.env.at("TRAINYARD_NUM_WORKERS"), "3");
}

TEST(TaskEnvTest, MpiHostfileHasOneLinePerWorkerNodeInOrder) {
  v1::JobSpec spec;
  spec.set_framework(v1::FRAMEWORK_MPI);
  AddRole(&spec, "launcher", 1);  // node-0
  AddRole(&spec, "worker", 4);    // node-1, node-0, node-1, node-0
  TaskEnvInput in = Placed(spec, 2);
  TaskEnv env = BuildTaskEnv(in, Task(in, "worker", 0));
  EXPECT_EQ(env.files.at("mpi_hostfile"), "10.0.0.2 slots=2\n10.0.0.1 slots=2\n");
}

TEST(TaskEnvTest, MpiTasksStartDaemonsThroughTrainyardRshAtEachNodesFirstWorker) {
  v1::JobSpec spec;
  spec.set_framework(v1::FRAMEWORK_MPI);
  AddRole(&spec, "launcher", 1);  // node-0
  AddRole(&spec, "worker", 4);    // node-1, node-0, node-1, node-0
  TaskEnvInput in = Placed(spec, 2);
  TaskEnv env = BuildTaskEnv(in, Task(in, "launcher", 0));
  EXPECT_EQ(env.env.at("OMPI_MCA_plm_rsh_agent"), "${TRAINYARD_BIN} rsh");
  EXPECT_EQ(env.env.at("TRAINYARD_BIN"), "${TRAINYARD_BIN}");
  EXPECT_EQ(env.env.at("TRAINYARD_MPI_RANK_HOSTS"), "${TRAINYARD_TASK_DIR}/mpi_rank_hosts");
  std::string expected = absl::StrCat(Task(in, "worker", 0).address, " ", Task(in, "worker", 0).ports.at(0), "\n",
                                      Task(in, "worker", 1).address, " ", Task(in, "worker", 1).ports.at(0), "\n");
  EXPECT_EQ(env.files.at("mpi_rank_hosts"), expected);
}

TEST(TaskEnvTest, TfConfigClusterLeavesOutTheEvaluator) {
  v1::JobSpec spec;
  spec.set_framework(v1::FRAMEWORK_TENSORFLOW);
  AddRole(&spec, "chief", 1);
  AddRole(&spec, "worker", 2);
  AddRole(&spec, "ps", 1);
  AddRole(&spec, "evaluator", 1);
  TaskEnvInput in = Placed(spec, 1);
  for (const auto& self : in.tasks) {
    nlohmann::json tf = nlohmann::json::parse(BuildTaskEnv(in, self).env.at("TF_CONFIG"));
    EXPECT_FALSE(tf["cluster"].contains("evaluator")) << self.role << ": " << tf.dump();
    EXPECT_EQ(tf["cluster"]["chief"], nlohmann::json::array({"10.0.0.1:2000"}));
    EXPECT_EQ(tf["cluster"]["worker"], nlohmann::json::array({"10.0.0.1:2001", "10.0.0.1:2002"}));
    EXPECT_EQ(tf["cluster"]["ps"], nlohmann::json::array({"10.0.0.1:2003"}));
    EXPECT_EQ(tf["task"]["type"], self.role);
    EXPECT_EQ(tf["task"]["index"], self.index);
  }
}

TEST(TaskEnvTest, TasksOfAJobWithoutAMasterGetNoMasterAddress) {
  v1::JobSpec spec;
  spec.set_framework(v1::FRAMEWORK_MPI);
  AddRole(&spec, "worker", 1);
  TaskEnvInput in = Placed(spec, 1);
  TaskEnv env = BuildTaskEnv(in, in.tasks[0]);
  EXPECT_EQ(env.env.count("TRAINYARD_JOB_MASTER"), 0u);
  EXPECT_EQ(env.files.count("jobmaster"), 0u);
  EXPECT_THAT(env.files.at("hosts"), Not(HasSubstr("jobmaster")));
}

// The launch contract's names are one list (common/task_env_names.h) that
// the worker library and the agent read by the same constants: every
// TRAINYARD_* variable the server builds, and every ${TRAINYARD_*} its
// values refer to, is in it. A name built here and missing there is a name
// the other side cannot read without a string of its own.
TEST(TaskEnvTest, EveryTrainyardNameATaskGetsIsInTheOneList) {
  const std::set<std::string> names(std::begin(kTaskEnvNames), std::end(kTaskEnvNames));
  EXPECT_EQ(names.size(), std::size(kTaskEnvNames)) << "a name is listed twice";
  for (const std::string& name : names) EXPECT_EQ(name.rfind("TRAINYARD_", 0), 0u) << name;
  int checked = 0;
  for (v1::Framework fw : {v1::FRAMEWORK_TENSORFLOW, v1::FRAMEWORK_PYTORCH, v1::FRAMEWORK_MPI}) {
    SCOPED_TRACE(v1::Framework_Name(fw));
    v1::JobSpec spec;
    spec.set_framework(fw);
    spec.set_user("alice");
    AddRole(&spec, "launcher", 1);
    AddRole(&spec, "worker", 2);
    AddRole(&spec, "board", 1);
    spec.mutable_replicas(2)->set_kind(v1::ROLE_KIND_SERVICE);
    TaskEnvInput in = Placed(spec, 2);
    // Every feature that adds a variable: a job master, checkpoints, an
    // array element, an elastic size, a resumed step, a share of a GPU.
    in.job_master = "10.0.0.1:9000";
    in.checkpoint_dir = "/ckpt/j";
    in.attempt = 2;
    in.array_job = "sweep";
    in.array_index = 3;
    in.membership_epoch = 4;
    in.num_workers = 2;
    in.resume_step = 100;
    in.tasks[1].gpu_mask = 0b1;
    in.tasks[1].gpu_milli = 500;
    in.tasks[1].gpu_memory_mb = 4096;
    for (const PlacedTaskView& t : in.tasks) {
      TaskEnv env = BuildTaskEnv(in, t);
      for (const auto& [name, value] : env.env) {
        if (name.rfind("TRAINYARD_", 0) == 0) {
          EXPECT_TRUE(names.count(name)) << name << " is not in common/task_env_names.h";
          ++checked;
        }
        for (size_t at = value.find("${TRAINYARD_"); at != std::string::npos; at = value.find("${TRAINYARD_", at + 1)) {
          std::string ref = value.substr(at + 2, value.find('}', at) - at - 2);
          EXPECT_TRUE(names.count(ref)) << name << "=" << value << " refers to " << ref;
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(TaskEnvTest, TheJobsUserIsInTheEnvironment) {
  v1::JobSpec spec;
  spec.set_user("alice");
  AddRole(&spec, "worker", 1);
  TaskEnvInput in = Placed(spec, 1);
  EXPECT_EQ(BuildTaskEnv(in, in.tasks[0]).env.at("TRAINYARD_USER"), "alice");
}

}  // namespace
}  // namespace trainyard::api

namespace trainyard::api {
namespace {

TEST(TaskEnvShareTest, AShareOfOneGpuSaysHowMuchAndWhichGpu) {
  v1::JobSpec spec;
  v1::ReplicaSpec* r = spec.add_replicas();
  r->set_role("worker");
  r->set_count(1);
  TaskEnvInput in;
  in.spec = &spec;
  in.job = "j";
  PlacedTaskView t{.role = "worker", .node = "n", .address = "10.0.0.1", .gpu_mask = 0b100,
                   .gpu_milli = 250, .gpu_memory_mb = 8192};
  in.tasks.push_back(t);
  TaskEnv env = BuildTaskEnv(in, t);
  EXPECT_EQ(env.env["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(env.env["TRAINYARD_GPU_SHARE"], "250");
  EXPECT_EQ(env.env["TRAINYARD_GPU_MEMORY_MB"], "8192");
  // A whole-GPU task has neither, even when its spec's env wrote them.
  std::map<std::string, std::string> whole = {{"TRAINYARD_GPU_SHARE", "999"}};
  SetTaskSelfEnv({.job = "j", .role = "worker", .gpus = {0, 1}}, &whole);
  EXPECT_EQ(whole.count("TRAINYARD_GPU_SHARE"), 0u);
  EXPECT_EQ(whole.count("TRAINYARD_GPU_MEMORY_MB"), 0u);
  EXPECT_EQ(whole["CUDA_VISIBLE_DEVICES"], "0,1");
}

}  // namespace
}  // namespace trainyard::api
