// The job master's network side: one epoll event loop on one thread serving
// every worker connection (non-blocking sockets, level-triggered, replies
// batched into one write per connection per loop turn). Frames are decoded
// here and handed to MasterState; bad frames close the connection with a
// logged reason while the others keep being served. The caps and timeouts of
// JobMasterConfig bound what any peer can make the master hold.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "jobmaster/config.h"
#include "jobmaster/job_terminator.h"
#include "jobmaster/master_state.h"

namespace trainyard::jobmaster {

// Raises the soft limit on open files to the hard limit (a master holds one
// socket per worker). Returns the new soft limit.
uint64_t RaiseOpenFileLimit();

class JobMasterServer : private Outbox {
 public:
  // Validates `config`, raises the open-file limit and listens. REQUIRES:
  // terminator and clock outlive the server.
  static absl::StatusOr<std::unique_ptr<JobMasterServer>> Create(const JobMasterConfig& config,
                                                                 JobTerminator* terminator,
                                                                 const Clock* clock);
  ~JobMasterServer() override;

  // The port the master listens on (the chosen one when config.port was 0).
  int port() const { return port_; }

  // Serves until Stop(), or until `linger` after the job ended. Call once,
  // from the thread that owns the loop. Time is the clock's: the loop wakes
  // when a fake clock jumps, so tests drive pings and timeouts with it.
  absl::Status Run(absl::Duration linger_after_end = absl::InfiniteDuration());
  // Asks Run to return soon. Thread-safe.
  void Stop();
  // Runs `fn` on the loop thread against the master's state and waits for it
  // (until Run starts, if it has not yet); returns false once Run returned.
  // Thread-safe (tests, status).
  bool Inspect(const std::function<void(const MasterState&)>& fn);
  // Runs `fn` on the loop thread with the master's state and the clock's
  // time, without waiting for it; false once Run returned. Thread-safe (the
  // server's orders, which arrive on the summary reporter's thread).
  bool Post(std::function<void(MasterState&, absl::Time)> fn);
  // The master's state once Run has returned. REQUIRES: it has (nothing
  // touches the state after that).
  const MasterState& state_after_run() const { return state_; }
  // Number of open worker connections (approximate; any thread).
  int connection_count() const { return connection_count_.load(); }
  // Bytes of partial frames held now over all connections (any thread).
  size_t buffered_input_bytes() const { return buffered_input_.load(); }
  // The most bytes of partial frames held at once over all connections, after
  // the cap was applied (approximate; any thread).
  size_t peak_buffered_input_bytes() const { return peak_buffered_input_.load(); }
  // The most bytes of answers queued for one connection at once (any thread).
  size_t peak_queued_output_bytes() const { return peak_queued_output_.load(); }
  // Connections the master closed for breaking a cap or a timeout (any thread).
  int cut_off_count() const { return cut_off_count_.load(); }

 private:
  struct Connection;
  JobMasterServer(const JobMasterConfig& config, JobTerminator* terminator, const Clock* clock);
  absl::Status Listen();

  void Send(ConnId conn, const pb::JobMasterResponse& response) override;
  void SendShared(ConnId conn, uint64_t request_id, int body_field,
                  const SharedBody& body) override;
  void BarriersPassed(int64_t passed) override;
  Connection* Writable(ConnId conn);

  void AcceptAll(absl::Time now);
  void ReadFrom(Connection* c, absl::Time now);
  void KeepPartial(Connection* c, std::string_view rest, absl::Time now);
  void AfterPartialConsumed(Connection* c, size_t used, absl::Time now);
  void SetInputBytes(Connection* c);
  size_t HandleFrames(Connection* c, std::string_view data, absl::Time now);
  void RejectGarbage(Connection* c, const absl::Status& why);
  void CheckQueuedOutput(Connection* c, size_t queued_before);
  void FlushDirty();
  void Flush(Connection* c);
  void Close(Connection* c, std::string_view why);
  void CutOff(Connection* c, std::string_view why);
  void SweepConnections(absl::Time now);
  std::string ExpiredReason(const Connection& c, absl::Time now) const;
  void RunPosted() ABSL_LOCKS_EXCLUDED(posted_mu_);
  void Wake();

  JobMasterConfig config_;
  const Clock* clock_;
  MasterState state_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int reserve_fd_ = -1;  // released to accept-and-close when out of descriptors
  int port_ = 0;
  ConnId next_conn_id_ = 1;
  std::unordered_map<ConnId, std::unique_ptr<Connection>> conns_;
  std::vector<Connection*> dirty_;
  std::vector<std::unique_ptr<Connection>> closed_;
  std::string read_buffer_;
  pb::JobMasterRequest request_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connection_count_{0};
  // Capacity of every connection's partial-frame buffer; written on the loop only.
  std::atomic<size_t> buffered_input_{0};
  std::atomic<size_t> peak_buffered_input_{0};
  std::atomic<size_t> peak_queued_output_{0};
  std::atomic<int> cut_off_count_{0};
  absl::Time next_sweep_ = absl::InfinitePast();
  bool record_failed_ = false;  // warned once that the barrier record cannot be written
  int jump_listener_ = 0;  // wakes the loop when a fake clock jumps
  absl::Mutex posted_mu_;
  bool loop_done_ ABSL_GUARDED_BY(posted_mu_) = false;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(posted_mu_);
};

}  // namespace trainyard::jobmaster
