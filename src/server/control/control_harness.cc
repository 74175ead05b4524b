// ControlHarness (control_harness.h): a simulated cluster around one
// ControlState — agents with their own view of their tasks, an ordered
// stream per node that pauses, breaks and reconnects, clients, job masters
// and a store to restart from — driven by a byte script.
#include "server/control/control_harness.h"

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "api/link_state.h"
#include "api/states.h"
#include "server/control/control_state.h"
#include "server/execution_backend.h"
#include "server/control/test_node.h"
#include "server/control/test_status.h"
#include "store/memory_state_store.h"

namespace trainyard::server {
namespace {

constexpr int kNodes = 3;
constexpr int kMaxJobs = 10;
constexpr int kEndedBeats = 3;  // heartbeats an agent keeps a task that ended (for stale reports)
constexpr size_t kLinkBuffer = 64;  // statuses an agent's link keeps while it has no stream

// Jobs of every kind the server treats differently: restartable or not,
// pinned to a node, a smaller gang (minAvailable), shares of a GPU.
constexpr const char* kSpecs[] = {
    "name: a\nreplicas:\n  worker:\n    count: 2\n    restartPolicy: OnFailure\n    maxRestarts: 3\n"
    "    resources: {gpus: 1}\n    command: [t]\n",
    "name: b\nreplicas:\n  worker:\n    count: 1\n    resources: {gpus: 2}\n    command: [t]\n",
    "name: c\nnodeName: n0\nreplicas:\n  worker:\n    count: 3\n    restartPolicy: OnFailure\n"
    "    resources: {gpus: 1}\n    command: [t]\n",
    "name: d\nreplicas:\n  worker:\n    count: 4\n    minAvailable: 2\n    restartPolicy: Always\n"
    "    resources: {gpus: 2}\n    command: [t]\n  ps:\n    count: 1\n    resources: {cpu: 1}\n    command: [p]\n",
    "name: e\npriority: production\nreplicas:\n  worker:\n    count: 2\n    restartPolicy: OnFailure\n"
    "    resources: {gpus: 3}\n    command: [t]\n",
    "name: f\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 0.5}\n    command: [t]\n",
};

// What the server sent a node, in order, until the agent reads it.
struct Message {
  std::optional<v1::TaskSpec> launch;
  v1::KillTask kill;
};

class QueueBackend : public ExecutionBackend {
 public:
  void Registered(const std::string&, uint64_t, const v1::Registered&) override {}
  void Launch(const std::string& node, v1::TaskSpec t) override { queue[node].push_back({std::move(t), {}}); }
  void Kill(const std::string& node, const v1::KillTask& k) override { queue[node].push_back({std::nullopt, k}); }
  void UpdateFiles(const std::string&, const v1::TaskFiles&) override {}
  std::map<std::string, std::deque<Message>> queue;
};

struct AgentTask {
  v1::TaskSpec spec;
  int attempt = 0;
  v1::TaskState state = v1::TASK_RUNNING;
  int beats_since_end = 0;
};

struct Agent {
  std::string name;
  uint64_t session = 0;  // 0: no stream
  bool paused = false;   // SIGSTOP: reads and says nothing; its stream stays open
  std::map<std::string, AgentTask> tasks;  // by job id, role and index
  // What the agent's link keeps across its streams, by the real agent's
  // rules (api::LinkState): statuses while no stream is registered wait and
  // are replayed first on the next; ends are repeated in its heartbeats.
  std::optional<api::LinkState> link{std::in_place, kLinkBuffer};  // emplaced anew when it crashes
  // Reports of what happened while it was stopped: it sends them when it
  // resumes (Resume), or keeps them for the next stream if that one broke.
  std::deque<v1::AgentMessage> held;
  // Reports written to its stream that the server has not read yet: they
  // arrive in order, before its next heartbeat (Arrive), or are lost when
  // the stream breaks, as the real agent's are (its heartbeats then repeat
  // the ends).
  std::deque<v1::TaskStatus> wire;
  bool speaks() const { return session != 0 && !paused; }
};

// ": why" for a refusal (a trace line's tail), "" for OK: a refusal is the
// server's answer to the peer, which the invariants then judge.
std::string Said(const absl::Status& st) { return st.ok() ? "" : absl::StrCat(": ", st.message()); }

// What the agent reports of `t` at `attempt` (the launch it runs may be
// older than the attempt: restarts in place), with an exit code for an end.
v1::TaskStatus StatusOf(const AgentTask& t, v1::TaskState state, int attempt) {
  v1::TaskStatus st = testing::StatusOf(t.spec, state);
  st.set_attempt(attempt);
  st.set_launch_attempt(std::min(attempt, t.spec.attempt()));
  if (api::IsTerminal(state)) st.mutable_exit()->set_exit_code(state == v1::TASK_SUCCEEDED ? 0 : 1);
  return st;
}

std::string Key(uint64_t job_id, const std::string& role, int index) { return absl::StrCat(job_id, "/", role, "/", index); }

class Harness {
 public:
  explicit Harness(std::string_view script) : in_(script) {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 5000;
    // Finished jobs leave the live views a minute on and deleted records
    // are purged a day on (the time jumps of ops 8 and 9 reach both).
    config_.finished_job_retention_minutes = 1;
    config_.accounting_retention_days = 1;
    for (int i = 0; i < kNodes; ++i) agents_.push_back(Agent{.name = absl::StrCat("n", i)});
    state_ = Make();
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  absl::Status Run(std::string* trace) {
    for (int step = 0; pos_ < in_.size(); ++step) {
      std::string what = Step(Next());
      if (trace) absl::StrAppend(trace, step, ": ", what, "\n");
      if (absl::Status st = state_->CheckInvariantsForTest(); !st.ok()) {
        return absl::InternalError(absl::StrCat("after step ", step, " (", what, "): ", st.message()));
      }
    }
    return absl::OkStatus();
  }

 private:
  uint8_t Next() { return pos_ < in_.size() ? static_cast<uint8_t>(in_[pos_++]) : 0; }
  Agent& PickAgent() { return agents_[Next() % kNodes]; }

  std::unique_ptr<ControlState> Make() {
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    return std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  }

  std::string Step(uint8_t op);
  std::string Submit();
  void Deliver(Agent& a);
  void OnLaunch(Agent& a, const v1::TaskSpec& spec);
  void OnKill(Agent& a, const v1::KillTask& kill);
  void Send(Agent& a, const AgentTask& t, v1::TaskState state, int attempt);
  // SIGCONT: what happened while it was stopped is reported now.
  void Resume(Agent& a);
  // The server reads what the agent wrote to its stream.
  void Arrive(Agent& a);
  // A report of an older attempt, or one repeated late: the network's
  // duplicate, not the agent's link.
  void SendStale(Agent& a, const AgentTask& t, v1::TaskState state, int attempt);
  // With `faults`: a delta heartbeat that gives the agent's GPU faults.
  void Beat(Agent& a, const std::vector<v1::GpuFault>* faults = nullptr);
  std::string TaskExit(Agent& a, bool stale);
  std::string Reconnect(Agent& a);
  void Disconnect(Agent& a);
  void Flush(bool fail);
  void Restart();
  std::string AnyJob();
  std::string Admin(Agent& a);

  std::string_view in_;
  size_t pos_ = 0;
  ServerConfig config_;
  QueueBackend backend_;
  MemoryStateStore store_;
  std::unique_ptr<ControlState> state_;
  std::vector<Agent> agents_;
  std::vector<std::string> jobs_;
  std::vector<std::string> deleted_;  // names to release once their rename is durable
  uint64_t next_session_ = 1;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

std::string Harness::Step(uint8_t op) {
  switch (op % 20) {
    case 0: return Submit();
    case 1:
    case 2: state_->RunRound(now_); return "round";
    case 3: { Agent& a = PickAgent(); Deliver(a); return absl::StrCat("deliver ", a.name); }
    case 4: { Agent& a = PickAgent(); Beat(a); return absl::StrCat("beat ", a.name); }
    case 5: for (Agent& a : agents_) Beat(a); return "beat all";
    case 6: return TaskExit(PickAgent(), false);
    case 7: return TaskExit(PickAgent(), true);
    case 8: now_ += absl::Milliseconds(10 * (Next() % 100)); return "time +<1s";
    case 9:
      if (Next() % 8 == 0) {
        now_ += absl::Hours(25);
        return "time +25h";
      }
      now_ += absl::Seconds(6);
      return "time +6s";
    case 10: {
      Agent& a = PickAgent();
      if (a.paused) {
        Resume(a);
        return "resume " + a.name;
      }
      Arrive(a);  // what it wrote before it stopped is on the stream: the server reads it
      a.paused = true;
      return "pause " + a.name;
    }
    case 11: { Agent& a = PickAgent(); Disconnect(a); return absl::StrCat("disconnect ", a.name); }
    case 12: return Reconnect(PickAgent());
    case 13: {  // its tasks and what its link kept die with it
      Agent& a = PickAgent();
      a.tasks.clear();
      Disconnect(a);
      a.link.emplace(kLinkBuffer);
      a.held.clear();
      a.paused = false;  // a process started again is not stopped
      return absl::StrCat("crash ", a.name);
    }
    case 14: { std::string j = AnyJob(); return "kill " + j + Said(state_->Kill(j, "", now_).status()); }
    case 15: {
      std::string j = AnyJob();
      absl::StatusOr<v1::DeleteJobResponse> d = state_->DeleteJob(j, now_);
      if (d.ok()) deleted_.push_back(j);
      return "delete " + j + Said(d.status());
    }
    case 16: {
      v1::JobOutcomeRequest r;
      r.set_job(AnyJob());
      r.set_state(Next() % 2 ? v1::JOB_SUCCEEDED : v1::JOB_FAILED);
      return "outcome " + r.job() + Said(state_->ReportOutcome(r, now_));
    }
    case 17: Restart(); return "server restart";
    case 18: { bool fail = Next() % 8 == 0; Flush(fail); return fail ? "write fails" : "flush"; }
    default: return Admin(PickAgent());
  }
}

std::string Harness::Submit() {
  const char* yaml = kSpecs[Next() % std::size(kSpecs)];
  if (jobs_.size() >= kMaxJobs) return "submit (enough jobs)";
  auto spec = api::LoadJobSpec(yaml, config_.limits);
  if (!spec.ok()) return absl::StrCat("submit refused: ", spec.status().message());
  auto prepared = state_->PrepareSubmit(*spec, now_);
  if (!prepared.ok()) return absl::StrCat("submit refused: ", prepared.status().message());
  WriteBatch create;
  create.CreateJob(prepared->rec, prepared->first_event);
  absl::Status kept = store_.Commit(std::move(create));
  auto resp = state_->AcceptCommitted(*prepared, kept);
  if (!resp.ok()) return "submit not kept";
  jobs_.push_back(resp->job());
  return "submit " + resp->job();
}

std::string Harness::AnyJob() { return jobs_.empty() ? "none" : jobs_[Next() % jobs_.size()]; }

void Harness::Deliver(Agent& a) {
  std::deque<Message>& q = backend_.queue[a.name];
  if (!a.speaks()) return;
  Arrive(a);  // the server reads what the agent wrote so far
  int n = 1 + Next() % 8;  // a few of what waits, in order
  while (n-- > 0 && !q.empty()) {
    Message m = std::move(q.front());
    q.pop_front();
    if (m.launch) {
      OnLaunch(a, *m.launch);
    } else {
      OnKill(a, m.kill);
    }
  }
}

void Harness::OnLaunch(Agent& a, const v1::TaskSpec& spec) {
  std::string key = Key(spec.job_id(), spec.role(), spec.index());
  auto it = a.tasks.find(key);
  if (it != a.tasks.end() && !api::IsTerminal(it->second.state)) return;  // AlreadyExists: ignored
  AgentTask& t = a.tasks[key];
  t = AgentTask{.spec = spec, .attempt = spec.attempt(), .state = v1::TASK_RUNNING};
  if (Next() % 2) Send(a, t, v1::TASK_RUNNING, t.attempt);  // else a heartbeat shows it
}

void Harness::OnKill(Agent& a, const v1::KillTask& kill) {
  auto it = a.tasks.find(Key(kill.job_id(), kill.role(), kill.index()));
  if (it == a.tasks.end() || api::IsTerminal(it->second.state)) return;
  AgentTask& t = it->second;
  if (kill.fail_attempt() && kill.attempt() != t.attempt) return;
  t.state = kill.fail_attempt() ? v1::TASK_FAILED : v1::TASK_KILLED;
  Send(a, t, t.state, t.attempt);
}

void Harness::Send(Agent& a, const AgentTask& t, v1::TaskState state, int attempt) {
  v1::AgentMessage msg;
  const v1::TaskStatus& st = *msg.mutable_status() = StatusOf(t, state, attempt);
  // Written now while a stream is registered and nothing older waits; else
  // it waits for the next stream. A stopped agent notices it when it
  // resumes.
  if (a.paused) {
    a.held.push_back(std::move(msg));
    return;
  }
  if (a.link->OnStatus(msg, api::IsTerminal(state))) a.wire.push_back(st);
}

void Harness::SendStale(Agent& a, const AgentTask& t, v1::TaskState state, int attempt) {
  if (!a.speaks()) return;
  Arrive(a);  // behind what the agent wrote before it
  state_->OnTaskStatus(a.name, StatusOf(t, state, attempt), now_);
}

void Harness::Arrive(Agent& a) {
  std::deque<v1::TaskStatus> wire = std::move(a.wire);
  a.wire.clear();
  for (const v1::TaskStatus& st : wire) state_->OnTaskStatus(a.name, st, now_);
}

void Harness::Resume(Agent& a) {
  a.paused = false;
  std::deque<v1::AgentMessage> held = std::move(a.held);
  a.held.clear();
  for (v1::AgentMessage& m : held) {
    bool final = api::IsTerminal(m.status().state());
    if (a.link->OnStatus(m, final)) a.wire.push_back(m.status());
  }
}

void Harness::Beat(Agent& a, const std::vector<v1::GpuFault>* faults) {
  if (!a.speaks()) return;
  v1::Heartbeat hb;
  if (faults != nullptr) {
    hb.set_use_unchanged(true);
    hb.set_gpu_faults_given(true);
    for (const v1::GpuFault& f : *faults) *hb.add_gpu_faults() = f;
  }
  // The tasks it runs; those that ended are repeated by its link, as the
  // real agent's are (api::LinkState::AddRecentEnds).
  for (auto it = a.tasks.begin(); it != a.tasks.end();) {
    AgentTask& t = it->second;
    if (api::IsTerminal(t.state)) {
      if (++t.beats_since_end > kEndedBeats) {
        it = a.tasks.erase(it);
      } else {
        ++it;
      }
      continue;
    }
    v1::TaskStatus* st = hb.add_tasks();
    st->set_job(t.spec.job());
    st->set_job_id(t.spec.job_id());
    st->set_role(t.spec.role());
    st->set_index(t.spec.index());
    st->set_attempt(t.attempt);
    st->set_launch_attempt(t.spec.attempt());
    st->set_state(t.state);
    ++it;
  }
  a.link->AddRecentEnds(static_cast<int64_t>(a.session), now_, &hb);
  Arrive(a);  // what it wrote before the heartbeat is read first
  state_->OnHeartbeat(a.name, hb, now_);
}

std::string Harness::TaskExit(Agent& a, bool stale) {
  std::vector<AgentTask*> live;
  for (auto& [key, t] : a.tasks) {
    if (!api::IsTerminal(t.state) || stale) live.push_back(&t);
  }
  if (live.empty()) return absl::StrCat("no task on ", a.name);
  AgentTask& t = *live[Next() % live.size()];
  static constexpr v1::TaskState kEnds[] = {v1::TASK_SUCCEEDED, v1::TASK_FAILED, v1::TASK_RESTARTING,
                                            v1::TASK_RUNNING, v1::TASK_KILLED};
  v1::TaskState s = kEnds[Next() % std::size(kEnds)];
  std::string what = absl::StrCat(stale ? "stale " : "", v1::TaskState_Name(s), " of ", t.spec.job(), "/",
                                  t.spec.role(), "-", t.spec.index(), " on ", a.name);
  if (stale) {  // a report of an older attempt, or one repeated late (even an end the agent never saw: a peer's lie)
    SendStale(a, t, s, std::max(0, t.attempt - static_cast<int>(Next() % 2)));
    return what;
  }
  if (s == v1::TASK_RESTARTING) {
    Send(a, t, s, t.attempt);
    ++t.attempt;
    Send(a, t, v1::TASK_RUNNING, t.attempt);
    return what;
  }
  if (api::IsTerminal(s)) t.state = s;
  Send(a, t, s, t.attempt);
  return what;
}

void Harness::Disconnect(Agent& a) {
  if (a.session != 0) state_->AgentDisconnected(a.name, a.session);
  a.session = 0;
  a.wire.clear();  // written, never read: lost with the stream
  a.link->Disconnected();
  backend_.queue[a.name].clear();  // what was in the broken stream is lost
}

std::string Harness::Reconnect(Agent& a) {
  // A new stream, or (odd byte) the same stream registering again. With the
  // old stream still open a new one is refused (AlreadyExists) until it closes.
  bool same = Next() % 2 && a.session != 0;
  uint64_t session = same ? a.session : next_session_++;
  if (same) Arrive(a);  // one stream: what it wrote before comes before the registration
  v1::NodeInfo info = testing::TestNode(a.name, 8, absl::StrCat("10.0.0.", a.name.substr(1)));
  absl::Status st = state_->RegisterAgent(info, session, now_);
  if (st.ok()) {
    if (!same) backend_.queue[a.name].clear();
    a.session = session;
    // What waited is replayed first, in order, then it lists what it runs.
    a.link->Registered();
    if (a.paused) Resume(a);
    for (std::deque<v1::AgentMessage> replay = a.link->TakeReplay(); !replay.empty(); replay = a.link->TakeReplay()) {
      for (const v1::AgentMessage& m : replay) a.wire.push_back(m.status());
    }
    Beat(a);
  }
  return absl::StrCat(same ? "register again " : "reconnect ", a.name, Said(st));
}

void Harness::Flush(bool fail) {
  while (std::optional<Persister::Write> w = state_->TakeWrite()) {
    absl::Status st = fail ? absl::UnavailableError("disk full") : store_.Commit(w->batch);
    state_->WriteDone(*w, st, false);
    if (!st.ok()) return;
  }
  for (const std::string& name : deleted_) state_->ReleaseName(name);
  deleted_.clear();
}

void Harness::Restart() {
  Flush(false);
  auto snap = store_.LoadAll();
  JobFilter finished;
  finished.states = api::FinishedJobStates();
  auto ended = store_.ListJobs(finished);
  if (!snap.ok() || !ended.ok()) return;
  state_ = Make();
  state_->Recover(std::move(*snap), std::move(*ended), now_);
  for (Agent& a : agents_) {  // every stream broke with the old server
    a.session = 0;
    a.wire.clear();
    a.link->Disconnected();
    backend_.queue[a.name].clear();
  }
}

std::string Harness::Admin(Agent& a) {
  switch (Next() % 8) {
    case 0: return "cordon " + a.name + Said(state_->Cordon(a.name, "test"));
    case 6: {
      // The agent's GPU faults now: none, or one or two, any action, a GPU
      // index the node may not have.
      std::vector<v1::GpuFault> faults(Next() % 3);
      for (v1::GpuFault& f : faults) {
        f.set_gpu(static_cast<int>(Next() % 10));
        f.set_xid(static_cast<int>(Next() % 100));
        f.set_action(static_cast<v1::GpuFaultAction>(Next() % 4));
        f.set_message("Xid (test)");
      }
      Beat(a, &faults);
      return absl::StrCat("GPU faults ", faults.size(), " on ", a.name);
    }
    case 7: {
      int gpu = static_cast<int>(Next() % 9);
      bool cordon = Next() % 2;
      return absl::StrCat(cordon ? "cordon GPU " : "uncordon GPU ", gpu, " of ", a.name,
                          Said(state_->CordonGpus(a.name, {gpu}, cordon)));
    }
    case 1: return "uncordon " + a.name + Said(state_->Uncordon(a.name));
    case 2: return "drain " + a.name + Said(state_->Drain(a.name, "test", now_).status());
    case 3:
      if (a.speaks()) state_->AgentDraining(a.name, "stopping", now_);
      return "agent stopping " + a.name;
    case 4: return "remove " + a.name + Said(state_->RemoveNode(a.name, now_));
    default: {
      v1::WorkerFailureRequest r;
      r.set_job(AnyJob());
      r.set_worker_id(Next() % 3);
      r.set_attempt(Next() % 3);
      r.set_reason("missed pings");
      return "worker failed " + r.job() + Said(state_->WorkerFailed(r, now_));
    }
  }
}

}  // namespace

absl::Status RunControlScript(std::string_view script, std::string* trace) {
  Harness h(script);
  return h.Run(trace);
}

std::string RandomControlScript(uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  std::string out;
  out.reserve(static_cast<size_t>(steps) * 3);
  for (int i = 0; i < steps * 3; ++i) out.push_back(static_cast<char>(rng() & 0xff));
  return out;
}

}  // namespace trainyard::server
