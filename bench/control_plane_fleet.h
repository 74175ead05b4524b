// Helpers of the control-plane benchmark (bench/control_plane_bench.cc): a
// `trainyard server` run as a child process (its address parsed from its
// output, its CPU time read from /proc/PID/stat), and a fleet of simulated
// node agents in this process, each over its own gRPC channel and its own
// bidirectional AgentChannel stream. A simulated agent registers an 8-GPU
// node, answers each launch order at once with TASK_RUNNING, reports
// TASK_SUCCEEDED a configurable time later, and heartbeats on an interval:
// deltas as a real agent sends them (agent/heartbeat_delta.h), with a beat
// that says nothing new left out until the server's quiet interval, unless
// FleetOptions.full_heartbeats.
// Streams are driven by gRPC's callback API plus one timer thread, so a
// thousand agents need a handful of threads.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/heartbeat_delta.h"
#include "proto/service.grpc.pb.h"

namespace trainyard::bench {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

inline double SecondsBetween(SteadyTime a, SteadyTime b) {
  return std::chrono::duration<double>(b - a).count();
}

// A temporary directory removed with everything in it when this goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  // Empty when the directory could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// utime + stime of a process in seconds, from /proc/PID/stat; -1 when it
// cannot be read.
inline double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  double ticks = 0;
  // Fields after "(comm)": state is field 3; utime and stime are 14 and 15.
  for (int i = 3; i <= 15 && (fields >> field); ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A `trainyard` child process with its own scratch directory. Output goes
// to DIR/out.log; Start waits for a line holding `marker` and takes what
// follows it as the address. Stopped with SIGTERM (SIGKILL after 10 s).
class ChildProcess {
 public:
  // `args` after the binary; "{DIR}" in them becomes the scratch directory.
  ChildProcess(std::string binary, std::vector<std::string> args, std::string marker)
      : binary_(std::move(binary)), args_(std::move(args)), marker_(std::move(marker)),
        dir_("trainyard_cp_bench") {}
  ~ChildProcess() { Stop(); }

  // Starts it and waits up to 60 s for its address. Returns false (with its
  // output on stderr) when it does not come up.
  bool Start() {
    if (dir_.path().empty()) return false;
    log_ = dir_.path() + "/out.log";
    std::vector<std::string> args = {binary_};
    for (std::string a : args_) {
      size_t at = a.find("{DIR}");
      if (at != std::string::npos) a.replace(at, 5, dir_.path());
      args.push_back(a);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execv(binary_.c_str(), argv.data());
      _exit(127);
    }
    SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (SteadyClock::now() < deadline) {
      std::ifstream in(log_);
      std::string line;
      while (std::getline(in, line)) {
        size_t at = line.find(marker_);
        if (at != std::string::npos) {
          address_ = line.substr(at + marker_.size());
          address_ = address_.substr(0, address_.find_first_of(", "));
          fprintf(stderr, "control_plane_bench: %s pid %d on %s, output in %s\n", args_[0].c_str(),
                  static_cast<int>(pid_), address_.c_str(), log_.c_str());
          return true;
        }
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    fprintf(stderr, "control_plane_bench: `%s %s` did not come up; its output (%s):\n", binary_.c_str(),
            args_[0].c_str(), log_.c_str());
    std::ifstream in(log_);
    fprintf(stderr, "%s\n", std::string(std::istreambuf_iterator<char>(in), {}).c_str());
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(10);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (SteadyClock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }

  double CpuSeconds() const { return pid_ > 0 ? ProcessCpuSeconds(pid_) : -1; }
  // What follows `marker` on the first output line holding it, up to a
  // space, comma or '/' ("" when no line holds it).
  std::string FindInOutput(const std::string& marker) const {
    std::ifstream in(log_);
    std::string line;
    while (std::getline(in, line)) {
      size_t at = line.find(marker);
      if (at == std::string::npos) continue;
      std::string rest = line.substr(at + marker.size());
      return rest.substr(0, rest.find_first_of(", /"));
    }
    return "";
  }
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  // The scratch directory ("{DIR}" in the arguments).
  const std::string& dir() const { return dir_.path(); }

 private:
  std::string binary_;
  std::vector<std::string> args_;
  std::string marker_;
  ScratchDir dir_;
  std::string log_;
  std::string address_;
  pid_t pid_ = -1;
};

// How the benchmark's `trainyard server` runs.
struct ServerProcessOptions {
  std::string log_level = "info";
  bool group_commit = true;  // false: --no-group-commit
  bool http = false;         // serve the REST API and /metrics on a free port too
  std::string tls_dir;       // non-empty: --tls-dir (TLS, agents present node certificates)
  // False: --no-auth (every caller an admin). True: the server requires a
  // bearer token from its token file (DATA_DIR/tokens, ServerDataDir).
  bool authentication = false;
  std::vector<std::string> extra_args;
};

// `trainyard server` on a free port with its data in the scratch directory
// (ServerDataDir): fsync on (the default), no job masters.
inline std::unique_ptr<ChildProcess> ServerProcess(const std::string& binary, const ServerProcessOptions& o) {
  std::vector<std::string> args = {"server", "--listen", "127.0.0.1:0", "--data-dir", "{DIR}/data", "--no-jobmaster",
                                   "--log-level", o.log_level};
  if (!o.authentication) args.push_back("--no-auth");
  if (!o.group_commit) args.push_back("--no-group-commit");
  if (o.http) args.insert(args.end(), {"--http-listen", "127.0.0.1:0"});
  if (!o.tls_dir.empty()) args.insert(args.end(), {"--tls-dir", o.tls_dir});
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  return std::make_unique<ChildProcess>(binary, args, "listening on ");
}

// The --data-dir of a ServerProcess (it exists once something is written
// there, e.g. a token file before Start).
inline std::string ServerDataDir(const ChildProcess& server) { return server.dir() + "/data"; }

struct FleetOptions {
  int agents = 2;
  int heartbeat_ms = 1000;   // 0: no heartbeats
  int task_ms = 1000;        // RUNNING .. SUCCEEDED
  bool channel_per_agent = true;
  // TLS: the credentials of agent i's channel (its node's certificate names
  // "sim-i"); unset = plaintext. Needs channel_per_agent.
  std::function<std::shared_ptr<grpc::ChannelCredentials>(int agent)> credentials;
  // Every heartbeat a full report (as agents before delta heartbeats sent
  // them), whatever the server takes.
  bool full_heartbeats = false;
};

// What the fleet saw, for the figures.
struct FleetCounters {
  std::atomic<int64_t> registered{0};
  std::atomic<int64_t> launches{0};
  std::atomic<int64_t> heartbeats{0};
  std::atomic<int64_t> statuses{0};
  std::atomic<int64_t> errors{0};
};

class Fleet;

// One simulated agent: one stream, writes queued and sent one at a time.
class SimAgent final : public grpc::ClientBidiReactor<v1::AgentMessage, v1::ServerMessage> {
 public:
  SimAgent(Fleet* fleet, int id) : fleet_(fleet), id_(id) {}

  void Start(v1::AgentChannel::Stub* stub);
  // Queues a message; dropped once the stream is closing.
  void Send(v1::AgentMessage msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    out_.push_back(std::move(msg));
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }
  // Sends a heartbeat unless it is a quiet one to leave out; whether sent.
  bool Heartbeat();
  // How long until a beat goes whatever it says (HeartbeatDelta::QuietUntil).
  std::chrono::microseconds QuietLeft() {
    std::lock_guard<std::mutex> lock(mu_);
    absl::Duration left = delta_ ? delta_->QuietUntil() - absl::Now() : absl::InfiniteDuration();
    if (left == absl::InfiniteDuration()) return std::chrono::hours(1);  // never, as far as a run goes
    return std::chrono::microseconds(absl::ToInt64Microseconds(std::max(left, absl::ZeroDuration())));
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    context_.TryCancel();
    RemoveHold();
  }
  void WaitDone() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  void TaskEnded(const v1::TaskStatus& st) {
    std::lock_guard<std::mutex> lock(mu_);
    running_.erase(absl::StrCat(st.job(), "/", st.role(), "/", st.index()));
  }
  const std::string& name() const { return name_; }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.pop_front();
    if (ok && !out_.empty() && !closing_) {
      StartWrite(&out_.front());
    } else {
      writing_ = false;
    }
  }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  Fleet* const fleet_;
  const int id_;
  std::string name_;
  grpc::ClientContext context_;
  v1::ServerMessage in_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::AgentMessage> out_;
  std::map<std::string, v1::TaskStatus> running_;  // reported in heartbeats
  std::unique_ptr<agent::HeartbeatDelta> delta_;    // made on registration
  bool writing_ = false;
  bool closing_ = false;
  bool done_ = false;
};

// The simulated agents and their timer thread (heartbeats, task ends).
class Fleet {
 public:
  // Called on a gRPC thread when an agent gets a launch order, after it
  // has queued its RUNNING report.
  using LaunchHook = std::function<void(const v1::TaskSpec&, SteadyTime received)>;

  Fleet(std::string address, FleetOptions options) : address_(std::move(address)), options_(options) {}
  ~Fleet() { Stop(); }

  void set_launch_hook(LaunchHook hook) { hook_ = std::move(hook); }

  // Connects every agent and waits up to `timeout` for all registrations.
  // Returns false when some did not register in time.
  bool Start(std::chrono::seconds timeout) {
    int channels = options_.channel_per_agent ? options_.agents : 1;
    for (int i = 0; i < channels; ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("trainyard.bench.agent", i);  // distinct args: no shared connection
      std::shared_ptr<grpc::ChannelCredentials> creds =
          options_.credentials ? options_.credentials(i) : grpc::InsecureChannelCredentials();
      stubs_.push_back(v1::AgentChannel::NewStub(grpc::CreateCustomChannel(address_, creds, args)));
    }
    for (int i = 0; i < options_.agents; ++i) {
      agents_.push_back(std::make_unique<SimAgent>(this, i));
    }
    for (int i = 0; i < options_.agents; ++i) agents_[i]->Start(stubs_[i % channels].get());
    timer_ = std::thread([this] { TimerLoop(); });
    SteadyTime deadline = SteadyClock::now() + timeout;
    while (counters_.registered.load() < options_.agents && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return counters_.registered.load() >= options_.agents;
  }

  // Starts heartbeats: agent i first at i/N of the interval, then every interval.
  void StartHeartbeats() {
    if (options_.heartbeat_ms <= 0) return;
    SteadyTime now = SteadyClock::now();
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < options_.agents; ++i) {
      auto offset = std::chrono::microseconds(int64_t{options_.heartbeat_ms} * 1000 * i / options_.agents);
      timers_.push(Timer{now + offset, i, true, {}});
    }
    cv_.notify_all();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      cv_.notify_all();
    }
    if (timer_.joinable()) timer_.join();
    for (auto& a : agents_) a->Close();
    for (auto& a : agents_) a->WaitDone();
  }

  // Called by an agent: report the task's end after options.task_ms.
  void ScheduleEnd(int agent, v1::TaskStatus end) {
    std::lock_guard<std::mutex> lock(mu_);
    timers_.push(Timer{SteadyClock::now() + std::chrono::milliseconds(options_.task_ms), agent, false,
                       std::move(end)});
    cv_.notify_all();
  }

  FleetCounters& counters() { return counters_; }
  const FleetOptions& options() const { return options_; }
  const LaunchHook& hook() const { return hook_; }

 private:
  struct Timer {
    SteadyTime when;
    int agent;
    bool heartbeat;
    v1::TaskStatus end;
    bool operator>(const Timer& o) const { return when > o.when; }
  };

  void TimerLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      if (timers_.empty()) {
        cv_.wait(lock);
        continue;
      }
      SteadyTime when = timers_.top().when;
      if (SteadyClock::now() < when) {
        cv_.wait_until(lock, when);
        continue;
      }
      Timer t = timers_.top();
      timers_.pop();
      lock.unlock();
      Fire(t);
      lock.lock();
    }
  }

  void Fire(Timer& t) {
    SimAgent& agent = *agents_[t.agent];
    if (t.heartbeat) {
      SteadyTime next = t.when + std::chrono::milliseconds(options_.heartbeat_ms);
      if (agent.Heartbeat()) {
        counters_.heartbeats++;
      } else {  // left out: the next goes when the quiet interval is up, as an agent's
        next = std::min(next, SteadyClock::now() + agent.QuietLeft());
      }
      std::lock_guard<std::mutex> lock(mu_);
      timers_.push(Timer{next, t.agent, true, {}});
      return;
    }
    t.end.set_time_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
    agent.TaskEnded(t.end);
    v1::AgentMessage msg;
    *msg.mutable_status() = std::move(t.end);
    agent.Send(std::move(msg));
    counters_.statuses++;
  }

  const std::string address_;
  const FleetOptions options_;
  LaunchHook hook_;
  FleetCounters counters_;
  std::vector<std::unique_ptr<v1::AgentChannel::Stub>> stubs_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
  std::thread timer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  bool stopping_ = false;
};

// The node every simulated agent registers: 8 GPUs on 4 PCIe switches of 2
// and 2 sockets of 4, 512 GiB, 64 vcores, ports 20000-40000.
inline v1::NodeInfo SimNodeInfo(const std::string& name) {
  v1::NodeInfo info;
  info.set_name(name);
  info.set_address("127.0.0.1");
  info.set_rack(absl::StrCat("rack-", name.size() % 4));
  v1::Resource* cap = info.mutable_capacity();
  cap->set_memory_mb(512 * 1024);
  cap->set_vcores_milli(64000);
  cap->set_gpus(8);
  v1::PortRange* ports = cap->add_ports();
  ports->set_begin(20000);
  ports->set_end(40000);
  v1::GpuTopology* topo = info.mutable_topology();
  topo->set_gpu_count(8);
  for (uint64_t sw : {0x3, 0xc, 0x30, 0xc0}) topo->add_switches(sw);
  for (uint64_t so : {0xf, 0xf0}) topo->add_sockets(so);
  return info;
}

inline void SimAgent::Start(v1::AgentChannel::Stub* stub) {
  name_ = absl::StrCat("sim-", id_);
  stub->async()->Connect(&context_, this);
  AddHold();  // writes come from the timer thread too: keep the call until Close
  v1::AgentMessage reg;
  *reg.mutable_register_() = SimNodeInfo(name_);
  Send(std::move(reg));
  StartRead(&in_);
  StartCall();
}

inline bool SimAgent::Heartbeat() {
  v1::AgentMessage msg;
  v1::Heartbeat* hb = msg.mutable_heartbeat();
  // A few ports in use as /proc/net/tcp would show on a quiet node.
  for (uint32_t port : {22u, 111u, 20000u + static_cast<uint32_t>(id_ % 1000)}) {
    v1::PortRange* r = hb->add_ports_in_use();
    r->set_begin(port);
    r->set_end(port);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, st] : running_) *hb->add_tasks() = st;
    if (delta_) {
      absl::Time now = absl::Now();
      if (delta_->Quiet(*hb, now)) return false;  // as an agent leaves out a beat with nothing new
      delta_->Apply(hb, now);
    }
  }
  Send(std::move(msg));
  return true;
}

