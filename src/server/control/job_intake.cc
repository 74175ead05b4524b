// What a submission becomes before its record is written (job_intake.h).
#include "server/control/job_intake.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "api/roles.h"

namespace trainyard::server {

void AddJobMasterRole(v1::JobSpec* spec, const std::string& name, const JobMasterSettings& settings) {
  v1::ReplicaSpec* jm = spec->add_replicas();
  jm->set_role(std::string(api::kRoleJobMaster));
  jm->set_count(1);
  jm->mutable_resources()->set_vcores_milli(settings.vcores_milli);
  jm->mutable_resources()->set_memory_mb(settings.memory_mb);
  jm->mutable_resources()->set_port_count(1);
  jm->set_restart_policy(v1::RESTART_ON_FAILURE);
  jm->set_max_restarts(10);
  jm->add_command("sh");
  jm->add_command("-c");
  jm->add_command(absl::StrCat("exec \"", settings.binary, "\" jobmaster --job ", name,
                               // An elastic job's master expects the workers of its size.
                               " --workers ",
                               api::IsElastic(*spec) ? std::string("\"${TRAINYARD_NUM_WORKERS}\"")
                                                     : absl::StrCat(api::WorkerCount(*spec)),
                               " --port \"${TRAINYARD_PORTS%%,*}\"",
                               // Only the node's own address, not every interface of it.
                               " --bind \"${TRAINYARD_NODE_ADDRESS:-0.0.0.0}\"",
                               // A restarted master reads how many barriers the job passed.
                               " --attempt \"${TRAINYARD_RESTART_COUNT:-0}\"",
                               " --barrier-record \"$TRAINYARD_CHECKPOINT_DIR/.jobmaster-barriers\"",
                               // Quoted: an IPv6 list's brackets are glob characters.
                               " --server '",
                               settings.server, "'"));
  // The master comes first, as the job's first task.
  std::rotate(spec->mutable_replicas()->rbegin(), spec->mutable_replicas()->rbegin() + 1,
              spec->mutable_replicas()->rend());
}

void AddTaskRecords(const v1::JobSpec& spec, v1::JobRecord* rec) {
  int worker_id = 0;
  for (const auto& rs : spec.replicas()) {
    for (int i = 0; i < rs.count(); ++i) {
      v1::TaskRecord* t = rec->add_tasks();
      t->set_role(rs.role());
      t->set_index(i);
      t->set_worker_id(api::TraitsOf(spec.framework(), rs).worker ? worker_id++ : -1);
      t->set_state(v1::TASK_PENDING);
    }
  }
  int ps_id = worker_id;
  for (auto& t : *rec->mutable_tasks()) {
    if (t.worker_id() < 0 && !api::IsJobMasterRole(t.role())) t.set_worker_id(ps_id++);
  }
}

v1::JobEventRecord SubmittedEvent(const v1::JobRecord& rec, const std::string& defaulted) {
  const v1::JobSpec& kept = rec.spec();
  v1::JobEventRecord ev;
  ev.set_job_id(rec.id());
  ev.set_time_ms(rec.submit_time_ms());
  ev.set_kind("submitted");
  int n = api::JobTaskCount(rec.tasks());
  ev.set_text(absl::StrCat("submitted by ", kept.user(), " to queue ", kept.queue(), " (", n, n == 1 ? " task" : " tasks",
                           ", priority ", api::PriorityName(kept.priority()), ")", defaulted));
  return ev;
}

}  // namespace trainyard::server
