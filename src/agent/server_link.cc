// The agent's stream to the server.
#include "agent/server_link.h"

#include "api/image_ref.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_replace.h"
#include "agent/launch_order.h"
#include "agent/peer_addresses.h"
#include "agent/task_dirs.h"
#include "agent/task_user.h"
#include "api/convert.h"
#include "api/restart_budgets.h"
#include "api/task_env.h"
#include "common/logging.h"
#include "common/server_list.h"
#include "common/task_env_names.h"
#include "grpcpp/grpcpp.h"

namespace trainyard::agent {
namespace {

v1::Resource ResourceOf(const NodeInfo& info) {
  return api::ToProto(core::Resource{.memory_mb = info.memory_mb,
                                     .vcores_milli = info.vcores_milli,
                                     .gpus = info.topology.gpu_count(),
                                     .gpu_mask = info.topology.all().bits(),
                                     .ports = info.port_range});
}

v1::TaskState ToProto(TaskState s) {
  switch (s) {
    case TaskState::kPending: return v1::TASK_PENDING;
    case TaskState::kLaunching: return v1::TASK_LAUNCHING;
    case TaskState::kRunning: return v1::TASK_RUNNING;
    case TaskState::kSucceeded: return v1::TASK_SUCCEEDED;
    case TaskState::kFailed: return v1::TASK_FAILED;
    case TaskState::kKilled: return v1::TASK_KILLED;
    case TaskState::kRestarting: return v1::TASK_RESTARTING;
  }
  return v1::TASK_STATE_UNSPECIFIED;
}

RestartPolicy ToAgent(v1::RestartPolicy p) {
  switch (p) {
    case v1::RESTART_ON_FAILURE: return RestartPolicy::kOnFailure;
    case v1::RESTART_ALWAYS: return RestartPolicy::kAlways;
    default: return RestartPolicy::kNever;
  }
}

}  // namespace

v1::TaskStatus ToProto(const TaskStatus& s, absl::Time now) {
  v1::TaskStatus p;
  p.set_job(s.key.job);
  p.set_role(s.key.role);
  p.set_index(s.key.index);
  p.set_attempt(s.attempt);
  p.set_state(ToProto(s.state));
  p.set_pid(s.pid);
  p.set_restart_count(s.restarts);
  if (s.launch_attempt >= 0) p.set_launch_attempt(s.launch_attempt);
  p.set_node_fault(s.node_fault);
  p.set_gpus_held(s.gpus_held);
  p.set_job_id(s.job_id);
  p.set_time_unix_ms(absl::ToUnixMillis(now));
  v1::EnforcedLimits* l = p.mutable_limits();
  l->set_memory_mb(s.limits.memory_mb);
  l->set_memory_by(s.limits.memory_by);
  l->set_vcores_milli(s.limits.vcores_milli);
  l->set_cpu_by(s.limits.cpu_by);
  l->set_pids_max(s.limits.pids_max);
  l->set_pids_by(s.limits.pids_by);
  l->set_why_not(s.limits.why_not);
  if (s.has_exit) {
    p.mutable_exit()->set_exit_code(s.exit.exit_code);
    p.mutable_exit()->set_signal(s.exit.signal);
    p.mutable_exit()->set_oom_killed(s.exit.oom_killed);
    p.mutable_exit()->set_message(s.exit.message.empty() ? s.message : s.exit.message);
    if (s.state != TaskState::kKilled) {
      v1::AttemptClass c = api::ClassOfExit(p.exit(), s.exit.launch_failed);
      // An attempt stopped as a failure (its job master found it hung) may
      // have exited 0 on its SIGTERM: still the program's failure.
      if (c == v1::ATTEMPT_SUCCEEDED && s.state != TaskState::kSucceeded) c = v1::ATTEMPT_FAILED;
      p.set_attempt_class(c);
    }
  } else if (!s.message.empty()) {
    p.mutable_exit()->set_message(s.message);
  }
  return p;
}

v1::NodeInfo ToProto(const NodeInfo& info) {
  v1::NodeInfo n;
  n.set_name(info.name);
  n.set_address(info.address);
  n.set_rack(info.rack);
  n.set_data_center(info.data_center);
  for (const auto& [k, v] : info.labels) (*n.mutable_labels())[k] = v;
  *n.mutable_capacity() = ResourceOf(info);
  *n.mutable_topology() = api::ToProto(info.topology);
  n.set_excluded_gpus(info.excluded_gpus.bits());
  // One model per node: the scheduler matches a task's gpuModel against it.
  // Where GPUs differ, the first one's stands; memory is the smallest GPU's,
  // so a share's GPU memory fits whichever GPU it gets.
  if (!info.gpus.empty()) {
    n.set_gpu_model(info.gpus.front().model);
    int64_t memory = info.gpus.front().memory_total_mb;
    for (const GpuInfo& g : info.gpus) memory = std::min(memory, g.memory_total_mb);
    n.set_gpu_memory_mb(std::max<int64_t>(memory, 0));
  }
  for (const auto& p : info.ephemeral_ports.ranges()) {
    auto* pr = n.add_ephemeral_ports();
    pr->set_begin(p.begin);
    pr->set_end(p.end);
  }
  n.set_oci_runtime(info.oci_runtime);
  n.set_state(v1::NODE_READY);
  return n;
}

std::string TaskDir(const std::string& data_dir, const TaskKey& key) {
  return absl::StrCat(data_dir, "/work/", key.Place());
}

namespace {

// Writes `content` to task_dir/name for the task's account. The task owns
// its directory and may have left anything there (a link to /etc/shadow
// under the temporary's name, say), so the agent, root, never opens or
// changes a path a task can swap: the temporary is made anew (O_EXCL,
// O_NOFOLLOW), given the directory's owner through its descriptor, and
// then renamed over the name (which replaces a link, never follows it), so
// a task reading the file never sees half of it either.
absl::Status WriteTaskFile(const std::string& task_dir, const std::string& name, const std::string& content) {
  std::string path = task_dir + "/" + name, tmp = path + ".tmp";
  struct stat dir;
  if (stat(task_dir.c_str(), &dir) != 0) return absl::InternalError(absl::StrCat("task dir ", task_dir, " is gone"));
  unlink(tmp.c_str());  // whatever was left there: a link goes, not its target
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  bool ok = true;
  for (size_t done = 0; ok && done < content.size();) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  // Without the right (the agent is not root) the file stays the agent's,
  // which is then the task's account too.
  if (ok && geteuid() == 0 && fchown(fd, dir.st_uid, dir.st_gid) != 0) ok = false;
  if (close(fd) != 0) ok = false;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteTaskFiles(const std::string& task_dir, const google::protobuf::Map<std::string, std::string>& files) {
  std::error_code ec;
  std::filesystem::create_directories(task_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("task dir ", task_dir, ": ", ec.message()));
  for (const auto& [name, content] : files) {
    if (name.find('/') != std::string::npos || name.empty() || name[0] == '.') {
      return absl::InvalidArgumentError(absl::StrCat("files: '", name, "' is not a plain file name"));
    }
    if (absl::Status st = WriteTaskFile(task_dir, name, content); !st.ok()) return st;
  }
  return absl::OkStatus();
}

namespace {
// This agent's own binary (`trainyard`), which a task may run as a tool
// (`trainyard rsh`); "trainyard" (looked up on PATH) when /proc says nothing.
const std::string& SelfBinary() {
  static const std::string* path = [] {
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return new std::string(ec ? "trainyard" : self.string());
  }();
  return *path;
}
}  // namespace

absl::StatusOr<TaskLaunch> ToTaskLaunch(const v1::TaskSpec& spec, const std::string& data_dir) {
  if (absl::Status st = CheckLaunchOrder(spec); !st.ok()) return st;
  TaskLaunch l;
  l.key = KeyOf(spec);
  l.job_id = spec.job_id();
  auto user = spec.env().find(kTaskUserEnv);
  if (user != spec.env().end()) l.user = user->second;
  l.worker_id = spec.worker_id();
  l.attempt = spec.attempt();
  l.command.assign(spec.command().begin(), spec.command().end());
  if (absl::Status st = l.key.Validate(); !st.ok()) return st;
  std::string task_dir = TaskDir(data_dir, l.key);
  if (absl::Status st = WriteTaskFiles(task_dir, spec.files()); !st.ok()) return st;
  for (const auto& [k, v] : spec.env()) {
    l.env[k] = absl::StrReplaceAll(v, {{"${TRAINYARD_TASK_DIR}", task_dir}, {api::kTrainyardBinRef, SelfBinary()}});
  }
  l.env[kTaskDirEnv] = task_dir;
  l.working_dir = spec.working_dir().empty() ? task_dir : spec.working_dir();
  l.gpus = core::GpuSet(spec.allocation().gpu_mask());
  l.gpu_milli = spec.allocation().gpu_milli();
  l.gpu_memory_mb = spec.allocation().gpu_memory_mb();
  for (const auto& r : spec.allocation().ports()) {
    if (r.begin() >= core::kMinPort && r.begin() <= r.end() && r.end() <= core::kMaxPort) l.ports.Add({r.begin(), r.end()});
  }
  auto ckpt = spec.env().find(kCheckpointDirEnv);
  if (ckpt != spec.env().end()) {
    l.checkpoint_dir = ckpt->second;
    std::error_code ec;
    std::filesystem::create_directories(l.checkpoint_dir, ec);
    if (ec || access(l.checkpoint_dir.c_str(), W_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint dir ", l.checkpoint_dir, " cannot be written",
                                                        ec ? ": " + ec.message() : ""));
    }
  }
  l.memory_limit_mb = spec.allocation().memory_mb();
  l.vcores_milli = spec.allocation().vcores_milli();
  l.restart_policy = ToAgent(spec.restart_policy());
  l.max_restarts = spec.max_restarts();
  if (spec.has_oom_max_restarts()) l.oom_max_restarts = spec.oom_max_restarts();
  if (spec.kill_grace_ms() > 0) l.kill_grace = absl::Milliseconds(spec.kill_grace_ms());
  if (spec.backoff_initial_ms() > 0) l.backoff_initial = absl::Milliseconds(spec.backoff_initial_ms());
  return l;
}

ServerLink::ServerLink(ServerLinkOptions options) : options_(std::move(options)) {
  // Made here, not at Start: task statuses (OnTaskStatus) may come first.
  // Orders come only once Start has set core_.
  exec_ = std::make_unique<TaskExec>([this](const TaskKey& key) { return core_->supervisor().ExecTargetOf(key); },
                                     TaskExecOptions{},
                                     [this](const ExecPiece& piece) { return WriteExecPiece(piece); });
  creds_ = grpc::InsecureChannelCredentials();
  if (!options_.ca_pem.empty()) {
    creds_ = grpc::SslCredentials({.pem_root_certs = options_.ca_pem,
                                   .pem_private_key = options_.key_pem,
                                   .pem_cert_chain = options_.cert_pem});
  }
  Dial(options_.server);
}

void ServerLink::Dial(const std::string& servers) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A list of servers (an etcd store's leader and standbys): one target
  // that stays on whichever answers; TLS names are checked against the
  // first address's host, as given. pick_first, unlike the CLI's
  // round_robin: it stops dialing once connected, where round_robin would
  // have every agent dial every standby's refused port once a second for
  // as long as it runs.
  std::string target = servers;
  if (absl::StatusOr<std::string> list = ServerListTarget(servers); list.ok() && *list != target) {
    target = *list;
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, options_.server.substr(0, options_.server.find(',')));
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kServerListConnectTimeoutMs);
    // A leader cut off or paused answers nothing and closes nothing: a ping
    // unanswered for 3 s ends the stream, and the agent moves to the next
    // server. (The server allows a ping a second: CommonListenerOptions.)
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kServerListKeepaliveMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kServerListKeepaliveTimeoutMs);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  dialing_ = servers;
  channel_ = grpc::CreateCustomChannel(target, creds_, args);
  stub_ = v1::AgentChannel::NewStub(channel_);
}

