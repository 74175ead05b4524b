#include "server/resource_book.h"

#include <algorithm>

namespace trainyard::server {

namespace {

int32_t ClampMilli(int32_t v, bool unknown_allowed) {
  if (v < 0) return unknown_allowed ? -1 : 0;
  return std::min(v, ResourceBook::kMaxMilli);
}

int64_t ClampBytes(int64_t v) { return std::clamp<int64_t>(v, 0, ResourceBook::kMaxBytes); }

}  // namespace

void ResourceBook::Record(const std::string& node, const std::vector<const v1::TaskResources*>& tasks, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now >= next_prune_) {
    PruneLocked(now, options_.keep_for);
    next_prune_ = now + absl::Minutes(1);
  }
  // One stamp for the report, never before the last: a reader that saw
  // stamp T and asks for those since T gets every later one.
  last_stamp_ms_ = std::max(last_stamp_ms_, absl::ToUnixMillis(now));
  for (const v1::TaskResources* t : tasks) RecordLocked(node, *t, last_stamp_ms_);
  if (tasks_ >= options_.max_tasks && now >= next_room_) {
    // Full: tasks sampled no more make room (at most once a second).
    PruneLocked(now, FreshLocked());
    next_room_ = now + absl::Seconds(1);
  }
}

void ResourceBook::RecordLocked(const std::string& node, const v1::TaskResources& task, int64_t stamp_ms) {
  auto job = jobs_.find(task.job_id());
  auto key = std::make_pair(task.role(), task.index());
  TaskSeries* series = nullptr;
  if (job != jobs_.end()) {
    if (auto it = job->second.tasks.find(key); it != job->second.tasks.end()) series = &it->second;
  }
  if (series == nullptr) {
    if (tasks_ >= options_.max_tasks) {
      ++refused_;
      return;
    }
    JobSeries& js = jobs_[task.job_id()];
    js.name = task.job();
    series = &js.tasks[key];
    ++tasks_;
  } else if (task.attempt() < series->attempt) {
    return;  // a report of an attempt that has since been replaced
  }
  series->node = node;
  series->attempt = task.attempt();
  series->memory_limit_bytes = ClampBytes(task.memory_limit_bytes());
  if (series->source != task.source()) series->source = task.source().substr(0, 64);
  Sample s{.time_unix_ms = stamp_ms,
           .memory_bytes = ClampBytes(task.sample().memory_bytes()),
           .gpu_memory_bytes = ClampBytes(task.sample().gpu_memory_bytes()),
           .cpu_milli = ClampMilli(task.sample().cpu_milli(), false),
           .gpu_busy_milli = ClampMilli(task.sample().gpu_busy_milli(), true)};
  // A sample that comes within half an interval of the last (an agent
  // sending faster than asked) takes its place.
  if (!series->samples.empty() &&
      stamp_ms - series->samples.back().time_unix_ms < absl::ToInt64Milliseconds(options_.interval) / 2) {
    series->samples.back() = s;
    return;
  }
  series->samples.push_back(s);
  ++samples_;
  int64_t oldest = stamp_ms - absl::ToInt64Milliseconds(options_.keep_for);
  while (!series->samples.empty() &&
         (series->samples.size() > kMaxSamples || series->samples.front().time_unix_ms < oldest)) {
    series->samples.pop_front();
    --samples_;
  }
}

void ResourceBook::Prune(absl::Time now) {
  absl::MutexLock lock(&mu_);
  PruneLocked(now, options_.keep_for);
}

void ResourceBook::PruneLocked(absl::Time now, absl::Duration older_than) {
  int64_t oldest = absl::ToUnixMillis(now - options_.keep_for);
  int64_t stale = absl::ToUnixMillis(now - older_than);
  for (auto job = jobs_.begin(); job != jobs_.end();) {
    auto& tasks = job->second.tasks;
    for (auto t = tasks.begin(); t != tasks.end();) {
      auto& samples = t->second.samples;
      while (!samples.empty() && samples.front().time_unix_ms < oldest) {
        samples.pop_front();
        --samples_;
      }
      if (samples.empty() || samples.back().time_unix_ms < stale) {
        samples_ -= static_cast<int64_t>(samples.size());
        t = tasks.erase(t);
        --tasks_;
      } else {
        ++t;
      }
    }
    if (tasks.empty()) {
      jobs_.erase(job++);
    } else {
      ++job;
    }
  }
}

std::map<std::pair<std::string, int>, ResourceBook::TaskSeries> ResourceBook::Job(uint64_t job_id, absl::Time since,
                                                                                  bool newest_only) const {
  std::map<std::pair<std::string, int>, TaskSeries> out;
  int64_t from = absl::ToUnixMillis(since);
  absl::MutexLock lock(&mu_);
  auto job = jobs_.find(job_id);
  if (job == jobs_.end()) return out;
  for (const auto& [key, series] : job->second.tasks) {
    TaskSeries& copy = out[key];
    copy.node = series.node;
    copy.attempt = series.attempt;
    copy.memory_limit_bytes = series.memory_limit_bytes;
    copy.source = series.source;
    if (series.samples.empty()) continue;
    auto first = newest_only ? series.samples.end() - 1
                             : std::lower_bound(series.samples.begin(), series.samples.end(), from,
                                                [](const Sample& s, int64_t t) { return s.time_unix_ms < t; });
    if (first == series.samples.end()) --first;  // the newest, always
    copy.samples.assign(first, series.samples.end());
  }
  return out;
}

