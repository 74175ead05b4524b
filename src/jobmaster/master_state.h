// The job master's logic without sockets: worker life-cycle, ids, discovery,
// barriers, ping deadlines and the job's end. The event loop feeds it decoded
// requests, closed connections and ticks, each with the current time, and it
// answers through an Outbox. Single-threaded by design: the master applies
// every state change in order on its one event loop; tests drive it directly
// with simulated time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/histogram.h"
#include "jobmaster/config.h"
#include "jobmaster/job_terminator.h"
#include "proto/jobmaster.pb.h"

namespace trainyard::jobmaster {

namespace pb = ::trainyard::v1;

// Identifies one connection to the master; never reused; 0 means none.
using ConnId = uint64_t;

// A response body serialized once and shared by every answer that carries
// it: a big job's worker list or table goes to thousands of workers, and each
// connection holds a reference until its copy is written, never a copy.
using SharedBody = std::shared_ptr<const std::string>;

// Where the master's answers go.
class Outbox {
 public:
  virtual ~Outbox() = default;
  virtual void Send(ConnId conn, const pb::JobMasterResponse& response) = 0;
  // Sends a response whose body is field `body_field` of JobMasterResponse
  // (kWorkersFieldNumber or kTableFieldNumber), already serialized in `body`.
  // The outbox may keep `body` until the answer is written.
  virtual void SendShared(ConnId conn, uint64_t request_id, int body_field,
                          const SharedBody& body) = 0;
  // The job has now passed `passed` barriers (one completed, or a restarted
  // master learned the count), before any answer about it goes out.
  virtual void BarriersPassed(int64_t /*passed*/) {}
};

// The state name as the protocol spells it ("RUNNING", ...).
const char* WorkerStateName(pb::WorkerState state);

// Whether a and b hold the same bytes, compared in time that depends on
// their lengths only (a secret or a MAC: the answer's timing tells nothing
// of it).
bool SameBytes(std::string_view a, std::string_view b);

// The hex HMAC-SHA256, keyed by a master's job token, of a server's order
// to checkpoint job `job` (ServerOrder.mac; common/order_mac.h's text).
std::string ServerOrderMac(std::string_view key, std::string_view job, const pb::CheckpointOrder& order);

class MasterState {
 public:
  // REQUIRES: ValidateConfig(config) is OK; terminator and outbox outlive this.
  MasterState(const JobMasterConfig& config, JobTerminator* terminator, Outbox* outbox);

  // Handles one request that arrived on `conn` from `peer_ip`.
  void OnRequest(ConnId conn, std::string_view peer_ip, const pb::JobMasterRequest& request,
                 absl::Time now);
  // Forgets `conn`: its waits are dropped; its worker keeps its state (missed
  // pings, not the closed connection, make a worker ERROR).
  void OnConnectionClosed(ConnId conn);
  // Applies ping deadlines and wait timeouts that passed by `now`.
  void OnTick(absl::Time now);
  // Answers `request_id` on `conn` with an error.
  void SendError(ConnId conn, uint64_t request_id, const absl::Status& status);
  // True once `conn` registered or attached (it speaks for a worker).
  bool IsBound(ConnId conn) const { return bindings_.contains(conn); }
  // True while `conn` waits for an answer (a barrier or an all-joined list).
  bool Waits(ConnId conn) const;

