// LaunchQueue: the launch orders an agent has read from the server and not
// yet handed to its supervisor. A few worker threads start them at once (the
// set-up of one task — its files, directories, account — no longer waits
// behind the one before), one launch of a task at a time and in the order
// read. Until a launch is in the supervisor it is "in flight" here, and the
// agent's heartbeats list it as LAUNCHING (InFlight): a heartbeat never leaves
// out a task whose launch the agent has read (docs/agent.md, "Launches and
// heartbeats").
#pragma once

#include <list>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/launch_order.h"
#include "agent/task.h"
#include "proto/trainyard.pb.h"

namespace trainyard::agent {

class LaunchQueue {
 public:
  // Does one launch (files, supervisor); runs on a worker thread, never with
  // the queue's lock held.
  using Start = std::function<void(const v1::TaskSpec& spec)>;
  // A launch dropped before it started (a kill came first), or a started one
  // to be killed now that it is in the supervisor (`started` true).
  using Cancelled = std::function<void(const v1::TaskSpec& spec, bool started)>;

  // REQUIRES: workers >= 1.
  LaunchQueue(int workers, Start start, Cancelled cancelled);
  // Drops what was not started and joins the workers.
  ~LaunchQueue();
  LaunchQueue(const LaunchQueue&) = delete;
  LaunchQueue& operator=(const LaunchQueue&) = delete;

  // Queues a launch; a worker takes it once no earlier launch of the same
  // task is being started.
  void Push(v1::TaskSpec spec);
  // A kill for `key` came: a queued launch of it is dropped (Cancelled with
  // started false), one being started is killed once it is in the supervisor
  // (Cancelled with started true). True when the key was in flight here;
  // false: the caller kills it in the supervisor.
  bool Cancel(const TaskKey& key);
  // Drops every queued launch (Cancelled, started false); with
  // `kill_started`, those being started are killed once in the supervisor,
  // else they finish.
  void CancelAll(bool kill_started);
  // Runs `then` after the last launch of `key` in flight here has started
  // (on that launch's worker, before the launch leaves the queue, so what
  // comes after it for the task still waits behind it), or never when that
  // launch is dropped by a kill. False when no launch of `key` is in flight:
  // the caller does it now. A task's files updated while its launch writes
  // them are written after the launch's, never at the same time.
  bool AfterLaunch(const TaskKey& key, std::function<void()> then);
  // The launches in flight (queued or being started), as LAUNCHING statuses.
  std::vector<TaskStatus> InFlight() const;
  // Waits until nothing is in flight (tests).
  void WaitIdleForTest() const;

 private:
  struct Entry {
    v1::TaskSpec spec;
    TaskKey key;
    bool started = false;
    bool cancelled = false;
    std::vector<std::function<void()>> then;  // AfterLaunch's, in the order given
  };
  void Work();

  const Start start_;
  const Cancelled cancelled_;
  mutable absl::Mutex mu_;
  mutable absl::CondVar cv_;  // entries_ or stopping_ changed
  std::list<Entry> entries_ ABSL_GUARDED_BY(mu_);  // in the order read; started ones stay until done
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace trainyard::agent
