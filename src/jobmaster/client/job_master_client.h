// JobMasterClient: the worker library's link to its job master. It connects
// to TRAINYARD_JOB_MASTER, registers with STARTING, pings from its own
// thread, offers blocking calls (list workers, barrier) and non-blocking state
// sends, and when the master goes away it reconnects and re-registers with
// the same id and the state it had reached, so a restarted master rebuilds
// its view. Barriers in flight when the connection drops are entered again
// on the new connection; other calls fail with UNAVAILABLE and may be
// retried.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "jobmaster/client/frame_connection.h"
#include "jobmaster/worker_table.h"

namespace trainyard::jobmaster {

// The job's members as the worker table gives them: who is where, ordered
// by worker id (only those that joined), without states.
struct WorkerDirectory {
  int num_workers = 0;
  int64_t version = 0;  // the master's membership version
  std::vector<TableRow> workers;
};

struct JobMasterClientOptions {
  // "host:port" of the master.
  std::string master_address;
  // A file holding the master's current "host:port" (the server rewrites it
  // when the master moves to another node); read at each (re)connection,
  // master_address when it is missing or empty. "" = none.
  std::string master_address_file;
  // Who this worker is; worker_id -1 asks the master for the next free id.
  pb::WorkerInfo info;
  int restart_count = 0;
  // The job's secret for the master (TRAINYARD_JOB_SECRET); "" = none.
  std::string job_secret;
  // How often the client pings (keep it at the master's --ping-interval-ms).
  absl::Duration ping_interval = absl::Seconds(1);
  // How long Start keeps trying to reach the master and register.
  absl::Duration connect_timeout = absl::Seconds(30);
  // Longest pause between reconnection attempts.
  absl::Duration max_backoff = absl::Seconds(2);
  // The program saves checkpoints when its job is ordered to (a preemption,
  // a time limit): the master pushes the order to it (PendingCheckpoint)
  // and waits for its CheckpointDone before the job is stopped.
  bool checkpoints = false;
};

// The first line of the master address file, trimmed; "" when it cannot be
// read or is empty.
std::string ReadMasterAddressFile(const std::string& path);

// The master's address to connect to now: the first line of
// options.master_address_file when it has one, else options.master_address.
std::string CurrentMasterAddress(const JobMasterClientOptions& options);

// Options from the task's environment: TRAINYARD_JOB_MASTER (required),
// TRAINYARD_JOB_MASTER_FILE (optional),
// TRAINYARD_WORKER_ID (-1 when unset), TRAINYARD_ROLE, TRAINYARD_INDEX,
// TRAINYARD_RESTART_COUNT, and the host's name as the worker's address.
absl::StatusOr<JobMasterClientOptions> ClientOptionsFromEnvironment();

class JobMasterClient {
 public:
  // Connects, registers (STARTING) and starts the ping thread. Fails when the
  // master cannot be reached within connect_timeout or refuses the worker.
  static absl::StatusOr<std::unique_ptr<JobMasterClient>> Start(JobMasterClientOptions options);
  // Stops pinging and closes the connection (the worker's state stays).
  ~JobMasterClient();

  int worker_id() const { return worker_id_; }
  int num_workers() const { return num_workers_; }
  // This worker's WorkerInfo with the id the master gave.
  pb::WorkerInfo info() const;

