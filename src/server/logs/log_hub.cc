// LogHub: opening and closing streams, handing chunks to them, the agents'
// pushes, notifications, and the hub's thread (look-ups after changes; the
// cut-off of followers that stopped reading).
#include "server/logs/log_hub.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "server/logs/log_hub_internal.h"

namespace trainyard::server {

bool SendStreamOrder(LogBackend& backend, const std::string& node, v1::ServerMessage msg) {
  switch (msg.msg_case()) {
    case v1::ServerMessage::kReadLog: return backend.ReadLog(node, std::move(*msg.mutable_read_log()));
    case v1::ServerMessage::kAckLog: return backend.AckLog(node, std::move(*msg.mutable_ack_log()));
    case v1::ServerMessage::kCancelLog: return backend.CancelLog(node, std::move(*msg.mutable_cancel_log()));
    case v1::ServerMessage::kExecOpen: return backend.OpenExec(node, std::move(*msg.mutable_exec_open()));
    case v1::ServerMessage::kExecInput: return backend.ExecInput(node, std::move(*msg.mutable_exec_input()));
    default: return false;
  }
}

namespace {

constexpr int64_t kMinWindow = 4 << 10;

std::string TaskName(const std::string& job, const std::string& role, int index) {
  return absl::StrCat(job, "-", role, "-", index);
}

// FailedPrecondition when no task of the job has run yet (nothing to read
// without -f; -f waits for the start instead).
absl::Status NotStarted(const std::string& job, const JobLogPlaces& places) {
  for (const TaskLogPlace& p : places.tasks) {
    if (p.LatestRun() >= 0) return absl::OkStatus();
  }
  if (places.job_done) return absl::OkStatus();  // each task says it never ran
  std::string state = v1::JobState_Name(places.job_state).substr(4);
  return absl::FailedPreconditionError(absl::StrCat(
      "job ", job, " has not started yet (", state, places.pending_reason.empty() ? "" : ": ", places.pending_reason,
      "); follow it with trainyard logs -f to see its logs as it starts"));
}

}  // namespace

LogHub::LogHub(LogBackend* backend, const Clock* clock, LogHubOptions options)
    : backend_(backend), clock_(clock), options_(options) {
  // Ids differ from those of an earlier server process, whose subscriptions
  // an agent may still be ending.
  next_request_ = kHubRequestBit | (static_cast<uint64_t>(absl::ToUnixMicros(clock_->Now())) << 8);
  if (options_.start_thread) thread_ = std::thread([this] { Run(); });
}

LogHub::~LogHub() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<uint64_t> LogHub::Open(const v1::LogsRequest& req, LogSinkPtr sink, const std::string& user) {
  if (req.job().empty()) return absl::InvalidArgumentError("logs: job must be given");
  {
    absl::MutexLock lock(&mu_);
    if (live_ >= options_.max_followers) {
      ++refused_total_;
      return absl::ResourceExhaustedError(absl::StrCat("the server already serves ", live_,
                                                       " log streams, its limit (maxLogFollowers); try again later"));
    }
    int& mine = user_live_[user];
    if (options_.max_followers_per_user > 0 && mine >= options_.max_followers_per_user) {
      ++refused_user_;
      return absl::ResourceExhaustedError(absl::StrCat(
          "you ('", user, "') already have ", mine, " log streams open, the most one user may (logStreams.perUser ",
          options_.max_followers_per_user, "); end some (a trainyard logs -f left running?) and try again"));
    }
    ++mine;
    ++live_;
    ++jobs_[req.job()].opening;  // changes from now on are looked up again
  }
  absl::StatusOr<JobLogPlaces> places = backend_->Places(req.job());
  auto follower = std::make_unique<Follower>();
  if (places.ok()) {
    for (const TaskLogPlace& p : places->tasks) {
      if (!req.role().empty() && p.role != req.role()) continue;
      if (!req.role().empty() && req.index() >= 0 && p.index != req.index()) continue;
      follower->tasks.push_back(TaskCursor{.role = p.role, .index = p.index, .name = TaskName(req.job(), p.role, p.index)});
    }
  }
  Effects fx;
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    JobEntry& entry = jobs_[req.job()];
    --entry.opening;
    absl::Status st = places.status();
    if (st.ok() && follower->tasks.empty()) {
      st = absl::NotFoundError(absl::StrCat("job ", req.job(), " has no task ", req.role(),
                                            req.index() >= 0 ? absl::StrCat("/", req.index()) : ""));
    }
    if (st.ok() && !req.follow()) st = NotStarted(req.job(), *places);
    if (!st.ok()) {
      --live_;
      StreamGone(user);
      if (entry.followers.empty() && entry.opening == 0) jobs_.erase(req.job());
      return st;
    }
    Follower& f = *follower;
    id = f.id = next_follower_++;
    f.req = req;
    f.job_id = places->job_id;
    f.user = user;
    f.sink = std::move(sink);
    f.window = std::max(kMinWindow, options_.follower_buffer_bytes / static_cast<int64_t>(2 * f.tasks.size()));
    entry.followers.insert(id);
    entry.places = *places;
    followers_[id] = std::move(follower);
    Apply(f, *places, fx);
    if (entry.changed) {
      // Its look-up may predate the change.
      pending_jobs_.insert(req.job());
      cv_.Signal();
      if (entry.opening == 0) entry.changed = false;
    }
  }
  Execute(std::move(fx));
  return id;
}

