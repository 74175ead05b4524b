// ServerLink: the agent's one bidirectional gRPC stream to the server. It
// registers the node, sends heartbeats on the interval the server asks for,
// forwards task status changes (buffered while disconnected and replayed on
// reconnect), and carries out launch, kill and log-read orders. Reconnects
// with exponential backoff; never loses track of a task it started.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/agent_core.h"
#include "agent/launch_queue.h"
#include "agent/task_exec.h"
#include "agent/task_logs_push.h"
#include "api/link_state.h"
#include "common/clock.h"
#include "grpcpp/security/credentials.h"
#include "proto/service.grpc.pb.h"

namespace trainyard::agent {

struct ServerLinkOptions {
  std::string server;  // the server's agent listener, host:port
  // TLS (docs/security.md): the CA that verifies the server, and this
  // node's certificate and key (PEM), which name the node. All "" =
  // plaintext. With TLS every task gets a copy of ca_pem in its own
  // directory (kTaskCaFile, its account's), named by TRAINYARD_CA_FILE, so a
  // job master running as its user verifies the server too: the agent's
  // own CA file may sit in a directory only the agent can enter.
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string ca_file;  // the agent's own CA file; for its messages
  // Dates the statuses sent and ages the ends repeated in heartbeats.
  // Required; outlives the link. The heartbeat interval and the reconnect
  // backoff are waits in real time: they pace the traffic to the server.
  const Clock* clock = nullptr;
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(1);
  size_t max_buffered_statuses = 100000;
  size_t max_log_subscriptions = 1024;  // logs the server may follow here at once
  // Launches set up at once (files, directories, account, supervisor):
  // LaunchQueue's workers.
  int launch_workers = 4;
};

class ServerLink : public TaskListener {
 public:
  // REQUIRES: options.clock is set.
  explicit ServerLink(ServerLinkOptions options);
  ~ServerLink() override;

  // Runs against `core` until Stop; task directories go under the core's
  // data dir. REQUIRES: core outlives the link.
  void Start(AgentCore* core);
  void Stop();
  // The next heartbeat goes now rather than at its interval (a GPU fault
  // was just read).
  void BeatSoon() ABSL_LOCKS_EXCLUDED(mu_);
  // Tells the server this agent is stopping on purpose and stops its tasks
  // (v1::Draining): their jobs go back to the queue, no restart charged.
  // False when not connected (the server then finds the node lost).
  bool AnnounceStop(const std::string& reason);
  // Waits up to `timeout` for the server's Drained (it has seen every task
  // here end); true when it came.
  bool WaitDrained(absl::Duration timeout);
  // True while a stream is registered.
  bool connected() const { return connected_; }

  void OnTaskStatus(const TaskStatus& status) override;