std::vector<ResourceBook::JobNow> ResourceBook::Now(absl::Time now, absl::Duration fresh) const {
  std::vector<JobNow> out;
  int64_t from = absl::ToUnixMillis(now - fresh);
  absl::MutexLock lock(&mu_);
  out.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) {
    JobNow j{.job_id = id, .job = job.name};
    for (const auto& [key, series] : job.tasks) {
      if (series.samples.empty() || series.samples.back().time_unix_ms < from) continue;
      const Sample& s = series.samples.back();
      ++j.tasks;
      j.cpu_milli += s.cpu_milli;
      j.memory_bytes += s.memory_bytes;
      j.gpu_busy_milli += std::max(s.gpu_busy_milli, 0);
      j.gpu_memory_bytes += s.gpu_memory_bytes;
      if (NearLimit(s.memory_bytes, series.memory_limit_bytes)) ++j.near_memory_limit;
    }
    if (j.tasks > 0) out.push_back(std::move(j));
  }
  return out;
}

ResourceBook::Counts ResourceBook::counts() const {
  absl::MutexLock lock(&mu_);
  return Counts{.tasks = tasks_, .samples = samples_, .refused = refused_};
}

namespace {
void ToProto(const ResourceBook::Sample& s, v1::TaskResourceSample* out) {
  out->set_time_unix_ms(s.time_unix_ms);
  out->set_cpu_milli(s.cpu_milli);
  out->set_memory_bytes(s.memory_bytes);
  out->set_gpu_busy_milli(s.gpu_busy_milli);
  out->set_gpu_memory_bytes(s.gpu_memory_bytes);
}
}  // namespace

v1::JobResourcesResponse BuildJobResources(const v1::JobView& job,
                                           const std::map<std::pair<std::string, int>, ResourceBook::TaskSeries>& series,
                                           int interval_ms, bool newest_only) {
  v1::JobResourcesResponse out;
  out.set_job(job.name());
  out.set_id(job.id());
  out.set_sample_interval_ms(interval_ms);
  const int64_t step = std::max(interval_ms, 1);
  std::vector<const ResourceBook::TaskSeries*> sampled;
  for (const v1::TaskView& t : job.tasks()) {
    v1::TaskResourcesView* v = out.add_tasks();
    v->set_task(t.name());
    v->set_role(t.role());
    v->set_index(t.index());
    v->set_node(t.node());
    v->set_attempt(t.attempt());
    v->set_state(t.state());
    v->set_vcores_milli(t.vcores_milli());
    int gpus = __builtin_popcountll(t.gpu_mask());
    v->set_gpu_milli(t.gpu_milli() > 0 ? t.gpu_milli() : gpus * 1000);
    v->set_memory_limit_bytes(t.memory_mb() << 20);
    auto it = series.find({t.role(), t.index()});
    if (it == series.end()) continue;
    const ResourceBook::TaskSeries& s = it->second;
    if (!s.node.empty()) v->set_node(s.node);
    v->set_attempt(s.attempt);
    v->set_memory_limit_bytes(s.memory_limit_bytes);  // as enforced: 0 where none is
    v->set_source(s.source);
    v->mutable_samples()->Reserve(static_cast<int>(s.samples.size()));
    for (const ResourceBook::Sample& sample : s.samples) ToProto(sample, v->add_samples());
    if (!s.samples.empty()) {
      v->set_near_memory_limit(ResourceBook::NearLimit(s.samples.back().memory_bytes, v->memory_limit_bytes()));
      sampled.push_back(&s);
    }
  }
  // The sums per interval: each task's newest sample at or before the
  // interval's end, if no older than three intervals, so a task whose
  // sample fell in the next interval (agents' clocks drift) still counts.
  std::vector<int64_t> buckets;
  for (const ResourceBook::TaskSeries* s : sampled) {
    for (const ResourceBook::Sample& sample : s->samples) buckets.push_back(sample.time_unix_ms / step);
  }
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  if (newest_only && !buckets.empty()) buckets.erase(buckets.begin(), buckets.end() - 1);
  std::vector<size_t> next(sampled.size(), 0);
  for (int64_t b : buckets) {
    const int64_t end = (b + 1) * step, from = end - 3 * step;
    int64_t time = 0, cpu = 0, memory = 0, gpu = 0, gpu_memory = 0;
    for (size_t i = 0; i < sampled.size(); ++i) {
      const std::deque<ResourceBook::Sample>& samples = sampled[i]->samples;
      while (next[i] < samples.size() && samples[next[i]].time_unix_ms / step <= b) ++next[i];
      if (next[i] == 0) continue;
      const ResourceBook::Sample& latest = samples[next[i] - 1];
      if (latest.time_unix_ms < from) continue;
      time = std::max(time, latest.time_unix_ms);
      cpu += latest.cpu_milli;
      memory += latest.memory_bytes;
      gpu += std::max(latest.gpu_busy_milli, 0);
      gpu_memory += latest.gpu_memory_bytes;
    }
    v1::TaskResourceSample* sum = out.add_totals();
    sum->set_time_unix_ms(time);
    sum->set_cpu_milli(static_cast<int32_t>(std::min<int64_t>(cpu, INT32_MAX)));
    sum->set_memory_bytes(memory);
    sum->set_gpu_busy_milli(static_cast<int32_t>(std::min<int64_t>(gpu, INT32_MAX)));
    sum->set_gpu_memory_bytes(gpu_memory);
  }
  return out;
}

}  // namespace trainyard::server