LogNext LogHub::Next(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = followers_.find(id);
  if (it == followers_.end()) return {.kind = LogNext::Kind::kEnd, .end = absl::CancelledError("log stream closed")};
  Follower& f = *it->second;
  if (f.cut_off) return {.kind = LogNext::Kind::kEnd, .end = *f.end};
  if (f.in_write) return {};
  if (!f.queue.empty()) {
    f.in_write = std::move(f.queue.front());
    f.queue.pop_front();
    f.queued_bytes -= static_cast<int64_t>(f.in_write->chunk.data().size());
    return {.kind = LogNext::Kind::kChunk, .chunk = f.in_write->chunk};
  }
  if (f.end) return {.kind = LogNext::Kind::kEnd, .end = *f.end};
  f.wants = true;
  return {};
}

void LogHub::Written(uint64_t id) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = followers_.find(id);
    if (it == followers_.end() || !it->second->in_write) return;
    Follower& f = *it->second;
    Queued done = std::move(*f.in_write);
    f.in_write.reset();
    f.waiting_since = f.queue.empty() ? absl::InfiniteFuture() : clock_->Now();
    if (done.task < 0 || done.chunk.data().empty()) return;
    TaskCursor& t = f.tasks[done.task];
    if (t.attempt != done.chunk.attempt()) return;  // of an attempt left behind
    Output& o = done.err ? t.err : t.out;
    o.taken = std::max(o.taken, done.end_offset);
    // Acknowledged in halves of the window: the agent, which may run a whole
    // window ahead, never waits, and there is no message per chunk.
    if (o.request == 0 || o.taken - o.acked < f.window / 2) return;
    o.acked = o.taken;
    v1::ServerMessage msg;
    msg.mutable_ack_log()->set_request_id(o.request);
    msg.mutable_ack_log()->set_offset(o.taken);
    fx.sends.emplace_back(t.node, std::move(msg));
  }
  Execute(std::move(fx));
}

void LogHub::Close(uint64_t id) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = followers_.find(id);
    if (it == followers_.end()) return;
    Follower& f = *it->second;
    End(f, absl::CancelledError("log stream closed"), /*at_once=*/false, fx);
    fx.ready.clear();  // its sink is going away
    auto job = jobs_.find(f.req.job());
    if (job != jobs_.end()) {
      job->second.followers.erase(id);
      if (job->second.followers.empty() && job->second.opening == 0) jobs_.erase(job);
    }
    followers_.erase(it);
  }
  Execute(std::move(fx));
}

bool LogHub::OnLogData(const std::string& node, const v1::LogData& data) {
  if ((data.request_id() & kHubRequestBit) == 0) return false;
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = subs_.find(data.request_id());
    if (it == subs_.end()) {
      // A subscription the hub has dropped (its reader left, it moved on, the
      // node reconnected) that the agent still serves: end it there.
      if (!data.finished() && data.error().empty()) {
        v1::ServerMessage msg;
        msg.mutable_cancel_log()->set_request_id(data.request_id());
        fx.sends.emplace_back(node, std::move(msg));
      }
    } else if (it->second.node == node) {
      SubRef ref = it->second;
      Follower& f = *followers_.at(ref.follower);
      TaskCursor& t = f.tasks[ref.task];
      Take(f, ref.task, ref.err ? t.err : t.out, data, fx);
    }
  }
  Execute(std::move(fx));
  return true;
}

void LogHub::OnJobChanged(const std::string& job) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (it->second.opening > 0) it->second.changed = true;
  pending_jobs_.insert(job);
  cv_.Signal();
}

void LogHub::OnNodeConnected(const std::string& node) {
  absl::MutexLock lock(&mu_);
  down_nodes_.erase(node);
  // Its new session has none of the earlier one's subscriptions.
  DropSubsOnLocked(node);
}

void LogHub::OnNodeDisconnected(const std::string& node) {
  absl::MutexLock lock(&mu_);
  down_nodes_.insert(node);
  DropSubsOnLocked(node);
}

void LogHub::DropSubsOnLocked(const std::string& node) {
  for (auto it = subs_.begin(); it != subs_.end();) {
    if (it->second.node != node) {
      ++it;
      continue;
    }
    Follower& f = *followers_.at(it->second.follower);
    TaskCursor& t = f.tasks[it->second.task];
    (it->second.err ? t.err : t.out).request = 0;
    it = EraseSub(it);
  }
  // Look again at every follower that reads from the node (or waits for it).
  for (const auto& [id, f] : followers_) {
    for (const TaskCursor& t : f->tasks) {
      if (t.node == node && !t.done) pending_jobs_.insert(f->req.job());
    }
  }
  if (!pending_jobs_.empty()) cv_.Signal();
}