  // Inspection (tests, the CLI's status line).
  pb::WorkerState StateOf(int worker_id) const { return workers_[worker_id].state; }
  const std::string& ReasonOf(int worker_id) const { return workers_[worker_id].reason; }
  int RestartsOf(int worker_id) const { return workers_[worker_id].restart_count; }
  int joined_count() const { return joined_count_; }
  // The membership version: advances at every STARTING (a join, a restart,
  // a re-registration), never for a state change alone. Starts at
  // config.first_membership_version.
  int64_t membership_version() const { return membership_version_; }
  // How many times the worker table / the classic list was encoded (tests:
  // one encoding per version, whatever the number of askers).
  int table_encodings() const { return table_encodings_; }
  int list_encodings() const { return list_encodings_; }
  // Workers in `state` now.
  int CountIn(pb::WorkerState state) const { return state_counts_[state]; }
  // Barriers completed by this master: from the first worker in to the last.
  const Histogram& barrier_seconds() const { return barrier_seconds_; }
  int barrier_waiting() const { return barrier_count_; }
  int64_t barrier_generation() const { return barrier_generation_; }
  const std::optional<JobEnd>& job_end() const { return job_end_; }
  int num_workers() const { return config_.num_workers; }

  // Checkpoints (master_checkpoint.cc; docs/jobmaster.md, "Checkpoints").
  // The server's order to checkpoint: pushed to every connected worker that
  // checkpoints; once each of them saved (or at once when none does) the
  // terminator is told. An order already taken (its id at most the last
  // one's) is ignored.
  void OnCheckpointOrder(const pb::CheckpointOrder& order, absl::Time now);
  // The last order taken (id 0: none yet).
  const pb::CheckpointOrder& checkpoint_order() const { return order_; }

 private:
  struct Worker {
    pb::WorkerInfo info;
    pb::WorkerState state = pb::UNASSIGNED;
    std::string reason;
    std::string address;  // info.ip, else the peer's IP
    int restart_count = 0;
    int attempt = 0;      // as it registered (Starting.restart_count, TRAINYARD_RESTART_COUNT)
    bool joined = false;
    bool pings = false;
    bool checkpoints = false;   // it saves when ordered (Starting.checkpoints, or it polled)
    int64_t saved_order = 0;    // the last order it saved for, at saved_step
    int64_t saved_step = 0;
    ConnId conn = 0;      // the registering connection while it is open
    std::string peer;     // the IP address that connection came from
    absl::Time last_seen;
  };
  struct Waiter {
    ConnId conn = 0;      // 0: not waiting
    uint64_t request_id = 0;
    absl::Time deadline;
    bool table = false;         // a list waiter that asked for the WorkerTable
    int64_t known_version = 0;  // ... holding this version
  };

  // Registration (master_state.cc).
  // OK when the master has no secret or `presented` is it; else
  // PERMISSION_DENIED naming `verb`.
  absl::Status CheckJobSecret(std::string_view presented, std::string_view verb) const;
  void HandleStarting(ConnId conn, std::string_view peer_ip, uint64_t request_id,
                      const pb::Starting& starting, absl::Time now);
  absl::StatusOr<int> ChooseWorkerId(ConnId conn, const pb::Starting& starting,
                                     std::string_view peer_ip) const;
  void HandleAttach(ConnId conn, uint64_t request_id, const pb::Attach& attach, absl::Time now);
  void HandleStateChange(int id, ConnId conn, uint64_t request_id, const pb::StateChange& change);
  absl::Status CheckTransition(int id, pb::WorkerState target) const;
  void SetState(int id, pb::WorkerState state, std::string reason);
  void AfterTerminalState(int id);
  void EndJob(JobOutcome outcome, std::string reason);
  void ReplyRegistered(ConnId conn, uint64_t request_id, int id);

  // Checkpoints (master_checkpoint.cc).
  void HandleCheckpointPoll(int id, ConnId conn, uint64_t request_id);
  void HandleCheckpointDone(int id, ConnId conn, uint64_t request_id, const pb::CheckpointDone& done);
  // The server's order pushed to the master's port (no worker behind the
  // connection): taken when its MAC is the server's under order_key.
  void HandleServerOrder(ConnId conn, uint64_t request_id, const pb::ServerOrder& order, absl::Time now);
  // Answers with the open order (id 0 when `open` is false or none is).
  void ReplyOrder(ConnId conn, uint64_t request_id, bool open = true);
  // Tells the terminator once every worker that checkpoints saved for the
  // open order (or that none does).
  void MaybeCheckpointed();

