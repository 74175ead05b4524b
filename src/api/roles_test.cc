// Tests of the role table (roles.h): what each role means per framework and
// how the end of a task decides its job's verdict.
#include "api/roles.h"

#include <map>

#include "api/convert.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(RolesTest, OneTableDecidesWhatARoleMeans) {
  EXPECT_TRUE(IsWorkerRole(v1::FRAMEWORK_NONE, "worker"));
  EXPECT_TRUE(IsWorkerRole(v1::FRAMEWORK_TENSORFLOW, "chief"));
  EXPECT_FALSE(IsWorkerRole(v1::FRAMEWORK_TENSORFLOW, "ps"));
  EXPECT_FALSE(IsWorkerRole(v1::FRAMEWORK_NONE, "jobmaster"));
  EXPECT_TRUE(TraitsOf(v1::FRAMEWORK_TENSORFLOW, "ps").default_port);
  EXPECT_TRUE(TraitsOf(v1::FRAMEWORK_TENSORFLOW, "ps").in_tf_cluster);
  EXPECT_FALSE(TraitsOf(v1::FRAMEWORK_TENSORFLOW, "jobmaster").in_tf_cluster);
  EXPECT_FALSE(TraitsOf(v1::FRAMEWORK_TENSORFLOW, "evaluator").in_tf_cluster);
  EXPECT_TRUE(TraitsOf(v1::FRAMEWORK_PYTORCH, "master").torch_rank0);
  EXPECT_FALSE(TraitsOf(v1::FRAMEWORK_PYTORCH, "ps").default_port);
  // An MPI worker's port is its rank host's (`trainyard rsh --serve`).
  EXPECT_TRUE(TraitsOf(v1::FRAMEWORK_MPI, "worker").default_port);
  EXPECT_FALSE(TraitsOf(v1::FRAMEWORK_MPI, "launcher").default_port);
  EXPECT_TRUE(TraitsOf(v1::FRAMEWORK_TENSORFLOW, "chief").decides_success);
  EXPECT_FALSE(TraitsOf(v1::FRAMEWORK_TENSORFLOW, "worker").decides_success);
}

TEST(RolesTest, TheMpiLauncherIsNeitherARankNorAWorkerButDecidesTheJob) {
  RoleTraits launcher = TraitsOf(v1::FRAMEWORK_MPI, "launcher");
  EXPECT_FALSE(launcher.worker);
  EXPECT_FALSE(launcher.mpi_host);
  EXPECT_TRUE(launcher.decides_job);
  EXPECT_TRUE(TraitsOf(v1::FRAMEWORK_MPI, "worker").mpi_host);
  EXPECT_FALSE(TraitsOf(v1::FRAMEWORK_MPI, "worker").decides_job);
  // Outside MPI a role named "launcher" is an ordinary worker.
  EXPECT_TRUE(IsWorkerRole(v1::FRAMEWORK_NONE, "launcher"));
  EXPECT_FALSE(TraitsOf(v1::FRAMEWORK_NONE, "launcher").decides_job);
}

v1::JobSpec RolesSpec(v1::Framework fw, std::vector<std::pair<std::string, int>> roles) {
  v1::JobSpec spec;
  spec.set_framework(fw);
  for (auto& [role, count] : roles) {
    auto* r = spec.add_replicas();
    r->set_role(role);
    r->set_count(count);
  }
  return spec;
}

TEST(RolesTest, WorkerCountLeavesOutPsJobMasterAndMpiLauncher) {
  EXPECT_EQ(WorkerCount(RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"worker", 4}, {"ps", 2}})), 4);
  EXPECT_EQ(WorkerCount(RolesSpec(v1::FRAMEWORK_MPI, {{"launcher", 1}, {"worker", 3}})), 3);
  EXPECT_EQ(WorkerCount(RolesSpec(v1::FRAMEWORK_NONE, {{"jobmaster", 1}, {"worker", 2}})), 2);
}