ServerLink::~ServerLink() { Stop(); }

void ServerLink::Start(AgentCore* core) {
  core_ = core;
  node_name_ = core->node_info().name;
  pusher_ = std::make_unique<LogPusher>(&core->logs(), LogPusherOptions{.max_subscriptions = options_.max_log_subscriptions},
                                        [this](const LogPiece& piece) { return WriteLogPiece(piece); });
  launches_ = std::make_unique<LaunchQueue>(
      options_.launch_workers, [this](const v1::TaskSpec& spec) { StartLaunch(spec); },
      [this](const v1::TaskSpec& spec, bool started) { CancelLaunch(spec, started); });
  thread_ = std::thread([this] { Run(); });
  // A GPU fault goes out as the driver logs it, not at the next beat.
  if (GpuHealth* health = core->gpu_health()) {
    health_watch_ = std::make_unique<GpuHealthWatch>(health, options_.clock, [this] { BeatSoon(); });
  }
}

void ServerLink::BeatSoon() {
  absl::MutexLock lock(&mu_);
  beat_soon_ = true;
  cv_.SignalAll();
}

void ServerLink::Stop() {
  health_watch_.reset();  // it calls BeatSoon
  stopping_ = true;
  {
    absl::MutexLock lock(&mu_);
    if (context_) context_->TryCancel();
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  launches_.reset();  // launches not yet started are dropped; the server resends or ends them
  pusher_.reset();
  exec_->Shutdown();  // commands run in tasks end with the link; nothing more is sent
}

bool ServerLink::AnnounceStop(const std::string& reason) {
  v1::AgentMessage msg;
  msg.mutable_draining()->set_reason(reason);
  bool announced = connected_ && Write(msg);
  // Launches read but not yet started are not started; those being started
  // are killed once they are in the supervisor (its KillAll may come first).
  if (launches_) launches_->CancelAll(/*kill_started=*/true);
  return announced;
}

bool ServerLink::WaitDrained(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (!drained_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  return drained_;
}

void ServerLink::Run() {
  absl::Duration backoff = options_.backoff_initial;
  while (!stopping_) {
    // The server last reached goes last: once it went silent (paused, cut
    // off), pick_first would try it first and wait out its connect timeout
    // before the leader that took over.
    if (std::string order = ServerListWithLast(options_.server, dialed_); order != dialing_) {
      Log(LogLevel::kInfo, "agent", "trying the servers in the order %s", order);
      Dial(order);
    }
    if (Session()) backoff = options_.backoff_initial;
    if (stopping_) break;
    absl::Time retry_at = absl::Now() + backoff;  // real time: paces reconnects
    absl::MutexLock lock(&mu_);
    while (!stopping_ && !cv_.WaitWithDeadline(&mu_, retry_at)) {
    }
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

bool ServerLink::Write(const v1::AgentMessage& msg, int64_t session) {
  absl::MutexLock wl(&write_mu_);
  return WriteLocked(msg, session);
}

bool ServerLink::WriteLocked(const v1::AgentMessage& msg, int64_t session) {
  grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>* stream;
  {
    absl::MutexLock lock(&mu_);
    if (session >= 0 && session != session_) return false;
    stream = stream_;
  }
  return stream && stream->Write(msg);
}

void ServerLink::OnTaskStatus(const TaskStatus& status) {
  // Commands run in the attempt end with it (where no cgroup ends them).
  if (status.state != TaskState::kRunning) exec_->TaskEnded(status.key);
  v1::AgentMessage msg;
  *msg.mutable_status() = ToProto(status, options_.clock->Now());
  bool direct;
  {
    // An end is repeated in heartbeats too: a report lost on a broken
    // stream, or with a server that died before writing it, still arrives.
    absl::MutexLock lock(&mu_);
    direct = link_.OnStatus(msg, IsFinal(status.state));
  }
  if (direct && !Write(msg)) {
    absl::MutexLock lock(&mu_);
    link_.WriteFailed(std::move(msg));
  }
  // An ended task's report is on its way (or buffered): the supervisor need
  // not keep it; its logs stay on disk. Forget can only find it gone (a
  // refused launch was never in the supervisor): nothing is left to drop.
  if (IsFinal(status.state) && core_) core_->supervisor().Forget(status.key).IgnoreError();
}

bool ServerLink::ReachServer() {
  bool reached = false;
  for (int i = 0; i < 20 && !stopping_ && !reached; ++i) {
    reached = channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::milliseconds(250));
  }
  if (!reached && !stopping_) {
    Log(LogLevel::kWarning, "agent",
        "cannot reach the server's agent listener at %s yet%s (by default the port above the server's --listen; "
        "else give --agent-server); retrying",
        options_.server,
        options_.ca_pem.empty() ? " (plaintext: a server that serves TLS needs --ca, --cert and --key)"
                                : " (TLS: its certificate must be signed by --ca, and this node's by its CA)");
  }
  return reached;
}

v1::AgentMessage ServerLink::Registration() {
  v1::AgentMessage reg;
  *reg.mutable_register_() = ToProto(core_->node_info());
  for (v1::GpuFault& f : core_->GpuFaults()) *reg.mutable_register_()->add_gpu_faults() = std::move(f);
  // So the server's first round after registration already skips them.
  if (absl::StatusOr<core::PortRanges> in_use = core_->PortsInUse(); in_use.ok()) {
    for (const auto& p : in_use->ranges()) {
      auto* pr = reg.mutable_register_()->add_ports_in_use();
      pr->set_begin(p.begin);
      pr->set_end(p.end);
    }
  }
  return reg;
}

void ServerLink::Accepted(const v1::Registered& registered) {
  // "" (a server that cannot tell, or a stream on a connection it knew
  // already): the last address known stays.
  if (!registered.reached_address().empty()) dialed_ = registered.reached_address();
  Log(LogLevel::kInfo, "agent", "registered with %s as %s%s", options_.server, registered.node(),
      registered.reached_address().empty() ? ""
                                           : absl::StrCat(" (reached at ", registered.reached_address(), ")"));
  // Replay what happened while away, then the live state. Connected first:
  // a status from now on is written at once, one from before is in the
  // buffer, which is drained until empty.
  {
    absl::MutexLock lock(&mu_);
    link_.Registered();
  }
  connected_ = true;
  for (;;) {
    std::deque<v1::AgentMessage> replay;
    {
      absl::MutexLock lock(&mu_);
      replay = link_.TakeReplay();
    }
    if (replay.empty()) return;
    while (!replay.empty() && Write(replay.front())) replay.pop_front();
    if (!replay.empty()) {  // the stream broke: keep the rest, in order
      absl::MutexLock lock(&mu_);
      link_.ReplayBroke(std::move(replay));
      return;
    }
  }
}

bool ServerLink::Session() {
  // Say so when the server cannot be reached (the stream below would wait
  // for it silently).
  if (!ReachServer()) return false;
  grpc::ClientContext ctx;
  // Wait for the channel to connect (it retries with its own backoff, at
  // most 1 s apart) instead of failing at once while the server restarts:
  // a returning server then hears from its nodes within about a second.
  ctx.set_wait_for_ready(true);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    context_ = &ctx;
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream = stub_->Connect(&ctx);
  int64_t session;
  {
    absl::MutexLock lock(&mu_);
    stream_ = stream.get();
    session = ++session_;
  }
  v1::ServerMessage msg;
  bool accepted = false;
  std::thread heartbeats;
  if (Write(Registration()) && stream->Read(&msg) && msg.has_registered()) {
    accepted = true;
    Accepted(msg.registered());
    heartbeats = std::thread([this, registered = msg.registered(), session] { Heartbeats(registered, session); });
    while (!stopping_ && stream->Read(&msg)) Handle(msg);
  } else if (msg.has_error()) {
    Log(LogLevel::kError, "agent", "the server refused this node: %s", msg.error());
  }
  EndSession(session, heartbeats);
  {
    absl::MutexLock wl(&write_mu_);
    ctx.TryCancel();
  }
  grpc::Status st = stream->Finish();
  {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
  }
  if (!stopping_) {
    Log(LogLevel::kWarning, "agent", "stream to %s ended: %s; reconnecting", options_.server,
        st.ok() ? "closed by the server" : st.error_message());
  }
  return accepted;
}

void ServerLink::EndSession(int64_t session, std::thread& heartbeats) {
  {
    // Before connected_: from here a status waits for the next stream.
    absl::MutexLock lock(&mu_);
    link_.Disconnected();
  }
  connected_ = false;
  {
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
    ++session_;
    cv_.SignalAll();
  }
  // The server that asked for them is gone with the stream; one that comes
  // back asks again.
  pusher_->CancelAll();
  exec_->DropTag(static_cast<uint64_t>(session));
  if (heartbeats.joinable()) heartbeats.join();
}

void ServerLink::AddTasks(v1::Heartbeat* hb, int64_t session, absl::Time now) {
  // The list is taken with write_mu_ held, so the heartbeat leaves after
  // every status written before it was taken and before any written after:
  // the stream's order is the order things happened here. Launches in
  // flight first, then the supervisor's tasks: a launch moves from the
  // first to the second (it is in the supervisor before it leaves the
  // queue), so no launch read from the server is ever missing from the
  // list (docs/agent.md, "Launches and heartbeats").
  for (const TaskStatus& t : launches_->InFlight()) *hb->add_tasks() = ToProto(t, now);
  for (const TaskStatus& t : core_->supervisor().Snapshot()) {
    // An end not yet reported goes as it is (the server takes an end in a
    // heartbeat as its report); once reported it is in link_'s recent ends.
    *hb->add_tasks() = ToProto(t, now);
  }
  // Each end goes in the heartbeats of every session for a while
  // (api::LinkState::kRepeatEndsFor) from its first heartbeat there.
  absl::MutexLock lock(&mu_);
  link_.AddRecentEnds(session, now, hb);
}

void ServerLink::Handle(const v1::ServerMessage& msg) {
  switch (msg.msg_case()) {
    case v1::ServerMessage::kLaunch:
      HandleLaunch(msg.launch());
      break;
    case v1::ServerMessage::kKill:
      HandleKill(msg.kill());
      break;
    case v1::ServerMessage::kReadLog:
      if (msg.read_log().window_bytes() > 0) {
        SubscribeLog(msg.read_log());
      } else {
        HandleLogRead(msg.read_log());
      }
      break;
    case v1::ServerMessage::kAckLog:
      pusher_->Ack(msg.ack_log().request_id(), msg.ack_log().offset());
      break;
    case v1::ServerMessage::kCancelLog:
      pusher_->Cancel(msg.cancel_log().request_id());
      break;
    case v1::ServerMessage::kExecOpen:
      OpenExec(msg.exec_open());
      break;
    case v1::ServerMessage::kExecInput: {
      const v1::ExecInput& in = msg.exec_input();
      uint64_t tag;
      {
        absl::MutexLock lock(&mu_);
        tag = static_cast<uint64_t>(session_);
      }
      exec_->Feed(ExecFeed{.id = in.request_id(),
                           .data = in.data(),
                           .eof = in.eof(),
                           .rows = in.rows(),
                           .cols = in.cols(),
                           .acked = in.acked(),
                           .close = in.close()},
                  tag);
      break;
    }
    case v1::ServerMessage::kUpdateFiles: {
      const v1::TaskFiles& f = msg.update_files();
      TaskKey key{f.job(), f.role(), f.index(), f.job_id()};
      if (absl::Status st = key.Validate(); !st.ok()) {
        Log(LogLevel::kWarning, "agent", "updating files of %s/%s-%d: %s", f.job(), f.role(), f.index(),
            std::string(st.message()));
        break;
      }
      // A launch of the task in flight writes its files too: the update
      // goes after it (the launch's are older), never beside it.
      auto write = [this, key, files = f.files()] {
        absl::Status st = WriteTaskFiles(TaskDir(core_->data_dir(), key), files);
        if (!st.ok()) Log(LogLevel::kWarning, "agent", "updating files of %s: %s", key.ToString(), std::string(st.message()));
      };
      if (!launches_->AfterLaunch(key, write)) write();
      break;
    }
    case v1::ServerMessage::kDrained: {
      absl::MutexLock lock(&mu_);
      drained_ = true;
      cv_.SignalAll();
      break;
    }
    case v1::ServerMessage::kError:
      Log(LogLevel::kError, "agent", "server: %s", msg.error());
      break;
    default:
      break;
  }
}

void ServerLink::HandleKill(const v1::KillTask& kill) {
  TaskKey asked{kill.job(), kill.role(), kill.index(), kill.job_id()};
  // A kill that overtook its task's launch (still queued, or being started):
  // the queue drops or kills it. A failed attempt is one that runs.
  if (!kill.fail_attempt() && launches_->Cancel(asked)) return;
  TaskKey key = core_->supervisor().Holding(asked);
  absl::Status st = kill.fail_attempt() ? core_->supervisor().FailAttempt(key, kill.attempt(), kill.reason())
                                        : core_->Kill(key);
  if (!st.ok() && st.code() != absl::StatusCode::kNotFound) {
    Log(LogLevel::kWarning, "agent", "kill %s: %s", key.ToString(), std::string(st.message()));
  }
}

void ServerLink::HandleLaunch(const v1::TaskSpec& order) { launches_->Push(order); }

namespace {
// The end of an ordered task that never started (exit code -1, `why`).
TaskStatus EndedBeforeStart(const v1::TaskSpec& spec, TaskState state, std::string why) {
  TaskStatus ended;
  ended.key = KeyOf(spec);
  ended.state = state;
  ended.attempt = spec.attempt();
  ended.launch_attempt = spec.attempt();
  ended.job_id = spec.job_id();
  ended.has_exit = true;
  ended.exit.exit_code = -1;
  ended.exit.message = std::move(why);
  return ended;
}
}  // namespace

void ServerLink::CancelLaunch(const v1::TaskSpec& spec, bool started) {
  if (started) {
    // It reached the supervisor after its kill: it stops now, and its end
    // is reported as any kill's.
    absl::Status st = core_->Kill(KeyOf(spec));
    if (!st.ok() && !absl::IsNotFound(st)) {
      Log(LogLevel::kWarning, "agent", "kill %s: %s", KeyOf(spec).ToString(), std::string(st.message()));
    }
    return;
  }
  OnTaskStatus(EndedBeforeStart(spec, TaskState::kKilled, "killed before it started"));
}

absl::Status ServerLink::PrepareImage(const v1::TaskSpec& spec, TaskLaunch* launch) {
  // The node's shortcomings (FailedPrecondition): the server places the task
  // on another node.
  if (core_->node_info().oci_runtime.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("image ", spec.image(), ": this node has no OCI runtime (install runc or crun)"));
  }
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("image ", spec.image(), ": tasks with an image need an agent that runs as root"));
  }
  // The account the task will run as, when the agent switches to one.
  std::optional<TaskAccount> account;
  if (core_->users().switching()) {
    absl::StatusOr<TaskAccount> resolved = core_->users().Resolve(launch->user);
    if (!resolved.ok()) return absl::InvalidArgumentError(resolved.status().message());
    account = *resolved;
  }
  // The node reads the image and mounts the volumes as root: only what the
  // task's account reaches, by the real paths checked (a link swapped in
  // since is not followed).
  std::vector<BundleMount> volumes;
  for (const v1::Volume& v : spec.volumes()) {
    if (std::string why = api::VolumeProblem(v); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("volume ", v.host_path(), ": ", why));
    }
    std::string source = v.host_path();
    if (account) {
      absl::StatusOr<std::string> real = CheckReadableBy(v.host_path(), *account);
      if (!real.ok()) return absl::InvalidArgumentError(absl::StrCat("volume ", v.host_path(), ": ", real.status().message()));
      source = *real;
    } else if (access(v.host_path().c_str(), F_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("volume ", v.host_path(), ": ", strerror(errno)));
    }
    volumes.push_back({source, v.path(), v.read_only()});
  }
  absl::StatusOr<api::ImageRef> ref = api::ParseImageRef(spec.image());
  if (!ref.ok()) return absl::InvalidArgumentError(absl::StrCat("image: ", ref.status().message()));
  std::string ref_text = spec.image();
  if (account && ref->source != api::ImageSource::kRegistry) {
    absl::StatusOr<std::string> real = CheckReadableBy(ref->path, *account);
    if (real.ok() && ref->source == api::ImageSource::kLayout) {
      if (absl::StatusOr<std::string> index = CheckReadableBy(*real + "/index.json", *account); !index.ok()) {
        real = index.status();
      }
    }
    if (!real.ok()) return absl::InvalidArgumentError(absl::StrCat("image ", spec.image(), ": ", real.status().message()));
    ref_text = absl::StrCat(ref->source == api::ImageSource::kLayout ? "oci:" : "oci-archive:", *real, ":", ref->tag);
  }
  absl::StatusOr<PreparedImage> image = core_->images().Prepare(ref_text, account ? &*account : nullptr);
  if (!image.ok()) return image.status();
  TaskImage& i = launch->image.emplace();
  i.ref = spec.image();
  i.digest = image->digest;
  i.rootfs = image->rootfs;
  i.env = image->env;
  i.volumes = std::move(volumes);
  if (launch->command.empty()) {
    launch->command = image->entrypoint;
    launch->command.insert(launch->command.end(), image->cmd.begin(), image->cmd.end());
  }
  if (spec.working_dir().empty() && !image->working_dir.empty()) launch->working_dir = image->working_dir;
  return absl::OkStatus();
}

