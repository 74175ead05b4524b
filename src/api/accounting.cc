#include "api/accounting.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "api/convert.h"
#include "api/roles.h"
#include "api/states.h"

namespace trainyard::api {
namespace {
constexpr double kMsPerHour = 3600.0 * 1000.0;

// A row being summed: the waits of the jobs that ran, for the mean.
struct Sum {
  v1::UsageRow row;
  double wait_s = 0;
  int64_t waited = 0;
};

void Add(const v1::JobAccount& a, Sum* s) {
  v1::UsageRow& r = s->row;
  r.set_jobs(r.jobs() + 1);
  switch (a.state()) {
    case v1::JOB_SUCCEEDED: r.set_succeeded(r.succeeded() + 1); break;
    case v1::JOB_FAILED: r.set_failed(r.failed() + 1); break;
    case v1::JOB_KILLED: r.set_killed(r.killed() + 1); break;
    case v1::JOB_DEADLINE_EXCEEDED: r.set_deadline_exceeded(r.deadline_exceeded() + 1); break;
    default: break;
  }
  r.set_gpu_hours(r.gpu_hours() + a.gpu_hours());
  r.set_cpu_hours(r.cpu_hours() + a.cpu_hours());
  r.set_memory_gb_hours(r.memory_gb_hours() + a.memory_gb_hours());
  r.set_elapsed_hours(r.elapsed_hours() + static_cast<double>(a.elapsed_ms()) / kMsPerHour);
  if (a.start_time_unix_ms() > 0) {
    s->wait_s += static_cast<double>(a.wait_ms()) / 1000.0;
    ++s->waited;
  }
}

v1::UsageRow Finish(Sum s) {
  if (s.waited > 0) s.row.set_mean_wait_s(s.wait_s / static_cast<double>(s.waited));
  return std::move(s.row);
}
}  // namespace

int64_t GpuMilliOf(const v1::Resource& r) {
  if (r.gpu_milli() > 0) return r.gpu_milli();
  int64_t whole = r.gpus() > 0 ? r.gpus() : __builtin_popcountll(r.gpu_mask());
  return whole * 1000;
}

void AddUsage(const v1::Resource& allocation, int64_t held_ms, v1::JobUsage* usage) {
  if (held_ms <= 0) return;
  usage->set_gpu_milli_ms(usage->gpu_milli_ms() + GpuMilliOf(allocation) * held_ms);
  usage->set_cpu_milli_ms(usage->cpu_milli_ms() + allocation.vcores_milli() * held_ms);
  usage->set_memory_mb_ms(usage->memory_mb_ms() + allocation.memory_mb() * held_ms);
}

v1::JobAccount AccountOf(const v1::JobRecord& rec) {
  v1::JobAccount a;
  a.set_id(rec.id());
  a.set_name(rec.name().substr(0, rec.name().find('#')));
  a.set_deleted(rec.deleted_time_ms() != 0);
  a.set_user(rec.spec().user());
  a.set_queue(rec.spec().queue());
  a.set_priority(rec.spec().priority());
  a.set_state(rec.state());
  a.set_message(rec.message());
  a.set_submit_time_unix_ms(rec.submit_time_ms());
  a.set_start_time_unix_ms(rec.start_time_ms());
  a.set_end_time_unix_ms(rec.end_time_ms());
  if (rec.start_time_ms() > 0) {
    a.set_wait_ms(std::max<int64_t>(0, rec.start_time_ms() - rec.submit_time_ms()));
    a.set_elapsed_ms(std::max<int64_t>(0, rec.end_time_ms() - rec.start_time_ms()));
  } else if (rec.end_time_ms() > 0) {
    a.set_wait_ms(std::max<int64_t>(0, rec.end_time_ms() - rec.submit_time_ms()));
  }
  int64_t gpus_milli = 0;
  for (const v1::ReplicaSpec& rs : rec.spec().replicas()) {
    if (!IsJobMasterRole(rs.role())) gpus_milli += int64_t{rs.count()} * GpuMilliOf(rs.resources());
  }
  a.set_gpus(static_cast<double>(gpus_milli) / 1000.0);
  const v1::JobUsage& u = rec.usage();
  a.set_gpu_hours(static_cast<double>(u.gpu_milli_ms()) / 1000.0 / kMsPerHour);
  a.set_cpu_hours(static_cast<double>(u.cpu_milli_ms()) / 1000.0 / kMsPerHour);
  a.set_memory_gb_hours(static_cast<double>(u.memory_mb_ms()) / 1024.0 / kMsPerHour);
  a.set_array_job(rec.array_job());
  a.set_array_index(rec.array_index());
  std::map<v1::AttemptClass, int32_t> classes;
  bool settled = true;
  int32_t tasks = 0, attempts = 0, restarts = 0;
  const v1::TaskRecord* worst = nullptr;
  for (const v1::TaskRecord& t : rec.tasks()) {
    if (t.held_since_ms() != 0 || HoldsPlace(t.state())) settled = false;
    if (IsJobMasterRole(t.role())) continue;
    ++tasks;
    bool started = t.launches_size() > 0 || t.attempts_size() > 0 || t.start_time_ms() > 0;
    if (started) attempts += t.attempt() + 1;
    restarts += t.restart_count();
    for (const v1::AttemptEnd& e : t.attempts()) ++classes[e.attempt_class()];
    const v1::TaskExit& x = t.exit();
    if (x.exit_code() == 0 && x.signal() == 0) continue;
    if (!worst || std::make_pair(x.exit_code(), x.signal()) >
                      std::make_pair(worst->exit().exit_code(), worst->exit().signal())) {
      worst = &t;
    }
  }
  a.set_tasks(tasks);
  a.set_attempts(attempts);
  a.set_restarts(restarts);
  a.set_settled(settled);
  for (const auto& [c, n] : classes) {
    v1::AttemptClassCount* cc = a.add_attempt_classes();
    cc->set_attempt_class(c);
    cc->set_count(n);
  }
  if (worst) {
    a.set_exit_code(worst->exit().exit_code());
    a.set_exit_signal(worst->exit().signal());
    a.set_exit_task(TaskName(a.name(), worst->role(), worst->index()));
  }
  return a;
}

v1::UsageResponse SumUsage(const std::vector<const v1::JobAccount*>& accounts, bool by_queue) {
  std::map<std::string, Sum> rows;
  Sum total;
  for (const v1::JobAccount* a : accounts) {
    Sum& s = rows[by_queue ? a->queue() : a->user()];
    Add(*a, &s);
    Add(*a, &total);
  }
  v1::UsageResponse out;
  for (auto& [key, s] : rows) {
    s.row.set_key(key);
    *out.add_rows() = Finish(std::move(s));
  }
  std::stable_sort(out.mutable_rows()->begin(), out.mutable_rows()->end(),
                   [](const v1::UsageRow& a, const v1::UsageRow& b) { return a.gpu_hours() > b.gpu_hours(); });
  *out.mutable_total() = Finish(std::move(total));
  return out;
}

}  // namespace trainyard::api