TEST(RolesTest, OnlyJobsWhoseTasksTalkToAMasterUseOne) {
  EXPECT_TRUE(UsesJobMaster(RolesSpec(v1::FRAMEWORK_NONE, {{"worker", 2}})));
  EXPECT_TRUE(UsesJobMaster(RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"ps", 1}, {"worker", 2}})));
  EXPECT_FALSE(UsesJobMaster(RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"ps", 1}, {"evaluator", 1}})));
  EXPECT_FALSE(UsesJobMaster(RolesSpec(v1::FRAMEWORK_PYTORCH, {{"master", 1}, {"worker", 3}})));
  EXPECT_FALSE(UsesJobMaster(RolesSpec(v1::FRAMEWORK_MPI, {{"launcher", 1}, {"worker", 3}})));
  EXPECT_FALSE(UsesJobMaster(RolesSpec(v1::FRAMEWORK_NONE, {{"ps", 1}})));
}

// The job's tasks, all RUNNING but those given.
TaskRecords Tasks(const v1::JobSpec& spec, std::map<std::string, v1::TaskState> states) {
  TaskRecords out;
  for (const auto& rs : spec.replicas()) {
    for (int i = 0; i < rs.count(); ++i) {
      v1::TaskRecord* t = out.Add();
      t->set_role(rs.role());
      t->set_index(i);
      auto it = states.find(rs.role() + "/" + std::to_string(i));
      t->set_state(it == states.end() ? v1::TASK_RUNNING : it->second);
    }
  }
  return out;
}

const v1::TaskRecord& Find(const TaskRecords& tasks, const std::string& role, int index) {
  for (const auto& t : tasks) {
    if (t.role() == role && t.index() == index) return t;
  }
  ADD_FAILURE() << "no task " << role << "/" << index;
  return tasks[0];
}

TEST(RolesTest, AnMpiJobSucceedsWhenItsLauncherDoesWhileWorkersStillRun) {
  v1::JobSpec spec = RolesSpec(v1::FRAMEWORK_MPI, {{"launcher", 1}, {"worker", 2}});
  TaskRecords tasks = Tasks(spec, {{"launcher/0", v1::TASK_SUCCEEDED}});
  std::optional<std::string> v = SuccessAfter(spec, tasks, Find(tasks, "launcher", 0));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, "the launcher completed");
}

TEST(RolesTest, MpiWorkersEndingDoesNotEndTheJobBeforeTheLauncher) {
  v1::JobSpec spec = RolesSpec(v1::FRAMEWORK_MPI, {{"launcher", 1}, {"worker", 2}});
  TaskRecords tasks = Tasks(spec, {{"worker/0", v1::TASK_SUCCEEDED}, {"worker/1", v1::TASK_SUCCEEDED}});
  EXPECT_FALSE(SuccessAfter(spec, tasks, Find(tasks, "worker", 1)).has_value());
}

TEST(RolesTest, AnMpiJobWithoutALauncherSucceedsWhenAllWorkersDo) {
  v1::JobSpec spec = RolesSpec(v1::FRAMEWORK_MPI, {{"worker", 2}});
  TaskRecords tasks = Tasks(spec, {{"worker/0", v1::TASK_SUCCEEDED}});
  EXPECT_FALSE(SuccessAfter(spec, tasks, Find(tasks, "worker", 0)).has_value());
  tasks[1].set_state(v1::TASK_SUCCEEDED);
  EXPECT_EQ(SuccessAfter(spec, tasks, Find(tasks, "worker", 1)).value_or(""), "all workers completed");
}

TEST(RolesTest, AllWorkersIgnoresParameterServersAndTheJobMaster) {
  v1::JobSpec spec = RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"jobmaster", 1}, {"ps", 1}, {"worker", 2}});
  TaskRecords tasks = Tasks(spec, {{"worker/0", v1::TASK_SUCCEEDED}, {"worker/1", v1::TASK_SUCCEEDED}});
  EXPECT_EQ(SuccessAfter(spec, tasks, Find(tasks, "worker", 1)).value_or(""), "all workers completed");
}

