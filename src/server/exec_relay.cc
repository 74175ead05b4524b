#include "server/exec_relay.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace trainyard::server {

struct ExecRelay::Session {
  uint64_t id = 0;
  std::string user;
  std::string node;
  std::string task;  // "JOB ROLE/INDEX", for messages
  ExecSinkPtr sink;
  std::deque<v1::ExecResponse> queue;
  bool writing = false;        // a response Next handed out is being written
  int64_t writing_bytes = 0;   // ... its output bytes
  int64_t written = 0;         // output bytes the client's stream has written
  int64_t acked = 0;           // the last acknowledgement sent to the agent
  int64_t input_sent = 0;      // input bytes sent to the agent
  int64_t input_taken = 0;     // ... that the command has taken
  bool started = false;        // the agent started the command
  int64_t queued = 0;          // output bytes in `queue`
  bool read_waits = false;     // the stream waits for CanRead
  bool agent_done = false;     // the agent's session is over (or its node gone)
  bool ended = false;          // the stream ends with `end` after the queue
  absl::Status end;
};

// What to do once the lock is released.
struct ExecRelay::Effects {
  std::vector<std::pair<std::string, v1::ServerMessage>> sends;
  std::vector<ExecSinkPtr> ready;
};

ExecRelay::ExecRelay(LogBackend* backend, ExecRelayOptions options)
    : backend_(backend), options_(options), next_id_(1) {}

ExecRelay::~ExecRelay() = default;

namespace {
v1::ServerMessage CloseMessage(uint64_t id) {
  v1::ServerMessage msg;
  msg.mutable_exec_input()->set_request_id(id);
  msg.mutable_exec_input()->set_close(true);
  return msg;
}
}  // namespace

void ExecRelay::Execute(Effects& fx) {
  for (auto& [node, msg] : fx.sends) SendStreamOrder(*backend_, node, std::move(msg));
  for (const ExecSinkPtr& sink : fx.ready) sink->Ready();
}

void ExecRelay::EndLocked(Session& s, absl::Status status, Effects& fx) {
  if (s.ended) return;
  s.ended = true;
  s.end = std::move(status);
  s.agent_done = true;
  fx.ready.push_back(s.sink);
}

absl::StatusOr<uint64_t> ExecRelay::Open(const v1::ExecStart& start, ExecSinkPtr sink, const std::string& user,
                                         uint64_t job_id) {
  if (start.job().empty()) return absl::InvalidArgumentError("job: must be given");
  if (start.role().empty()) return absl::InvalidArgumentError("role: must be given");
  if (start.index() < 0) return absl::InvalidArgumentError("index: must not be negative");
  if (start.command().empty() || start.command(0).empty()) {
    return absl::InvalidArgumentError("command: must be given (the program to run in the task)");
  }
  int64_t bytes = 0;
  for (const std::string& arg : start.command()) bytes += static_cast<int64_t>(arg.size()) + 1;
  if (bytes > kMaxCommandBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("command: ", bytes, " bytes of arguments, more than the ", kMaxCommandBytes, " allowed"));
  }
  if (start.rows() < 0 || start.cols() < 0) return absl::InvalidArgumentError("rows, cols: must not be negative");
  std::string task = absl::StrCat(start.role(), "/", start.index());
  absl::StatusOr<JobLogPlaces> places = backend_->Places(start.job());
  if (!places.ok()) return places.status();
  if (job_id != 0 && places->job_id != job_id) {
    return absl::NotFoundError(absl::StrCat("job '", start.job(), "' does not exist"));
  }
  const TaskLogPlace* place = nullptr;
  for (const TaskLogPlace& t : places->tasks) {
    if (t.role == start.role() && t.index == start.index()) place = &t;
  }
  if (place == nullptr) return absl::NotFoundError(absl::StrCat("job ", start.job(), " has no task ", task));
  if (place->done || place->node.empty() || places->job_done) {
    return absl::FailedPreconditionError(absl::StrCat("task ", task, " of job ", start.job(),
                                                      " is not running now (job ", v1::JobState_Name(places->job_state),
                                                      "): a command runs only in a running task"));
  }
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
      ++refused_;
      return absl::ResourceExhaustedError(absl::StrCat("the server relays ", options_.max_sessions,
                                                       " exec sessions already (its limit); try again later"));
    }
    if (options_.max_sessions_per_user > 0 && by_user_[user] >= options_.max_sessions_per_user) {
      ++refused_;
      return absl::ResourceExhaustedError(absl::StrCat("user ", user.empty() ? "(anonymous)" : user, " has ",
                                                       options_.max_sessions_per_user,
                                                       " exec sessions open already (the most for one user)"));
    }
    id = next_id_++;
    auto s = std::make_unique<Session>();
    s->id = id;
    s->user = user;
    s->node = place->node;
    s->task = absl::StrCat("job ", start.job(), " task ", task);
    s->sink = std::move(sink);
    sessions_[id] = std::move(s);
    ++by_user_[user];
    ++opened_;
  }
  v1::ExecOpen open;
  open.set_request_id(id);
  open.set_job(start.job());
  open.set_role(start.role());
  open.set_index(start.index());
  open.set_job_id(places->job_id);
  *open.mutable_command() = start.command();
  open.set_tty(start.tty());
  open.set_stdin(start.stdin());
  open.set_rows(start.rows());
  open.set_cols(start.cols());
  open.set_term(start.term());
  open.set_user(user);
  open.set_window_bytes(options_.window_bytes);
  if (!backend_->OpenExec(place->node, std::move(open))) {
    Close(id);
    return absl::UnavailableError(
        absl::StrCat("node ", place->node, " of task ", task, " is not connected to the server now"));
  }
  return id;
}

