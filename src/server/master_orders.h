// MasterOrders: pushes the server's orders to checkpoint to job masters'
// ports (proto/jobmaster.proto, ServerOrder) the moment they are made (a
// master still starting, whose port refuses, is tried again until the
// deadline), so
// a preempted job's workers start saving at once rather than at their
// master's next figures report (every 2 s, which still carries the order:
// a push that fails costs that wait, nothing more). kThreads threads of its
// own, started at the first push, each a connect (IPv4, as masters listen),
// one frame each way and a close within a deadline; a push that waited in
// the queue longer than the report interval is dropped, so masters that do
// not answer hold up the others at most that long. Thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/jobmaster.pb.h"

namespace trainyard::server {

class MasterOrders {
 public:
  // At most this many pushes wait; beyond, the oldest is dropped (its
  // master hears of it at its next report).
  static constexpr size_t kMaxQueued = 1024;
  static constexpr int kThreads = 4;
  // A push queued longer than this (the masters' report interval) is dropped.
  static constexpr absl::Duration kStale = absl::Seconds(2);

  explicit MasterOrders(absl::Duration timeout = absl::Seconds(2)) : timeout_(timeout) {}
  ~MasterOrders();
  MasterOrders(const MasterOrders&) = delete;
  MasterOrders& operator=(const MasterOrders&) = delete;

  // Sends `order` to the master at `address` ("host:port"). Never blocks.
  void Push(std::string address, v1::ServerOrder order);

  // Pushes answered by a master that took the order, and those that failed
  // (refused, unreachable, timed out), since the start.
  size_t delivered() const;
  size_t failed() const;

 private:
  struct Queued {
    std::string address;
    v1::ServerOrder order;
    absl::Time queued;
  };
  void Run();
  // One push: OK when the master answered with the order.
  absl::Status Deliver(const std::string& address, const v1::ServerOrder& order) const;

  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  size_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  size_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace trainyard::server