TEST(RolesTest, TheChiefPolicyEndsTheJobWithChiefZero) {
  v1::JobSpec spec = RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"chief", 1}, {"worker", 2}});
  spec.set_success_policy(v1::SUCCESS_CHIEF);
  TaskRecords tasks = Tasks(spec, {{"worker/0", v1::TASK_SUCCEEDED}});
  EXPECT_FALSE(SuccessAfter(spec, tasks, Find(tasks, "worker", 0)).has_value());
  tasks[0].set_state(v1::TASK_SUCCEEDED);
  EXPECT_EQ(SuccessAfter(spec, tasks, Find(tasks, "chief", 0)).value_or(""), "the chief completed");
}

// A spec whose role `service` is of kind: service.
v1::JobSpec WithService(v1::JobSpec spec, const std::string& service) {
  v1::ReplicaSpec* rs = spec.add_replicas();
  rs->set_role(service);
  rs->set_count(1);
  rs->set_kind(v1::ROLE_KIND_SERVICE);
  return spec;
}

TEST(RolesTest, AServiceIsNoneOfItsFrameworksRolesButGetsAPort) {
  for (v1::Framework fw : {v1::FRAMEWORK_NONE, v1::FRAMEWORK_TENSORFLOW, v1::FRAMEWORK_PYTORCH, v1::FRAMEWORK_MPI}) {
    v1::JobSpec spec = WithService(RolesSpec(fw, {{"worker", 2}}), "board");
    RoleTraits t = TraitsOf(spec, "board");
    EXPECT_TRUE(t.service);
    EXPECT_TRUE(t.default_port);
    EXPECT_FALSE(t.worker || t.decides_success || t.decides_job || t.in_tf_cluster || t.torch_rank ||
                 t.torch_rank0 || t.mpi_host || t.uses_job_master || t.job_master);
    // By its name alone the same role would be a worker.
    EXPECT_TRUE(TraitsOf(fw, "board").worker || fw == v1::FRAMEWORK_MPI);
    EXPECT_EQ(WorkerCount(spec), 2);
    EXPECT_FALSE(TraitsOf(spec, "worker").service);
  }
  EXPECT_FALSE(UsesJobMaster(WithService(RolesSpec(v1::FRAMEWORK_NONE, {{"ps", 1}}), "board")));
  EXPECT_TRUE(IsFrameworkRoleName("worker"));
  EXPECT_TRUE(IsFrameworkRoleName("jobmaster"));
  EXPECT_FALSE(IsFrameworkRoleName("tensorboard"));
}

TEST(RolesTest, AJobSucceedsWhenItsWorkersDoWhileItsServiceRuns) {
  v1::JobSpec spec = WithService(RolesSpec(v1::FRAMEWORK_NONE, {{"worker", 2}}), "board");
  TaskRecords tasks = Tasks(spec, {{"worker/0", v1::TASK_SUCCEEDED}});
  EXPECT_FALSE(SuccessAfter(spec, tasks, Find(tasks, "worker", 0)).has_value());
  tasks[1].set_state(v1::TASK_SUCCEEDED);
  EXPECT_EQ(SuccessAfter(spec, tasks, Find(tasks, "worker", 1)).value_or(""), "all workers completed");
}

TEST(RolesTest, AJobOfServicesAloneSucceedsWhenEveryServiceHasEnded) {
  v1::JobSpec spec = WithService(WithService(v1::JobSpec(), "board"), "notebook");
  TaskRecords tasks = Tasks(spec, {{"board/0", v1::TASK_SUCCEEDED}});
  EXPECT_FALSE(SuccessAfter(spec, tasks, Find(tasks, "board", 0)).has_value());
  tasks[1].set_state(v1::TASK_SUCCEEDED);
  EXPECT_EQ(SuccessAfter(spec, tasks, Find(tasks, "notebook", 0)).value_or(""), "all tasks completed");
}

