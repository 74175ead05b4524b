// api/accounting (see accounting.h): usage charged, accounts built from job
// records, and usage summed per user or queue.
#include "api/accounting.h"

#include <algorithm>
#include <bit>
#include <cstdint>
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

// a + b, held at the int64 range instead of wrapping.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? INT64_MAX : INT64_MIN;
  return out;
}

// a * b for non-negative a and b, held at INT64_MAX.
int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return INT64_MAX;
  return out;
}

// What the job's tasks did: counts, classes of their ended attempts, and
// the worst end of their last attempts.
void AddTasks(const v1::JobRecord& rec, v1::JobAccount* a) {
  // A positive exit code first, then a signal (a signalled end reports
  // code -1), then an end without either (-1: lost, unknown).
  auto rank = [](const v1::TaskExit& e) { return std::make_pair(std::max(e.exit_code(), 0), e.signal()); };
  std::map<v1::AttemptClass, int32_t> classes;
  bool settled = true;
  int32_t tasks = 0, attempts = 0, restarts = 0;
  const v1::TaskRecord* worst = nullptr;
  for (const v1::TaskRecord& t : rec.tasks()) {
    if (t.held_since_ms() != 0 || HoldsPlace(t.state())) settled = false;
    if (IsJobMasterRole(t.role())) continue;
    ++tasks;
    attempts += t.attempts_size();
    restarts += t.restart_count();
    for (const v1::AttemptEnd& e : t.attempts()) ++classes[e.attempt_class()];
    const v1::TaskExit& x = t.exit();
    if (x.exit_code() == 0 && x.signal() == 0) continue;
    if (!worst || rank(x) > rank(worst->exit())) worst = &t;
  }
  a->set_tasks(tasks);
  a->set_attempts(attempts);
  a->set_restarts(restarts);
  a->set_settled(settled);
  for (const auto& [c, n] : classes) {
    v1::AttemptClassCount* cc = a->add_attempt_classes();
    cc->set_attempt_class(c);
    cc->set_count(n);
  }
  if (worst) {
    a->set_exit_code(worst->exit().exit_code());
    a->set_exit_signal(worst->exit().signal());
    a->set_exit_task(TaskName(a->name(), worst->role(), worst->index()));
  }
}

v1::UsageRow Finish(Sum s) {
  if (s.waited > 0) s.row.set_mean_wait_s(s.wait_s / static_cast<double>(s.waited));
  return std::move(s.row);
}
}  // namespace

std::string EndedName(const std::string& record_name) { return record_name.substr(0, record_name.find('#')); }

int64_t GpuMilliOf(const v1::Resource& r) {
  if (r.gpu_milli() > 0) return r.gpu_milli();
  int64_t whole = r.gpus() > 0 ? r.gpus() : std::popcount(r.gpu_mask());
  return whole * 1000;
}

void AddUsage(const v1::Resource& allocation, int64_t held_ms, v1::JobUsage* usage) {
  if (held_ms <= 0) return;
  auto add = [held_ms](int64_t sum, int64_t amount) {
    return SaturatingAdd(sum, SaturatingMul(std::max<int64_t>(0, amount), held_ms));
  };
  usage->set_gpu_milli_ms(add(usage->gpu_milli_ms(), GpuMilliOf(allocation)));
  usage->set_cpu_milli_ms(add(usage->cpu_milli_ms(), allocation.vcores_milli()));
  usage->set_memory_mb_ms(add(usage->memory_mb_ms(), allocation.memory_mb()));
}

v1::JobAccount AccountOf(const v1::JobRecord& rec) {
  v1::JobAccount a;
  a.set_id(rec.id());
  a.set_name(EndedName(rec.name()));
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
  AddTasks(rec, &a);
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