void ServerLink::StartLaunch(const v1::TaskSpec& order) {
  const v1::TaskSpec* with_ca = &order;
  v1::TaskSpec copy;
  if (!options_.ca_pem.empty()) {
    // The cluster's CA (public) for a task that calls the server: a job
    // master verifies it with this. A copy in the task's own directory, so
    // the task's account can read it wherever the agent keeps its own.
    copy = order;
    (*copy.mutable_files())[kTaskCaFile] = options_.ca_pem;
    (*copy.mutable_env())[kCaFileEnv] = absl::StrCat("${TRAINYARD_TASK_DIR}/", kTaskCaFile);
    with_ca = &copy;
  }
  const v1::TaskSpec& spec = *with_ca;
  // Its work dir is not reclaimed while the launch writes its files there.
  Supervisor::PlaceHold hold(&core_->supervisor(), KeyOf(spec).Place());
  // Its peers must resolve here, or it would wait on them for as long as its
  // framework waits: it fails now, with the address that does not.
  auto hosts = spec.files().find("hosts");
  absl::Status st = hosts == spec.files().end() ? absl::OkStatus()
                                                : CheckPeerAddresses(hosts->second, core_->node_info().name);
  absl::StatusOr<TaskLaunch> launch = st.ok() ? ToTaskLaunch(spec, core_->data_dir()) : st;
  if (launch.ok() && !spec.image().empty()) st = PrepareImage(spec, &*launch);
  if (st.ok()) st = launch.ok() ? core_->Launch(*launch) : launch.status();
  if (st.ok()) return;
  if (absl::IsAlreadyExists(st)) {
    // The server sent a launch again that did reach us (it had not heard of
    // the task yet): the task runs; nothing to report.
    Log(LogLevel::kInfo, "agent", "launch %s/%s-%d: %s", spec.job(), spec.role(), spec.index(),
        std::string(st.message()));
    return;
  }
  Log(LogLevel::kWarning, "agent", "launch %s/%s-%d refused: %s", spec.job(), spec.role(), spec.index(),
      std::string(st.message()));
  TaskStatus failed =
      EndedBeforeStart(spec, TaskState::kFailed, absl::StrCat("the agent could not start it: ", st.message()));
  // A bad order (InvalidArgument) is the task's; anything else (a file or
  // directory that cannot be written, GPUs the agent has as taken) is the
  // node's, and the server places the task elsewhere.
  failed.node_fault = !absl::IsInvalidArgument(st);
  failed.gpus_held = Supervisor::GpusHeld(st);
  OnTaskStatus(failed);
}

}  // namespace trainyard::agent