 private:
  void Run();
  // Makes channel_ and stub_ for `servers` (options_.server, or the same
  // list in another order).
  void Dial(const std::string& servers);
  // One connection: register, then serve until the stream breaks. Returns
  // true when the server accepted the registration.
  bool Session();
  // Waits up to 5 s for the channel to connect; says why it may not when
  // it does not (false).
  bool ReachServer();
  // The registration: this node, its GPU faults and the ports in use.
  v1::AgentMessage Registration();
  // The server accepted the registration: what happened while away is
  // replayed, then statuses go out as they come.
  void Accepted(const v1::Registered& registered) ABSL_LOCKS_EXCLUDED(mu_);
  // The stream of `session` is over: statuses wait for the next one, the
  // server's log reads and exec sessions end, the heartbeats stop.
  void EndSession(int64_t session, std::thread& heartbeats) ABSL_LOCKS_EXCLUDED(mu_);
  // Heartbeats as `registered` asks while `session` lasts: every
  // heartbeat_interval_ms; deltas (only what changed, heartbeat_delta.h)
  // when full_heartbeat_every > 0; a beat with nothing new left out until
  // quiet_heartbeat_interval_ms after the last one sent; ports in use only
  // on the serving ports. Between them, every sample_interval_ms (0:
  // never), the tasks' resources.
  void Heartbeats(const v1::Registered& registered, int64_t session);
  // Waits until `wake`, or a beat asked for soon (beat_soon_: *beat_at is
  // now then); false once `session` is over or the link stops.
  bool AwaitBeat(int64_t session, absl::Time wake, absl::Time* beat_at) ABSL_LOCKS_EXCLUDED(mu_);
  // Samples the running tasks (AgentCore::SampleResources) and sends them;
  // false when the stream of `session` is gone.
  bool SendResources(int64_t session);
  void Handle(const v1::ServerMessage& msg);
  // Queues a launch order (LaunchQueue); StartLaunch carries it out on a
  // worker, CancelLaunch reports or kills one a kill overtook.
  void HandleLaunch(const v1::TaskSpec& spec);
  void StartLaunch(const v1::TaskSpec& spec);
  // A launch with an image: the image unpacked here (ImageStore) and the
  // launch given its root, environment, volumes and default command.
  absl::Status PrepareImage(const v1::TaskSpec& spec, TaskLaunch* launch);
  void CancelLaunch(const v1::TaskSpec& spec, bool started);
  void HandleKill(const v1::KillTask& kill);
  // The heartbeat's task list, taken while no status can be written
  // (REQUIRES write_mu_): launches in flight, then the supervisor's tasks.
  void AddTasks(v1::Heartbeat* hb, int64_t session, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  bool WriteLocked(const v1::AgentMessage& msg, int64_t session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void HandleLogRead(const v1::LogRead& read);
  // A subscription (LogRead.window_bytes > 0): pushed by pusher_.
  void SubscribeLog(const v1::LogRead& read);
  // Sends a pushed piece if the session it was asked for is still the one
  // connected (a new session's server never asked for it).
  bool WriteLogPiece(const LogPiece& piece);
  // `trainyard exec` (task_exec.h): an order opens a session of the
  // stream's; its pieces go back on that stream only.
  void OpenExec(const v1::ExecOpen& open);
  bool WriteExecPiece(const ExecPiece& piece);
  // Writes on the stream of `session` (-1: whichever is connected); false
  // when it is not (or no longer) connected.
  bool Write(const v1::AgentMessage& msg, int64_t session = -1);

  const ServerLinkOptions options_;
  AgentCore* core_ = nullptr;
  // The channel to the server, or to the servers of a list in the order
  // `dialing_`; made again, in another order, only by the link's thread
  // between sessions (Run), which alone uses it.
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::string dialing_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentChannel::Stub> stub_;
  // Where the last session reached the server (Registered.reached_address).
  std::string dialed_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};

  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Write at a time on the stream
  absl::Mutex mu_;
  absl::CondVar cv_;  // stopping_ or session_ changed
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  // What to buffer, replay and repeat across streams (api/link_state.h).
  api::LinkState link_ ABSL_GUARDED_BY(mu_){options_.max_buffered_statuses};
  int64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  bool drained_ ABSL_GUARDED_BY(mu_) = false;  // the server answered AnnounceStop
  bool beat_soon_ ABSL_GUARDED_BY(mu_) = false;  // BeatSoon: the next heartbeat goes now
  std::unique_ptr<LogPusher> pusher_;  // made at Start; subscriptions end with their session
  std::unique_ptr<GpuHealthWatch> health_watch_;  // made at Start when the node reads Xids; ends first at Stop
  std::unique_ptr<LaunchQueue> launches_;  // made at Start
  // Made with the link (statuses may come before Start); sessions end with
  // their stream, all of them at Stop.
  std::unique_ptr<TaskExec> exec_;
  std::string node_name_;  // set at Start, for the exec thread's messages
};

// Converts a launch order into what the supervisor runs: files written into
// the task directory DATA/work/job_ID/ROLE-INDEX, ${TRAINYARD_TASK_DIR} in env
// values replaced by it. Errors name the file that cannot be written.
// DATA/work/job_ID/ROLE-INDEX (TaskKey::Place): where a task's files (hosts
// file, MPI hostfile) live, and its working directory unless its spec names
// one.
std::string TaskDir(const std::string& data_dir, const TaskKey& key);

// The name of the task's copy of the cluster CA in its task dir.
inline constexpr char kTaskCaFile[] = "trainyard-ca.pem";
// Writes each file atomically (write, then rename) into `task_dir`. Errors
// name a file name that is not plain, or the file that cannot be written.
absl::Status WriteTaskFiles(const std::string& task_dir, const google::protobuf::Map<std::string, std::string>& files);
absl::StatusOr<TaskLaunch> ToTaskLaunch(const v1::TaskSpec& spec, const std::string& data_dir);
// The wire status, dated `now`.
v1::TaskStatus ToProto(const TaskStatus& status, absl::Time now);
v1::NodeInfo ToProto(const NodeInfo& info);

}  // namespace trainyard::agent
