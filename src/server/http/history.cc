// The history ring and its route (see history.h).
#include "server/http/history.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/http/json_views.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

HistorySample Take(const ViewStore& views, absl::Time now) {
  HistorySample s;
  s.unix_ms = absl::ToUnixMillis(now);
  GpuCounts all;  // summed in thousandths, divided once below
  for (const ViewStore::NodeEntry& n : *views.Nodes()) {
    all.Add(GpuCountsOf(*n.view));
    ++s.nodes;
    if (n.view->info().state() == v1::NODE_READY) ++s.nodes_ready;
  }
  s.gpus_total = all.total;
  s.gpus_allocated = all.AllocatedGpus();
  s.gpus_free = all.FreeGpus();
  s.gpus_excluded = all.excluded;
  for (const auto& [key, count] : views.StateCounts().jobs) {
    if (key.second == v1::JOB_RUNNING) s.jobs_running += count;
    if (key.second == v1::JOB_QUEUED) s.jobs_queued += count;
  }
  // The longest wait of a queued job, per queue.
  std::map<std::string, int64_t> oldest_submit;
  for (const auto& j : views.Jobs(false)) {
    if (j->state() != v1::JOB_QUEUED || j->submit_time_unix_ms() <= 0) continue;
    auto [it, added] = oldest_submit.emplace(j->queue(), j->submit_time_unix_ms());
    if (!added) it->second = std::min(it->second, j->submit_time_unix_ms());
  }
  for (const v1::QueueView& q : views.Queues()->queues()) {
    HistoryQueue hq;
    hq.name = q.name();
    hq.gpus_used = q.used().gpu_milli() / 1000.0;
    hq.running_jobs = q.running_jobs();
    hq.pending_jobs = q.pending_jobs();
    auto it = oldest_submit.find(q.name());
    if (it != oldest_submit.end()) hq.longest_wait_s = std::max<int64_t>(0, s.unix_ms - it->second) / 1000.0;
    s.queues.push_back(std::move(hq));
  }
  return s;
}

json SampleJson(const HistorySample& s) {
  json queues = json::array();
  for (const HistoryQueue& q : s.queues) {
    queues.push_back({{"name", q.name},
                      {"gpus_used", q.gpus_used},
                      {"running_jobs", q.running_jobs},
                      {"pending_jobs", q.pending_jobs},
                      {"longest_wait_s", q.longest_wait_s}});
  }
  return {{"unix_ms", s.unix_ms},
          {"gpus", {{"total", s.gpus_total}, {"allocated", s.gpus_allocated}, {"free", s.gpus_free},
                    {"excluded", s.gpus_excluded}}},
          {"nodes", s.nodes},
          {"nodes_ready", s.nodes_ready},
          {"jobs_running", s.jobs_running},
          {"jobs_queued", s.jobs_queued},
          {"jobs_placed", s.jobs_placed},
          {"mean_wait_s", s.mean_wait_s < 0 ? json(nullptr) : json(s.mean_wait_s)},
          {"queues", std::move(queues)}};
}

}  // namespace

History::History(absl::Duration interval, absl::Duration retention)
    : interval_(interval),
      capacity_(static_cast<size_t>(std::max<int64_t>(1, static_cast<int64_t>(absl::FDivDuration(retention, interval))))) {}

void History::Record(const ViewStore& views, absl::Time now) {
  HistorySample s = Take(views, now);
  ViewStore::StatsPtr stats = views.Stats();  // held: the shell may publish new ones meanwhile
  const Histogram& pending = stats->manager.pending_seconds;
  absl::MutexLock lock(&mu_);
  if (last_placed_ >= 0 && pending.count() >= last_placed_) {
    s.jobs_placed = pending.count() - last_placed_;
    if (s.jobs_placed > 0) s.mean_wait_s = std::max(0.0, (pending.sum() - last_wait_sum_) / s.jobs_placed);
  }
  last_placed_ = pending.count();
  last_wait_sum_ = pending.sum();
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(s));
    return;
  }
  ring_[next_] = std::move(s);
  next_ = (next_ + 1) % capacity_;
}

std::vector<HistorySample> History::Since(int64_t after_unix_ms) const {
  absl::MutexLock lock(&mu_);
  std::vector<HistorySample> out;
  for (size_t i = 0; i < ring_.size(); ++i) {
    const HistorySample& s = ring_[(next_ + i) % ring_.size()];
    if (s.unix_ms > after_unix_ms) out.push_back(s);
  }
  return out;
}

HistorySampler::HistorySampler(History* history, const ViewStore* views) : history_(history), views_(views) {
  thread_ = std::thread([this] {
    absl::Time next = absl::Now();
    do {
      history_->Record(*views_, absl::Now());
      // On the interval's grid, not drifting by what a sample takes.
      next += history_->interval();
      if (next < absl::Now()) next = absl::Now() + history_->interval();
    } while (!stop_.WaitForNotificationWithDeadline(next));
  });
}

HistorySampler::~HistorySampler() {
  stop_.Notify();
  thread_.join();
}

void AddHistoryRoute(HttpServer& server, const History* history) {
  server.Handle("GET", "/api/v1/history", "/api/v1/history",
                [history](const httplib::Request& req, httplib::Response& res, const Principal&) {
                  if (!history) {
                    return SetStatusError(
                        res, absl::NotFoundError("this server keeps no history (historyIntervalMs is 0)"));
                  }
                  int64_t since = 0;
                  for (const auto& [key, value] : req.params) {
                    if (key != "since") {
                      return SetStatusError(res, absl::InvalidArgumentError(absl::StrCat(
                                                     key, ": not a parameter of /api/v1/history (since)")));
                    }
                    if (!absl::SimpleAtoi(value, &since) || since < 0) {
                      return SetStatusError(res, absl::InvalidArgumentError(absl::StrCat(
                                                     "since: '", value, "' is not a time in Unix milliseconds")));
                    }
                  }
                  json samples = json::array();
                  for (const HistorySample& s : history->Since(since)) samples.push_back(SampleJson(s));
                  json body = {{"interval_ms", absl::ToInt64Milliseconds(history->interval())},
                               {"retention_ms",
                                absl::ToInt64Milliseconds(history->interval() * static_cast<int64_t>(history->capacity()))},
                               {"samples", std::move(samples)}};
                  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
                });
}

}  // namespace trainyard::server::http