void ExecRelay::Input(uint64_t id, const v1::ExecRequest& request) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second->agent_done) return;
    Session& s = *it->second;
    // In pieces of at most a quarter of the input window: one large
    // message of the client's is not one large message to the agent.
    const std::string& data = request.stdin();
    const size_t piece = static_cast<size_t>(std::max<int64_t>(1, options_.input_window_bytes / 4));
    size_t at = 0;
    do {
      v1::ServerMessage msg;
      v1::ExecInput* in = msg.mutable_exec_input();
      in->set_request_id(id);
      size_t n = std::min(piece, data.size() - at);
      in->set_data(data.substr(at, n));
      at += n;
      bool last = at >= data.size();
      if (last) {
        in->set_eof(request.stdin_eof());
        if (request.rows() > 0 && request.cols() > 0) {
          in->set_rows(request.rows());
          in->set_cols(request.cols());
        }
      }
      fx.sends.emplace_back(s.node, std::move(msg));
    } while (at < data.size());
    s.input_sent += static_cast<int64_t>(data.size());
  }
  Execute(fx);
}

bool ExecRelay::CanRead(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  Session& s = *it->second;
  if (s.agent_done) return true;  // input is dropped now; reading finds the client's end
  bool room = s.input_sent - s.input_taken < options_.input_window_bytes;
  s.read_waits = !room;
  return room;
}

ExecNext ExecRelay::Next(uint64_t id) {
  absl::MutexLock lock(&mu_);
  ExecNext next;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    next.kind = ExecNext::Kind::kEnd;
    next.end = absl::CancelledError("the session is closed");
    return next;
  }
  Session& s = *it->second;
  if (s.writing) return next;
  if (!s.queue.empty()) {
    next.kind = ExecNext::Kind::kResponse;
    next.response = std::move(s.queue.front());
    s.queue.pop_front();
    s.writing = true;
    s.writing_bytes = static_cast<int64_t>(next.response.stdout().size() + next.response.stderr().size());
    s.queued -= s.writing_bytes;
    return next;
  }
  if (s.ended) {
    next.kind = ExecNext::Kind::kEnd;
    next.end = s.end;
  }
  return next;
}

