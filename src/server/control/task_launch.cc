// What a task is launched with, as its placement gives it (task_launch.h).
#include "server/control/task_launch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "api/restart_budgets.h"
#include "api/roles.h"
#include "common/task_env_names.h"
#include "server/control/elastic_roles.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

std::string JobMasterAddress(const JobRt& job, const NodeTable& nodes) {
  std::string address = job.rec.spec().job_master_address();  // a master in the client
  int jm = FindTask(job, std::string(api::kRoleJobMaster), 0);
  if (jm >= 0) {
    const v1::TaskRecord& t = job.rec.tasks(jm);
    const NodeRt* n = nodes.Find(t.node());
    if (n && t.allocation().ports_size() > 0) {
      address = absl::StrCat(n->info.address(), ":", t.allocation().ports(0).begin());
    }
  }
  return address;
}

EnvContext EnvContextFor(const JobRt& job, const NodeTable& nodes, const std::string& checkpoint_root) {
  EnvContext ctx;
  api::TaskEnvInput& in = ctx.in;
  in.spec = &job.rec.spec();
  in.job = job.rec.name();
  in.job_master = job.job_master;
  in.checkpoint_dir = api::JobCheckpointDir(checkpoint_root, job.rec.name(), job.rec.id());
  in.array_job = job.rec.array_job();
  in.array_index = job.rec.array_index();
  in.resume_step = job.rec.has_resume_step() ? job.rec.resume_step() : -1;
  if (api::IsElastic(job.rec.spec())) {
    in.membership_epoch = job.rec.membership_epoch();
    in.num_workers = PlacedWorkers(job.rec);
  }
  ctx.view_of.assign(job.rec.tasks_size(), -1);
  in.tasks.reserve(job.rec.tasks_size());
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    const v1::TaskRecord& o = job.rec.tasks(i);
    if (o.node().empty()) continue;
    api::PlacedTaskView v;
    v.role = o.role();
    v.index = o.index();
    v.worker_id = o.worker_id();
    v.node = o.node();
    const NodeRt* on = nodes.Find(o.node());
    v.address = on ? on->info.address() : o.node();
    v.gpu_mask = o.allocation().gpu_mask();
    v.gpu_milli = o.allocation().gpu_milli();
    v.gpu_memory_mb = o.allocation().gpu_memory_mb();
    for (const auto& r : o.allocation().ports()) {
      for (uint32_t port = r.begin(); port <= r.end(); ++port) v.ports.push_back(port);
    }
    ctx.view_of[i] = static_cast<int>(in.tasks.size());
    in.tasks.push_back(std::move(v));
  }
  ctx.shared = api::BuildJobWideEnv(in);
  return ctx;
}

api::TaskEnv EnvFor(const JobRt& job, int i, EnvContext& ctx) {
  ctx.in.attempt = job.rec.tasks(i).attempt();
  int at = i < static_cast<int>(ctx.view_of.size()) ? ctx.view_of[i] : -1;
  return api::BuildTaskEnv(ctx.in, ctx.shared, at >= 0 ? ctx.in.tasks[at] : api::PlacedTaskView{});
}

v1::TaskFiles TaskFilesFor(const JobRt& job, int i, EnvContext& ctx) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  v1::TaskFiles f;
  f.set_job(job.rec.name());
  f.set_role(t.role());
  f.set_index(t.index());
  f.set_job_id(job.rec.id());
  for (auto& [k, v] : EnvFor(job, i, ctx).files) (*f.mutable_files())[k] = std::move(v);
  return f;
}

v1::TaskSpec TaskSpecFor(const JobRt& job, int i, const v1::ReplicaSpec& rs, api::TaskEnv env,
                         const LaunchSettings& settings) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  v1::TaskSpec spec;
  spec.set_job(job.rec.name());
  spec.set_job_id(job.rec.id());
  spec.set_role(t.role());
  spec.set_index(t.index());
  spec.set_worker_id(t.worker_id());
  spec.set_node(t.node());
  *spec.mutable_allocation() = t.allocation();
  for (const auto& c : rs.command()) spec.add_command(c);
  for (const auto& a : rs.args()) spec.add_command(a);
  auto& spec_env = *spec.mutable_env();
  for (const auto& [k, v] : rs.env()) spec_env[k] = v;
  for (const auto& [k, v] : rs.secret_env()) (*spec.mutable_secret_env())[k] = v;  // sealed
  for (auto& [k, v] : env.env) spec_env[k] = std::move(v);
  auto& spec_files = *spec.mutable_files();
  for (auto& [k, v] : env.files) spec_files[k] = std::move(v);
  spec.set_working_dir(rs.working_dir());
  spec.set_image(rs.image());
  *spec.mutable_volumes() = rs.volumes();
  spec.set_restart_policy(rs.restart_policy());
  // What is left of the task's budgets: the agent restarts in place within
  // them and the server counts each restart it reports in its class.
  spec.set_max_restarts(std::max(0, rs.max_restarts() - t.restarts_by_class().failure()));
  spec.set_oom_max_restarts(api::RestartsLeft(rs, t.restarts_by_class(), v1::ATTEMPT_OOM_KILLED));
  spec.set_attempt(t.attempt());
  spec.set_kill_grace_ms(settings.kill_grace_ms);
  if (rs.user_credential()) {
    spec.set_user_credential(true);
    spec_env[kServerEnv] = std::string(settings.server_address);
  }
  return spec;
}

}  // namespace trainyard::server