  // Discovery, barriers and timeouts (master_waits.cc).
  void HandleList(ConnId conn, uint64_t request_id, const pb::ListWorkersRequest& request,
                  absl::Time now);
  void HandleBarrier(int id, ConnId conn, uint64_t request_id,
                     const pb::BarrierRequest& request, absl::Time now);
  const SharedBody& SerializedList();
  const SharedBody& SerializedTable();
  void AnswerList(ConnId conn, uint64_t request_id, bool table, int64_t known_version);
  void AnswerListWaiters();
  // Discovery of rank 0 (master_discovery.cc).
  void HandleRankZero(ConnId conn, uint64_t request_id, const pb::RankZeroRequest& request,
                      absl::Time now);
  void ReplyRankZero(ConnId conn, uint64_t request_id);
  void AnswerRankZeroWaiters();
  void ExpireRankZeroWaiters(absl::Time now);
  void AddWait(ConnId conn);
  void RemoveWait(ConnId conn);
  void CompleteBarrier();
  void AnswerPassedBarrier(ConnId conn, uint64_t request_id, int64_t generation);
  void AdvanceBarrierTo(int64_t generation);
  void FailBarrier(const absl::Status& status);
  // Drops what `conn`, bound to worker `id`, waits for.
  void DropWaits(ConnId conn, int id);
  void CheckPings(absl::Time now);
  void ExpireBarrierWaiters(absl::Time now);
  void ExpireListWaiters(absl::Time now);
  std::string MissingWorkers(bool barrier) const;
  std::string BlockingWorker() const;

  JobMasterConfig config_;
  JobTerminator* terminator_;
  Outbox* outbox_;
  std::vector<Worker> workers_;
  // Which worker each bound connection speaks for.
  std::unordered_map<ConnId, int> bindings_;
  int joined_count_ = 0;
  int state_counts_[5] = {0, 0, 0, 0, 0};
  // Barrier: one slot per worker id.
  std::vector<Waiter> barrier_;
  int barrier_count_ = 0;
  int64_t barrier_generation_ = 0;
  // A restarted master that lost the count believes its workers (see
  // JobMasterConfig::learn_barriers).
  bool learning_barriers_ = false;
  absl::Time barrier_next_deadline_ = absl::InfiniteFuture();
  absl::Time barrier_opened_;  // when the open barrier's first worker came in
  Histogram barrier_seconds_ = LatencyHistogram();
  // RESPONSE_AFTER_ALL_JOINED requests not answered yet.
  std::vector<Waiter> list_waiters_;
  // Rank-zero requests waiting for worker 0 to join.
  std::vector<Waiter> rank0_waiters_;
  // How many list and rank-zero waits each connection has (so a closing
  // connection costs a look-up, not a scan of every waiter).
  std::unordered_map<ConnId, int> waits_by_conn_;
  // The lowest id that never joined (ids are taken for good, so it only grows).
  int lowest_unjoined_ = 0;
  // The ListWorkersReply, serialized; rebuilt after any change.
  SharedBody list_cache_;
  bool list_cache_valid_ = false;
  int list_encodings_ = 0;
  // The WorkerTable, serialized, at table_version_; rebuilt when the
  // membership version moved past it.
  int64_t membership_version_ = 0;
  SharedBody table_cache_;
  int64_t table_version_ = -1;
  int table_encodings_ = 0;
  absl::Time next_ping_check_ = absl::InfinitePast();
  std::optional<JobEnd> job_end_;
  pb::CheckpointOrder order_;   // the last order taken
  bool order_answered_ = false; // the terminator was told about order_
  absl::Time order_taken_;      // when order_ was taken
  absl::Time now_;              // the time of the request or tick being handled
  pb::JobMasterResponse scratch_;  // reused for replies
};

}  // namespace trainyard::jobmaster
