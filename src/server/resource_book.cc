#include "server/resource_book.h"

#include <algorithm>

namespace trainyard::server {

void ResourceBook::Record(const std::string& node, const v1::TaskResources& task, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now >= next_prune_) {
    PruneLocked(now);
    next_prune_ = now + absl::Minutes(1);
  }
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
  series->memory_limit_bytes = task.memory_limit_bytes();
  series->source = task.source();
  // Stamped on arrival: one clock for every node's samples.
  Sample s{.time_unix_ms = absl::ToUnixMillis(now),
           .memory_bytes = task.sample().memory_bytes(),
           .gpu_memory_bytes = task.sample().gpu_memory_bytes(),
           .cpu_milli = task.sample().cpu_milli(),
           .gpu_busy_milli = task.sample().gpu_busy_milli()};
  series->samples.push_back(s);
  ++samples_;
  int64_t oldest = absl::ToUnixMillis(now - options_.keep_for);
  while (!series->samples.empty() && series->samples.front().time_unix_ms < oldest) {
    series->samples.pop_front();
    --samples_;
  }
}

void ResourceBook::Prune(absl::Time now) {
  absl::MutexLock lock(&mu_);
  PruneLocked(now);
}

void ResourceBook::PruneLocked(absl::Time now) {
  int64_t oldest = absl::ToUnixMillis(now - options_.keep_for);
  for (auto job = jobs_.begin(); job != jobs_.end();) {
    auto& tasks = job->second.tasks;
    for (auto t = tasks.begin(); t != tasks.end();) {
      auto& samples = t->second.samples;
      while (!samples.empty() && samples.front().time_unix_ms < oldest) {
        samples.pop_front();
        --samples_;
      }
      if (samples.empty()) {
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

std::map<std::pair<std::string, int>, ResourceBook::TaskSeries> ResourceBook::Job(uint64_t job_id,
                                                                                  absl::Time since) const {
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
    auto first = std::lower_bound(series.samples.begin(), series.samples.end(), from,
                                  [](const Sample& s, int64_t t) { return s.time_unix_ms < t; });
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
      j.gpu_busy_milli += s.gpu_busy_milli;
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
                                           int interval_ms) {
  v1::JobResourcesResponse out;
  out.set_job(job.name());
  out.set_id(job.id());
  out.set_sample_interval_ms(interval_ms);
  int64_t bucket_ms = std::max(interval_ms, 1);
  // Per interval, the sum of each task's newest sample in it: a task's
  // samples are in time order, so its newest in an interval is the one
  // before the next interval's first.
  std::map<int64_t, ResourceBook::Sample> sums;
  auto add = [&sums, bucket_ms](const ResourceBook::Sample& s) {
    ResourceBook::Sample& sum = sums[s.time_unix_ms / bucket_ms];
    sum.time_unix_ms = std::max(sum.time_unix_ms, s.time_unix_ms);
    sum.cpu_milli += s.cpu_milli;
    sum.memory_bytes += s.memory_bytes;
    sum.gpu_busy_milli += s.gpu_busy_milli;
    sum.gpu_memory_bytes += s.gpu_memory_bytes;
  };
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
    if (s.memory_limit_bytes > 0) v->set_memory_limit_bytes(s.memory_limit_bytes);
    v->set_source(s.source);
    v->mutable_samples()->Reserve(static_cast<int>(s.samples.size()));
    for (size_t i = 0; i < s.samples.size(); ++i) {
      ToProto(s.samples[i], v->add_samples());
      bool last_in_bucket = i + 1 == s.samples.size() ||
                            s.samples[i + 1].time_unix_ms / bucket_ms != s.samples[i].time_unix_ms / bucket_ms;
      if (last_in_bucket) add(s.samples[i]);
    }
    if (!s.samples.empty()) {
      v->set_near_memory_limit(ResourceBook::NearLimit(s.samples.back().memory_bytes, v->memory_limit_bytes()));
    }
  }
  for (const auto& [bucket, sum] : sums) ToProto(sum, out.add_totals());
  return out;
}

}  // namespace trainyard::server
