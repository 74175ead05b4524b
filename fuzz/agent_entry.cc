// The fuzz targets of the agent stream, one per side:
//  - agent_messages: what an agent (a node's certificate, or anyone who
//    joined) sends the server: AgentMessages, each as the wire carries it
//    (varint length, then the message), from node n1 to a control state
//    that has n1 and n2 registered and a job of two workers placed, and to
//    a log hub with one follower of that job's logs. Each message goes
//    where the server's AgentChannel sends it (agent_service.cc); a round
//    and the persister's writes run after each, one second apart. Task
//    resource samples go into a ResourceBook (of at most 64 tasks) and are
//    read back as the job's answer and the /metrics sums. Exec output goes
//    to an exec relay with a session open in worker 0, whose responses are
//    written as a client stream takes them.
//  - launch_order: what the server orders an agent to run (a TaskSpec as
//    the wire carries it), through the agent's own conversion and checks
//    (agent::ToTaskLaunch), in a data dir of the scratch dir; nothing is
//    started.
#include <filesystem>
#include <set>
#include <memory>
#include <string>

#include "agent/launch_order.h"
#include "agent/server_link.h"
#include "api/job_spec.h"
#include "common/check.h"
#include "common/clock.h"
#include "fuzz/entry_points.h"
#include "fuzz/fuzz_files.h"
#include "google/protobuf/io/coded_stream.h"
#include "proto/service.pb.h"
#include "server/control/control_state.h"
#include "server/exec_relay.h"
#include "server/logs/log_hub.h"
#include "server/resource_book.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"

namespace trainyard::fuzz {
namespace {

constexpr char kTwoWorkers[] = R"(
name: train
replicas:
  worker:
    count: 2
    resources: {gpus: 1, memory: 1Gi}
    command: [train]
)";

// The log hub's view of the cluster: the control state's places; what it
// sends agents is dropped.
class HubBackend final : public server::LogBackend {
 public:
  explicit HubBackend(server::ControlState* state) : state_(state) {}
  absl::StatusOr<server::JobLogPlaces> Places(const std::string& job) override { return state_->LogPlaces(job); }
  bool ReadLog(const std::string&, v1::LogRead) override { return true; }
  bool AckLog(const std::string&, v1::LogAck) override { return true; }
  bool CancelLog(const std::string&, v1::LogCancel) override { return true; }
  bool OpenExec(const std::string&, v1::ExecOpen) override { return true; }
  bool ExecInput(const std::string&, v1::ExecInput) override { return true; }

 private:
  server::ControlState* const state_;
};

class NullSink final : public server::LogSink {
 public:
  void Ready() override {}
};

class NullExecSink final : public server::ExecSink {
 public:
  void Ready() override {}
};

// One server: a control state with n1 and n2, the job placed, a hub with a
// follower.
struct Server {
  Server() : clock(now) {
    server::ServerConfig config;
    config.jobmaster_enabled = false;
    config.kill_grace_ms = 100;
    config.node_timeout_ms = 5000;
    absl::StatusOr<std::unique_ptr<core::Scheduler>> sched = core::Scheduler::Create(core::SchedulerOptions{});
    TY_CHECK(sched.ok(), "scheduler");
    state = std::make_unique<server::ControlState>(config, std::move(*sched), &backend, now);
    state->Recover(StoreSnapshot{}, {}, now);
    TY_CHECK(state->RegisterAgent(server::testing::TestNode("n1", 8), 1, now).ok(), "register n1");
    TY_CHECK(state->RegisterAgent(server::testing::TestNode("n2", 8), 2, now).ok(), "register n2");
    absl::StatusOr<v1::JobSpec> spec = api::LoadJobSpec(kTwoWorkers, config.limits);
    TY_CHECK(spec.ok(), "spec");
    absl::StatusOr<server::PreparedJob> prepared = state->PrepareSubmit(*spec, now);
    TY_CHECK(prepared.ok(), "submit");
    absl::StatusOr<v1::SubmitResponse> accepted = state->AcceptCommitted(*prepared, absl::OkStatus());
    TY_CHECK(accepted.ok(), "accept");
    job = accepted->job();
    Step();
    hub_backend = std::make_unique<HubBackend>(state.get());
    hub = std::make_unique<server::LogHub>(hub_backend.get(), &clock, server::LogHubOptions{.start_thread = false});
    v1::LogsRequest follow;
    follow.set_job(job);
    follow.set_role("worker");
    follow.set_index(0);
    follow.set_follow(true);
    follow.set_attempt(-1);
    hub->Open(follow, std::make_shared<NullSink>(), "fuzz").IgnoreError();  // refused: the data then goes nowhere
    hub->RunPendingForTest();
    exec = std::make_unique<server::ExecRelay>(hub_backend.get(), server::ExecRelayOptions{.window_bytes = 4096});
    v1::ExecStart start;
    start.set_job(job);
    start.set_role("worker");
    start.add_command("sh");
    absl::StatusOr<uint64_t> id = exec->Open(start, std::make_shared<NullExecSink>(), "fuzz");
    exec_session = id.ok() ? *id : 0;
  }