std::map<uint64_t, LogHub::SubRef>::iterator LogHub::EraseSub(std::map<uint64_t, SubRef>::iterator it) {
  auto node = node_subs_.find(it->second.node);
  if (node != node_subs_.end() && --node->second <= 0) node_subs_.erase(node);
  auto mine = node_user_subs_.find({it->second.node, it->second.user});
  if (mine != node_user_subs_.end() && --mine->second <= 0) node_user_subs_.erase(mine);
  return subs_.erase(it);
}

void LogHub::EraseSub(uint64_t request) {
  auto it = subs_.find(request);
  if (it != subs_.end()) EraseSub(it);
}

void LogHub::StreamGone(const std::string& user) {
  auto it = user_live_.find(user);
  if (it != user_live_.end() && --it->second <= 0) user_live_.erase(it);
}

void LogHub::SendFailed(const std::string& node, uint64_t request, Effects& fx) {
  auto it = subs_.find(request);
  if (it == subs_.end()) return;  // dropped meanwhile
  uint64_t follower = it->second.follower;
  int task = it->second.task;
  down_nodes_.insert(node);
  DropSubsOnLocked(node);
  AdvanceCached(*followers_.at(follower), task, fx);
}

void LogHub::Execute(Effects fx) {
  while (!fx.sends.empty() || !fx.ready.empty()) {
    std::vector<std::pair<std::string, uint64_t>> failed;
    for (auto& [node, msg] : fx.sends) {
      uint64_t request = msg.has_read_log() ? msg.read_log().request_id() : 0;
      if (!SendStreamOrder(*backend_, node, std::move(msg)) && request != 0) failed.emplace_back(node, request);
    }
    for (const LogSinkPtr& sink : fx.ready) sink->Ready();
    fx = Effects();
    if (failed.empty()) return;
    // Ends: a node that failed a send is down, and is not sent to again
    // until it connects.
    absl::MutexLock lock(&mu_);
    for (const auto& [node, request] : failed) SendFailed(node, request, fx);
  }
}

void LogHub::RunPending() {
  std::set<std::string> jobs;
  {
    absl::MutexLock lock(&mu_);
    jobs.swap(pending_jobs_);
  }
  for (const std::string& job : jobs) {
    absl::StatusOr<JobLogPlaces> places = backend_->Places(job);
    Effects fx;
    {
      absl::MutexLock lock(&mu_);
      auto it = jobs_.find(job);
      if (it == jobs_.end()) continue;
      if (places.ok()) it->second.places = *places;
      std::set<uint64_t> ids = it->second.followers;
      for (uint64_t id : ids) {
        Follower& f = *followers_.at(id);
        if (places.ok()) {
          Apply(f, *places, fx);
        } else {
          End(f, places.status(), /*at_once=*/false, fx);
        }
      }
    }
    Execute(std::move(fx));
  }
}

void LogHub::Sweep() {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    for (auto& [id, f] : followers_) {
      if (f->cut_off || f->waiting_since + options_.stall_timeout > now) continue;
      int64_t waiting = f->queued_bytes + (f->in_write ? static_cast<int64_t>(f->in_write->chunk.data().size()) : 0);
      Log(LogLevel::kWarning, "server", "log stream %d of job %s cut off: its reader took nothing for %s", id,
          f->req.job(), absl::FormatDuration(options_.stall_timeout));
      ++cut_off_;
      End(*f,
          absl::ResourceExhaustedError(absl::StrCat(
              "log stream cut off: its reader took none of the ", waiting, " bytes waiting for it for ",
              absl::FormatDuration(options_.stall_timeout),
              " (logFollowerStallMs); the logs stay on the nodes, read them again with trainyard logs")),
          /*at_once=*/true, fx);
    }
  }
  Execute(std::move(fx));
}

absl::Time LogHub::NextStallLocked() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, f] : followers_) {
    if (!f->cut_off) next = std::min(next, f->waiting_since + options_.stall_timeout);
  }
  return next;
}

void LogHub::Run() {
  for (;;) {
    bool pending;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      pending = !pending_jobs_.empty();
      if (!pending) {
        absl::Time next = NextStallLocked();
        absl::Time now = clock_->Now();
        if (next > now) {
          thread_wakes_at_ = next;
          cv_.WaitWithTimeout(&mu_, std::min(next - now, absl::Hours(1)));
          thread_wakes_at_ = absl::InfinitePast();  // awake: it looks again before it waits
          continue;
        }
      }
    }
    if (pending) {
      RunPending();
    } else {
      Sweep();
    }
  }
}

LogHubStats LogHub::Stats() const {
  absl::MutexLock lock(&mu_);
  LogHubStats s;
  s.followers = live_;
  s.subscriptions = subs_.size();
  s.cut_off = cut_off_;
  s.refused_total = refused_total_;
  s.refused_user = refused_user_;
  s.refused_node = refused_node_;
  s.refused_user_node = refused_user_node_;
  for (const auto& [id, f] : followers_) s.buffered_bytes += f->queued_bytes;
  return s;
}

}  // namespace trainyard::server