inline void SimAgent::OnReadDone(bool ok) {
  if (!ok) return;
  if (in_.has_registered()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const v1::Registered& r = in_.registered();
      delta_ = fleet_->options().full_heartbeats
                   ? std::make_unique<agent::HeartbeatDelta>(0)
                   : std::make_unique<agent::HeartbeatDelta>(
                         r.full_heartbeat_every(), r.quiet_heartbeat_interval_ms() > fleet_->options().heartbeat_ms
                                                       ? absl::Milliseconds(r.quiet_heartbeat_interval_ms())
                                                       : absl::ZeroDuration());
    }
    fleet_->counters().registered++;
  } else if (in_.has_launch()) {
    SteadyTime received = SteadyClock::now();
    fleet_->counters().launches++;
    const v1::TaskSpec& spec = in_.launch();
    v1::TaskStatus st;
    st.set_job(spec.job());
    st.set_role(spec.role());
    st.set_index(spec.index());
    st.set_attempt(spec.attempt());
    st.set_state(v1::TASK_RUNNING);
    st.set_pid(100000 + id_);
    st.set_time_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_[absl::StrCat(st.job(), "/", st.role(), "/", st.index())] = st;
    }
    v1::AgentMessage msg;
    *msg.mutable_status() = st;
    Send(std::move(msg));
    if (fleet_->options().task_ms >= 0) {
      st.set_state(v1::TASK_SUCCEEDED);
      st.set_pid(0);
      fleet_->ScheduleEnd(id_, st);
    }
    if (fleet_->hook()) fleet_->hook()(spec, received);
  } else if (in_.has_error()) {
    fleet_->counters().errors++;
    fprintf(stderr, "control_plane_bench: agent %s refused: %s\n", name_.c_str(), in_.error().c_str());
  }
  StartRead(&in_);
}

}  // namespace trainyard::bench