TEST(RolesTest, JobTaskCountLeavesOutTheJobMaster) {
  v1::JobSpec spec = RolesSpec(v1::FRAMEWORK_NONE, {{"jobmaster", 1}, {"worker", 2}});
  EXPECT_EQ(JobTaskCount(Tasks(spec, {})), 2);
}

TEST(RolesTest, TheTensorflowEvaluatorIsNotAWorker) {
  RoleTraits evaluator = TraitsOf(v1::FRAMEWORK_TENSORFLOW, "evaluator");
  EXPECT_FALSE(evaluator.worker);
  EXPECT_FALSE(evaluator.uses_job_master);
  EXPECT_FALSE(evaluator.in_tf_cluster);
  EXPECT_TRUE(evaluator.default_port);
  EXPECT_EQ(WorkerCount(RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"chief", 1}, {"worker", 2}, {"evaluator", 1}})), 3);
  v1::JobSpec spec = RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"worker", 2}, {"evaluator", 1}});
  TaskRecords tasks = Tasks(spec, {{"worker/0", v1::TASK_SUCCEEDED}, {"worker/1", v1::TASK_SUCCEEDED}});
  EXPECT_EQ(SuccessAfter(spec, tasks, Find(tasks, "worker", 1)).value_or(""), "all workers completed")
      << "the training does not wait for its evaluator";
}

// A job with a master (the server's task, or one in the client) can be
// asked to checkpoint, so the scheduler's victim order prefers it.
TEST(RolesTest, AJobWithAJobMasterIsACheckpointingJobToTheScheduler) {
  v1::JobRecord rec;
  rec.set_name("j");
  v1::ReplicaSpec* worker = rec.mutable_spec()->add_replicas();
  worker->set_role("worker");
  worker->set_count(2);
  EXPECT_FALSE(HasJobMaster(rec.spec()));
  EXPECT_FALSE(ToJobRequest(rec)->checkpoints);
  rec.mutable_spec()->set_job_master_address("10.0.0.9:4000");  // a master in the client
  EXPECT_TRUE(ToJobRequest(rec)->checkpoints);
  rec.mutable_spec()->clear_job_master_address();
  v1::ReplicaSpec* master = rec.mutable_spec()->add_replicas();
  master->set_role(std::string(kRoleJobMaster));
  master->set_count(1);
  EXPECT_TRUE(HasJobMaster(rec.spec()));
  EXPECT_TRUE(ToJobRequest(rec)->checkpoints);
}

TEST(RolesTest, TheSpecsJobmasterFieldOverridesTheFrameworksRule) {
  auto with = [](v1::JobSpec spec, bool jobmaster) {
    spec.set_jobmaster(jobmaster);
    return spec;
  };
  // A pytorch job asks for one so its ranks can be ordered to checkpoint;
  // its master counts every rank as a worker.
  v1::JobSpec torch = with(RolesSpec(v1::FRAMEWORK_PYTORCH, {{"master", 1}, {"worker", 3}}), true);
  EXPECT_TRUE(UsesJobMaster(torch));
  EXPECT_EQ(WorkerCount(torch), 4);
  EXPECT_FALSE(UsesJobMaster(with(RolesSpec(v1::FRAMEWORK_NONE, {{"worker", 2}}), false)));
  EXPECT_FALSE(UsesJobMaster(with(RolesSpec(v1::FRAMEWORK_TENSORFLOW, {{"ps", 1}, {"worker", 2}}), false)));
  // Nothing talks to it: ps alone, a service alone.
  EXPECT_FALSE(UsesJobMaster(with(RolesSpec(v1::FRAMEWORK_NONE, {{"ps", 1}}), true)));
  EXPECT_FALSE(UsesJobMaster(with(WithService(v1::JobSpec(), "board"), true)));
}

}  // namespace
}  // namespace trainyard::api