  // A second passes: a round, the persister's writes done.
  void Step() {
    now += absl::Seconds(1);
    clock.Advance(absl::Seconds(1));
    state->RunRound(now);
    while (std::optional<server::Persister::Write> w = state->TakeWrite()) state->WriteDone(*w, absl::OkStatus(), false);
  }

  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  FakeClock clock;
  server::testing::RecordingBackend backend;
  std::unique_ptr<server::ControlState> state;
  std::string job;  // the job's name
  std::unique_ptr<HubBackend> hub_backend;
  std::unique_ptr<server::LogHub> hub;
  std::unique_ptr<server::ExecRelay> exec;
  uint64_t exec_session = 0;  // the session open in worker 0 (0: refused)
  server::ResourceBook resources{{.keep_for = absl::Minutes(15), .max_tasks = 64}};
};

// As JobManager::OnTaskResources and JobResources (without the views'
// filter, so every sample reaches the book): kept, then read back.
void TakeResources(Server& s, const v1::TaskResourceReport& report) {
  std::vector<const v1::TaskResources*> tasks;
  std::set<uint64_t> jobs;
  for (const v1::TaskResources& t : report.tasks()) {
    tasks.push_back(&t);
    if (jobs.size() < 4) jobs.insert(t.job_id());
  }
  s.resources.Record("n1", tasks, s.now);
  v1::JobView view;
  view.set_name(s.job);
  for (int i = 0; i < 2; ++i) {
    v1::TaskView* t = view.add_tasks();
    t->set_role("worker");
    t->set_index(i);
    t->set_memory_mb(1024);
    t->set_gpu_mask(1);
  }
  for (uint64_t id : jobs) {
    (void)server::BuildJobResources(view, s.resources.Job(id, absl::InfinitePast()), 1000);
    (void)server::BuildJobResources(view, s.resources.Job(id, s.now, true), 1000, true);
  }
  (void)s.resources.Now(s.now, absl::Seconds(30));
}

// As AgentChannel's Handle: a stream registered as n1 (its certificate's
// name) may register again only as n1.
void Deliver(Server& s, const v1::AgentMessage& m) {
  const std::string node = "n1";
  switch (m.msg_case()) {
    case v1::AgentMessage::kRegister:
      if (m.register_().name() == node) {
        (void)s.state->RegisterAgent(m.register_(), 1, s.now);  // a refusal closes the stream; the state stands
        s.hub->OnNodeConnected(node);
      }
      break;
    case v1::AgentMessage::kHeartbeat: s.state->OnHeartbeat(node, m.heartbeat(), s.now); break;
    case v1::AgentMessage::kStatus: s.state->OnTaskStatus(node, m.status(), s.now); break;
    case v1::AgentMessage::kDraining: s.state->AgentDraining(node, m.draining().reason(), s.now); break;
    case v1::AgentMessage::kLog: s.hub->OnLogData(node, m.log()); break;
    case v1::AgentMessage::kResources: TakeResources(s, m.resources()); break;
    case v1::AgentMessage::kExec: {
      s.exec->OnExecOutput(node, m.exec());
      for (int i = 0; i < 64; ++i) {
        server::ExecNext next = s.exec->Next(s.exec_session);
        if (next.kind != server::ExecNext::Kind::kResponse) break;
        s.exec->Written(s.exec_session);
      }
      (void)s.exec->CanRead(s.exec_session);
      break;
    }
    default: break;
  }
}

}  // namespace

void AgentMessages(std::string_view data) {
  Server s;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(data.data()), static_cast<int>(data.size()));
  for (int n = 0; n < 64; ++n) {
    uint32_t size = 0;
    if (!in.ReadVarint32(&size) || size > 1 << 20) return;
    google::protobuf::io::CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(size));
    v1::AgentMessage m;
    bool parsed = m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
    in.PopLimit(limit);
    if (!parsed) return;  // gRPC drops a stream whose message does not parse
    Deliver(s, m);
    s.hub->RunPendingForTest();
    s.Step();
    // Whatever the agent said, the job is still the server's to describe.
    absl::StatusOr<v1::JobView> view = s.state->Describe(s.job);
    TY_CHECK(view.ok() && view->tasks_size() == 2, "the job lost its tasks");
  }
}

void LaunchOrder(std::string_view data) {
  v1::TaskSpec spec;
  if (!spec.ParseFromArray(data.data(), static_cast<int>(data.size()))) return;
  static const std::string data_dir = ScratchDir() + "/agent";
  // The agent's own check first: an order it lets through must keep the
  // task's place inside the data dir (checked on the path before anything
  // is made there, so that a failure writes nothing outside).
  if (!agent::CheckLaunchOrder(spec).ok()) return;
  const std::string place =
      std::filesystem::path(agent::TaskDir(data_dir, agent::KeyOf(spec))).lexically_normal();
  TY_CHECK(place.rfind(data_dir + "/work/", 0) == 0 && place.find('/', data_dir.size() + 6) != std::string::npos,
           "an order the agent takes puts its task at %s, outside %s/work/JOB", place.c_str(), data_dir.c_str());
  // A checkpoint directory is made where the server's configuration says:
  // the fuzzer makes none outside its scratch dir.
  auto ckpt = spec.mutable_env()->find("TRAINYARD_CHECKPOINT_DIR");
  if (ckpt != spec.mutable_env()->end() &&
      std::filesystem::path(ckpt->second).lexically_normal().string().rfind(data_dir + "/", 0) != 0) {
    spec.mutable_env()->erase(ckpt);
  }
  absl::StatusOr<agent::TaskLaunch> launch = agent::ToTaskLaunch(spec, data_dir);
  if (launch.ok()) {
    TY_CHECK(launch->env.at("TRAINYARD_TASK_DIR") == agent::TaskDir(data_dir, agent::KeyOf(spec)),
             "the task's TRAINYARD_TASK_DIR is not its place");
  }
  std::error_code ec;
  std::filesystem::remove_all(data_dir, ec);  // best effort: the next order starts from an empty dir either way
}

}  // namespace trainyard::fuzz