  // Sends a state change without waiting; the master's answer is checked by
  // the client's thread (a refusal is logged and kept in last_error()).
  // While disconnected the state is sent with the next re-registration.
  void SendState(pb::WorkerState state, std::string reason = "");
  // Sends a state change and waits for the master to accept it.
  absl::Status SetState(pb::WorkerState state, std::string reason, absl::Duration timeout);
  // Lists the workers; RESPONSE_AFTER_ALL_JOINED waits until all joined or
  // `timeout` (the master's own wait applies too).
  absl::StatusOr<pb::ListWorkersReply> ListWorkers(pb::ListWorkersMode mode,
                                                   absl::Duration timeout);
  // Discovery for jobs of any size: the worker table (who is where, no
  // states), which the master encodes once per membership version for every
  // asker. The client keeps the last table and asks with its version, so
  // asking again while membership is unchanged costs a few bytes.
  // RESPONSE_AFTER_ALL_JOINED waits until all joined or `timeout`.
  absl::StatusOr<std::shared_ptr<const WorkerDirectory>> Directory(pb::ListWorkersMode mode,
                                                                   absl::Duration timeout);
  // Worker 0 (rank 0) as it registered, its address in info.ip: what a
  // framework needs for MASTER_ADDR / MASTER_PORT. Waits up to `timeout` for
  // worker 0 to join; DEADLINE_EXCEEDED when it does not.
  absl::StatusOr<pb::RankZeroReply> RankZero(absl::Duration timeout);
  // Waits until every worker of the job reached the barrier, or `timeout`.
  // When the master goes away meanwhile (it crashed and is restarted), the
  // client reconnects, re-registers and enters the same barrier again (by its
  // generation, so a restarted master cannot take it for the next one), all
  // within `timeout`. Errors: ABORTED when a worker ended while others
  // waited; DEADLINE_EXCEEDED naming the missing workers; UNAVAILABLE when
  // the master did not come back within `timeout`.
  absl::Status WaitOnBarrier(absl::Duration timeout);
  // Checkpoints (docs/jobmaster.md, "Checkpoints"). The job's open order to
  // checkpoint as the master last pushed it (options.checkpoints), id 0 when
  // none: a local read, cheap enough for every training step.
  pb::CheckpointOrder PendingCheckpoint() const;
  // Asks the master for the open order (id 0: none), and so tells it that
  // this worker checkpoints.
  absl::StatusOr<pb::CheckpointOrder> PollCheckpoint(absl::Duration timeout);
  // Tells the master the checkpoint for order `id` (0: the open one) is
  // saved at `step`; once every checkpointing worker did, the job is stopped.
  absl::Status CheckpointDone(int64_t id, int64_t step, absl::Duration timeout);
  // The last refusal of a non-blocking send, OK if none.
  absl::Status last_error() const;
  bool connected() const;

 private:
  // One call waiting for its answer, on the caller's stack. Its fields are
  // read and written with mu_ held (the analysis cannot name mu_ here).
  struct Pending {
    std::string what;  // "a barrier", for the error when the connection drops
    bool done = false;
    absl::StatusOr<pb::JobMasterResponse> result = absl::UnknownError("no answer");
  };
  explicit JobMasterClient(JobMasterClientOptions options);
  absl::Status Register(absl::Time deadline);
  absl::StatusOr<pb::JobMasterResponse> Call(pb::JobMasterRequest request, absl::Duration timeout,
                                             std::string_view what);
  void IoLoop();
  std::string ConnectedTo() ABSL_LOCKS_EXCLUDED(mu_);
  void Dispatch(pb::JobMasterResponse response) ABSL_LOCKS_EXCLUDED(mu_);
  void ConnectionLost(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits on cv_ until `done()` (called with mu_ held) or the real-time
  // `deadline`; returns done().
  template <typename Pred>
  bool WaitUntil(absl::Time deadline, Pred done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobMasterClientOptions options_;
  // Set by the first registration, before the I/O thread starts; read-only
  // after.
  int worker_id_ = -1;
  int num_workers_ = 0;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // a connection, an answer or stop_ came
  std::shared_ptr<FrameConnection> conn_ ABSL_GUARDED_BY(mu_);  // null while disconnected
  std::string connected_to_ ABSL_GUARDED_BY(mu_);               // the address conn_ reached
  std::map<uint64_t, Pending*> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  // The generation of this worker's next barrier (BarrierRequest.generation).
  int64_t next_barrier_generation_ ABSL_GUARDED_BY(mu_) = 0;
  pb::WorkerState last_state_ ABSL_GUARDED_BY(mu_) = pb::STARTING;
  std::string last_reason_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  // The last worker table (Directory); dropped with the connection.
  std::shared_ptr<const WorkerDirectory> directory_ ABSL_GUARDED_BY(mu_);
  pb::CheckpointOrder order_ ABSL_GUARDED_BY(mu_);  // the last order pushed or polled
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread io_thread_;
};

}  // namespace trainyard::jobmaster
