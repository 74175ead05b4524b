// What one follower does as its tasks' attempts come and go: which attempt
// of a task it reads and on which node, when it subscribes there (again),
// when it moves on to the next attempt, and when a task (and the follower)
// is done. Everything here runs under the hub's lock and leaves its sends
// and wake-ups in Effects.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/logs/log_hub.h"
#include "server/logs/log_hub_internal.h"

namespace trainyard::server {
namespace {

// The attempt after `attempt` (read on `node`) and the node that keeps it:
// the next one there while the task's launch there goes on (its agent's
// restarts are numbered without gaps), else the first attempt of the launch
// that follows (a move or a requeue).
std::pair<std::string, int> NextAttempt(int attempt, const std::string& node, const TaskLogPlace& place) {
  if (place.launches.empty()) {  // a record from before launches were kept
    if (place.node == node && place.launch_attempt <= attempt) return {node, attempt + 1};
    return {place.node, std::max(attempt + 1, place.launch_attempt)};
  }
  std::string next = place.NodeOf(attempt + 1);
  if (next == node && place.NodeOf(attempt) == node) return {node, attempt + 1};
  for (const auto& [first, n] : place.launches) {
    if (first > attempt) return {n, first};
  }
  return {place.node, attempt + 1};
}

// Why the log of `attempt` of `task`, kept on `node`, cannot be read now.
std::string Unreachable(const std::string& task, int attempt, const std::string& node, const JobLogPlaces* places) {
  std::string state;
  if (places) {
    auto it = places->node_states.find(node);
    if (it != places->node_states.end()) state = it->second;
  }
  if (state.empty() || state == "READY") {
    return absl::StrCat("node ", node, " that keeps the log of ", task, " attempt ", attempt, " is not connected");
  }
  return absl::StrCat("attempt ", attempt, " of ", task, " ran on ", node, ", which is ", state,
                      "; its log stays there and can be read when the node is back");
}

const TaskLogPlace* Find(const JobLogPlaces& places, const std::string& role, int index) {
  for (const TaskLogPlace& p : places.tasks) {
    if (p.role == role && p.index == index) return &p;
  }
  return nullptr;
}

}  // namespace

void LogHub::Apply(Follower& f, const JobLogPlaces& places, Effects& fx) {
  if (places.job_id != f.job_id) {
    // Deleted, and its name taken by a new job: that one is not this stream's.
    End(f, absl::NotFoundError(absl::StrCat("job ", f.req.job(), " was deleted while its logs were read")),
        /*at_once=*/false, fx);
    return;
  }
  for (size_t i = 0; i < f.tasks.size() && !f.end; ++i) {
    const TaskLogPlace* p = Find(places, f.tasks[i].role, f.tasks[i].index);
    if (p) Advance(f, static_cast<int>(i), *p, places.job_done, fx);
  }
  MaybeComplete(f, fx);
}

void LogHub::AdvanceCached(Follower& f, int task, Effects& fx) {
  auto it = jobs_.find(f.req.job());
  if (it != jobs_.end() && it->second.places && it->second.places->job_id == f.job_id) {
    const TaskLogPlace* p = Find(*it->second.places, f.tasks[task].role, f.tasks[task].index);
    if (p) Advance(f, task, *p, it->second.places->job_done, fx);
  }
  MaybeComplete(f, fx);
}

void LogHub::Advance(Follower& f, int i, const TaskLogPlace& place, bool job_done, Effects& fx) {
  TaskCursor& t = f.tasks[i];
  if (t.done || f.end) return;
  bool across = f.follow() && !f.pinned();  // goes on to later attempts
  if (t.attempt < 0) {
    int latest = place.LatestRun();
    if (f.pinned() && f.req.attempt() > latest && !(f.follow() && !job_done)) {
      TaskFails(f, i, absl::NotFoundError(absl::StrCat(t.name, " has no attempt ", f.req.attempt(),
                                                       latest < 0 ? " (it has not run)" : absl::StrCat(" (the latest is ", latest, ")"))),
                fx);
      return;
    }
    int attempt = f.pinned() ? f.req.attempt() : latest;
    // Following waits for the task's (next) launch; without -f the latest
    // attempt that ran is read, wherever it ran.
    if (f.follow() && !f.pinned() && place.node.empty() && !job_done) return;
    std::string node = attempt < 0 ? "" : place.NodeOf(attempt);
    if (node.empty()) {
      if (f.follow() && !job_done) return;  // not placed yet
      TaskFails(f, i, absl::FailedPreconditionError(absl::StrCat(t.name, " never ran")), fx);
      return;
    }
    BeginAttempt(f, i, node, attempt, fx);
  }
  bool newer = across && place.attempt > t.attempt && !place.node.empty();
  if (t.out.finished && t.err.finished) {
    if (newer) {
      auto [node, attempt] = NextAttempt(t.attempt, t.node, place);
      BeginAttempt(f, i, node, attempt, fx);
      Advance(f, i, place, job_done, fx);  // at most place.attempt - t.attempt deep
    } else if (!across || job_done) {
      t.done = true;
    }
    return;
  }
  auto job = jobs_.find(f.req.job());
  const JobLogPlaces* places = job != jobs_.end() && job->second.places ? &*job->second.places : nullptr;
  // A LOST node may still hold its stream (a frozen agent): nothing would
  // answer there.
  bool lost = places && places->node_states.count(t.node) && places->node_states.at(t.node) == "LOST";
  if (lost || down_nodes_.count(t.node)) {
    std::string why = Unreachable(t.name, t.attempt, t.node, places);
    if (newer) {
      // The task runs elsewhere now; what this attempt wrote after the part
      // read is out of reach. Say so and go on.
      Queued note{.task = i};
      note.chunk.set_task(t.name);
      note.chunk.set_attempt(t.attempt);
      note.chunk.set_error(absl::StrCat(why, "; anything more it wrote there was not read"));
      Queue(f, std::move(note), fx);
      t.out.finished = t.err.finished = true;
      Advance(f, i, place, job_done, fx);
    } else if (!f.follow() || job_done) {
      TaskFails(f, i, absl::UnavailableError(why), fx);
    }
    return;  // following: wait for the node, or for the task to move
  }
  // The task and its job have ended: read what is left and stop, rather
  // than wait for an end mark that a task whose launch never reached its
  // node does not get.
  bool last = job_done && place.done && (f.pinned() || place.attempt <= t.attempt);
  for (Output* o : {&t.out, &t.err}) {
    bool follow = f.follow() && !last;
    if (o->finished || (o->request != 0 && o->follow_sub == follow)) continue;
    // A seek not answered yet: its first piece (which the agent sends at
    // once) says where it started; asking again now would seek again, at a
    // later end, past what was written in between.
    if (o->request != 0 && o->seek) continue;
    Unsubscribe(*o, fx);
    absl::Status refused;
    if (!Subscribe(f, i, *o, follow, fx, &refused)) {
      TaskFails(f, i, refused, fx);
      return;
    }
  }
}

void LogHub::BeginAttempt(Follower& f, int i, const std::string& node, int attempt, Effects& fx) {
  TaskCursor& t = f.tasks[i];
  for (Output* o : {&t.out, &t.err}) {
    Unsubscribe(*o, fx);
    *o = Output{.err = o->err};
  }
  t.attempt = attempt;
  t.node = node;
  bool seek = ++t.attempts_begun == 1 && (f.req.has_tail_lines() || f.req.since_unix_nanos() > 0);
  t.out.seek = t.err.seek = seek;
  if (!f.follow()) return;
  Queued mark{.task = i};
  mark.chunk.set_task(t.name);
  mark.chunk.set_attempt(attempt);
  mark.chunk.set_attempt_start(true);
  Queue(f, std::move(mark), fx);
}

bool LogHub::Subscribe(Follower& f, int i, Output& o, bool follow, Effects& fx, absl::Status* why) {
  const TaskCursor& t = f.tasks[i];
  int on_node = node_subs_.count(t.node) ? node_subs_.at(t.node) : 0;
  auto mine = node_user_subs_.find({t.node, f.user});
  int user_on_node = mine == node_user_subs_.end() ? 0 : mine->second;
  if (on_node >= options_.node_subscriptions) {
    ++refused_node_;
    *why = absl::ResourceExhaustedError(absl::StrCat(
        "node ", t.node, " already serves ", on_node, " log subscriptions, the most the server opens on one node "
        "(logStreams.perNode ", options_.node_subscriptions, "); the log of ", t.name, " stays there, try again later"));
    return false;
  }
  if (options_.node_subscriptions_per_user > 0 && user_on_node >= options_.node_subscriptions_per_user) {
    ++refused_user_node_;
    *why = absl::ResourceExhaustedError(absl::StrCat(
        "you ('", f.user, "') already hold ", user_on_node, " log subscriptions on node ", t.node,
        ", the most one user may there (logStreams.perUserPerNode ", options_.node_subscriptions_per_user,
        "); end some of your log streams and read ", t.name, " again"));
    return false;
  }
  ++node_subs_[t.node];
  ++node_user_subs_[{t.node, f.user}];
  uint64_t id = next_request_++;
  o.request = id;
  o.follow_sub = follow;
  o.acked = o.received;  // the agent's window starts where it is asked to
  subs_[id] = SubRef{.follower = f.id, .task = i, .err = o.err, .node = t.node, .user = f.user};
  v1::ServerMessage msg;
  v1::LogRead* r = msg.mutable_read_log();
  r->set_request_id(id);
  r->set_job(f.req.job());
  r->set_job_id(f.job_id);
  r->set_role(t.role);
  r->set_index(t.index);
  r->set_attempt(t.attempt);
  r->set_offset(o.received);
  r->set_max_bytes(static_cast<int32_t>(std::min(options_.chunk_bytes, f.window)));
  r->set_stderr(o.err);
  r->set_window_bytes(f.window);
  r->set_follow(follow);
  if (o.seek && f.req.has_tail_lines()) r->set_tail_lines(f.req.tail_lines());
  if (o.seek) r->set_since_unix_nanos(f.req.since_unix_nanos());
  fx.sends.emplace_back(t.node, std::move(msg));
  return true;
}

void LogHub::Unsubscribe(Output& o, Effects& fx) {
  if (o.request == 0) return;
  auto it = subs_.find(o.request);
  if (it != subs_.end()) {
    v1::ServerMessage msg;
    msg.mutable_cancel_log()->set_request_id(o.request);
    fx.sends.emplace_back(it->second.node, std::move(msg));
    EraseSub(it);
  }
  o.request = 0;
}

void LogHub::Take(Follower& f, int i, Output& o, const v1::LogData& d, Effects& fx) {
  TaskCursor& t = f.tasks[i];
  if (!d.error().empty()) {
    EraseSub(o.request);
    o.request = 0;
    if (o.follow_sub || !f.follow()) {
      TaskFails(f, i, absl::NotFoundError(d.error()), fx);
      return;
    }
    o.finished = true;  // the last read of an ended task: it has no log there
    AdvanceCached(f, i, fx);
    return;
  }
  const bool sought = o.seek;
  if (o.seek) {  // the agent chose where to start
    o.seek = false;
    o.received = o.taken = o.acked = d.offset();
  }
  if (d.offset() != o.received) return;  // not the piece that comes next
  int64_t next = d.next_offset() > 0 ? d.next_offset() : d.offset() + static_cast<int64_t>(d.data().size());
  if (!d.data().empty()) {
    Queued q{.task = i, .err = o.err, .end_offset = next};
    q.chunk.set_task(t.name);
    q.chunk.set_attempt(t.attempt);
    q.chunk.set_data(d.data());
    q.chunk.set_stderr(o.err);
    Queue(f, std::move(q), fx);
  }
  o.received = std::max(o.received, next);
  if (d.finished() || (!o.follow_sub && d.eof())) {
    EraseSub(o.request);
    o.request = 0;
    o.finished = true;
    if (!f.follow()) {
      Queued end{.task = i, .err = o.err};
      end.chunk.set_task(t.name);
      end.chunk.set_attempt(t.attempt);
      end.chunk.set_stderr(o.err);
      end.chunk.set_output_end(true);
      Queue(f, std::move(end), fx);
    }
    AdvanceCached(f, i, fx);
  } else if (sought) {
    // Advance waited for where it started (the job may have ended since).
    AdvanceCached(f, i, fx);
  }
}

void LogHub::TaskFails(Follower& f, int i, const absl::Status& why, Effects& fx) {
  TaskCursor& t = f.tasks[i];
  t.done = true;
  Unsubscribe(t.out, fx);
  Unsubscribe(t.err, fx);
  if (f.tasks.size() == 1) {
    End(f, why, /*at_once=*/false, fx);
    return;
  }
  Queued note{.task = i};
  note.chunk.set_task(t.name);
  note.chunk.set_attempt(std::max(t.attempt, 0));
  note.chunk.set_error(std::string(why.message()));
  Queue(f, std::move(note), fx);
  MaybeComplete(f, fx);
}

void LogHub::Queue(Follower& f, Queued item, Effects& fx) {
  if (f.cut_off) return;
  if (f.queue.empty() && !f.in_write) {
    f.waiting_since = clock_->Now();
    if (f.waiting_since + options_.stall_timeout < thread_wakes_at_) cv_.Signal();
  }
  f.queued_bytes += static_cast<int64_t>(item.chunk.data().size());
  f.queue.push_back(std::move(item));
  if (f.wants) {
    f.wants = false;
    fx.ready.push_back(f.sink);
  }
}

void LogHub::MaybeComplete(Follower& f, Effects& fx) {
  if (f.end) return;
  for (const TaskCursor& t : f.tasks) {
    if (!t.done) return;
  }
  End(f, absl::OkStatus(), /*at_once=*/false, fx);
}

void LogHub::End(Follower& f, const absl::Status& status, bool at_once, Effects& fx) {
  if (f.cut_off || (f.end && !at_once)) return;
  if (!f.end) {
    --live_;
    StreamGone(f.user);
  }
  f.end = status;
  for (TaskCursor& t : f.tasks) {
    Unsubscribe(t.out, fx);
    Unsubscribe(t.err, fx);
  }
  if (at_once) {
    f.cut_off = true;
    f.queue.clear();
    f.queued_bytes = 0;
  }
  if (f.wants || at_once) {
    f.wants = false;
    fx.ready.push_back(f.sink);
  }
}

}  // namespace trainyard::server
