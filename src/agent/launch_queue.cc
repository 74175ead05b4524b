// The agent's queue of launch orders and its workers (see launch_queue.h).
#include "agent/launch_queue.h"

#include <set>

namespace trainyard::agent {

LaunchQueue::LaunchQueue(int workers, Start start, Cancelled cancelled)
    : start_(std::move(start)), cancelled_(std::move(cancelled)) {
  for (int i = 0; i < std::max(1, workers); ++i) workers_.emplace_back([this] { Work(); });
}

LaunchQueue::~LaunchQueue() {
  CancelAll(/*kill_started=*/false);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  for (std::thread& t : workers_) t.join();
}

void LaunchQueue::Push(v1::TaskSpec spec) {
  TaskKey key = KeyOf(spec);
  absl::MutexLock lock(&mu_);
  entries_.push_back(Entry{std::move(spec), std::move(key)});
  cv_.Signal();
}

bool LaunchQueue::Cancel(const TaskKey& key) {
  std::vector<v1::TaskSpec> dropped;
  bool found = false;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->key != key) {
        ++it;
        continue;
      }
      found = true;
      if (it->started) {
        it->cancelled = true;
        ++it;
      } else {
        dropped.push_back(std::move(it->spec));
        it = entries_.erase(it);
      }
    }
  }
  cv_.SignalAll();
  for (const v1::TaskSpec& spec : dropped) cancelled_(spec, false);
  return found;
}

void LaunchQueue::CancelAll(bool kill_started) {
  std::vector<v1::TaskSpec> dropped;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->started) {
        it->cancelled |= kill_started;
        ++it;
        continue;
      }
      dropped.push_back(std::move(it->spec));
      it = entries_.erase(it);
    }
  }
  cv_.SignalAll();
  for (const v1::TaskSpec& spec : dropped) cancelled_(spec, false);
}

bool LaunchQueue::AfterLaunch(const TaskKey& key, std::function<void()> then) {
  absl::MutexLock lock(&mu_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->key != key) continue;
    it->then.push_back(std::move(then));
    return true;
  }
  return false;
}

std::vector<TaskStatus> LaunchQueue::InFlight() const {
  absl::MutexLock lock(&mu_);
  std::vector<TaskStatus> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) {
    out.push_back(TaskStatus{.key = e.key,
                             .state = TaskState::kLaunching,
                             .attempt = e.spec.attempt(),
                             .launch_attempt = e.spec.attempt(),
                             .job_id = e.spec.job_id()});
  }
  return out;
}

void LaunchQueue::WaitIdleForTest() const {
  absl::MutexLock lock(&mu_);
  while (!entries_.empty()) cv_.Wait(&mu_);
}

void LaunchQueue::Work() {
  for (;;) {
    std::list<Entry>::iterator mine;
    {
      absl::MutexLock lock(&mu_);
      // The first launch whose task has no earlier launch in flight: one
      // task's launches start one at a time, in the order read.
      auto eligible = [this, &mine]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        std::set<TaskKey> earlier;
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
          if (!it->started && earlier.count(it->key) == 0) {
            mine = it;
            return true;
          }
          earlier.insert(it->key);
        }
        return false;
      };
      while (!stopping_ && !eligible()) cv_.Wait(&mu_);
      if (stopping_) return;
      mine->started = true;
    }
    start_(mine->spec);  // the entry stays put: only its worker erases a started one
    bool cancelled;
    for (;;) {
      // What was to follow the launch runs while it is still in flight, so
      // anything given for the task meanwhile queues behind it too.
      std::vector<std::function<void()>> then;
      {
        absl::MutexLock lock(&mu_);
        then.swap(mine->then);
        cancelled = mine->cancelled;
        if (then.empty() && !cancelled) entries_.erase(mine);
      }
      if (then.empty()) break;
      for (const auto& fn : then) fn();
    }
    if (cancelled) {
      // Killed while it started: it stays in flight until the kill is
      // given, so that no one sees the queue idle with a kill still owed.
      cancelled_(mine->spec, true);
      std::vector<std::function<void()>> rest;  // given while the kill was
      {
        absl::MutexLock lock(&mu_);
        rest.swap(mine->then);
        entries_.erase(mine);
      }
      for (const auto& fn : rest) fn();
    }
    cv_.SignalAll();
  }
}

}  // namespace trainyard::agent