void ExecRelay::Written(uint64_t id) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    Session& s = *it->second;
    s.writing = false;
    s.written += s.writing_bytes;
    s.writing_bytes = 0;
    // Acknowledged in steps of a quarter window, or when all is written.
    if (!s.agent_done && s.written > s.acked && (s.written - s.acked >= options_.window_bytes / 4 || s.queue.empty())) {
      s.acked = s.written;
      v1::ServerMessage msg;
      msg.mutable_exec_input()->set_request_id(id);
      msg.mutable_exec_input()->set_acked(s.acked);
      fx.sends.emplace_back(s.node, std::move(msg));
    }
  }
  Execute(fx);
}

void ExecRelay::Close(uint64_t id) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    Session& s = *it->second;
    if (!s.agent_done) fx.sends.emplace_back(s.node, CloseMessage(id));
    if (--by_user_[s.user] <= 0) by_user_.erase(s.user);
    sessions_.erase(it);
  }
  Execute(fx);
}

bool ExecRelay::OnExecOutput(const std::string& node, const v1::ExecOutput& out) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(out.request_id());
    if (it == sessions_.end() || it->second->node != node) return false;
    Session& s = *it->second;
    if (s.agent_done) return true;
    bool wake = false;
    if (out.started()) {
      s.started = true;
      v1::ExecResponse r;
      r.set_node(node);
      r.set_attempt(out.attempt());
      s.queue.push_back(std::move(r));
      wake = true;
    }
    bool over = false;
    if (!out.data().empty()) {
      s.queued += static_cast<int64_t>(out.data().size());
      over = s.queued > 2 * options_.window_bytes;
      if (over) {
        // The agent sent past the window it was given: not a peer to follow.
        EndLocked(s, absl::InternalError(absl::StrCat("node ", node, " sent more output than the window allows")),
                  fx);
        fx.sends.emplace_back(s.node, CloseMessage(s.id));
        wake = false;  // EndLocked woke it
      } else {
        v1::ExecResponse r;
        if (out.stderr()) {
          r.set_stderr(out.data());
        } else {
          r.set_stdout(out.data());
        }
        s.queue.push_back(std::move(r));
        wake = true;
      }
    }
    if (!over && out.input_taken() > s.input_taken) {
      s.input_taken = std::min(out.input_taken(), s.input_sent);
      if (s.read_waits && s.input_sent - s.input_taken < options_.input_window_bytes) {
        s.read_waits = false;
        wake = true;
      }
    }
    if (!over && out.exited()) {
      // A refusal before the command ran is the stream's error; an end is
      // its last response.
      if (!s.started) {
        // The agent's kind of refusal; one it does not name is a task's
        // state the command could not run in.
        absl::StatusCode code = out.code() > 0 && out.code() <= 16 ? static_cast<absl::StatusCode>(out.code())
                                                                   : absl::StatusCode::kFailedPrecondition;
        EndLocked(s, absl::Status(code, out.error().empty() ? "the node refused the command" : out.error()), fx);
      } else {
        v1::ExecResponse r;
        r.set_exited(true);
        r.set_exit_code(out.exit_code());
        r.set_signal(out.signal());
        r.set_message(out.error());
        s.queue.push_back(std::move(r));
        EndLocked(s, absl::OkStatus(), fx);
      }
      wake = false;  // EndLocked woke it
    }
    if (wake) fx.ready.push_back(s.sink);
  }
  Execute(fx);
  return true;
}

void ExecRelay::OnNodeDisconnected(const std::string& node) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, s] : sessions_) {
      if (s->node != node || s->agent_done) continue;
      // The session may be on a stream the node opened since (this one's
      // end came late): hung up on there. Sent nowhere when it has none.
      fx.sends.emplace_back(node, CloseMessage(s->id));
      EndLocked(*s,
                absl::UnavailableError(absl::StrCat("node ", node, " of ", s->task,
                                                    " left the server: how the command ended is not known")),
                fx);
    }
  }
  Execute(fx);
}

ExecRelayStats ExecRelay::Stats() const {
  absl::MutexLock lock(&mu_);
  return {.open = static_cast<int>(sessions_.size()), .opened = opened_, .refused = refused_};
}

}  // namespace trainyard::server
