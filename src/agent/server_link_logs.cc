// The agent's stream to the server: the server's log reads (one-off reads
// and followed logs, pushed by the log pusher) and `trainyard exec`
// sessions in tasks, and their pieces on the stream.
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/server_link.h"

namespace trainyard::agent {

void ServerLink::HandleLogRead(const v1::LogRead& read) {
  LogReadOptions opt;
  opt.attempt = read.attempt();
  opt.offset = read.offset();
  opt.limit = read.max_bytes() > 0 ? read.max_bytes() : 65536;
  opt.stream = read.stderr() ? LogStream::kStderr : LogStream::kStdout;
  v1::AgentMessage msg;
  v1::LogData* d = msg.mutable_log();
  d->set_request_id(read.request_id());
  d->set_attempt(read.attempt());
  TaskKey key = core_->supervisor().Holding(TaskKey{read.job(), read.role(), read.index(), read.job_id()});
  absl::StatusOr<LogChunk> chunk = core_->logs().Read(key, opt);
  if (chunk.ok()) {
    d->set_data(chunk->data);
    d->set_eof(chunk->data.empty() || chunk->complete);
    d->set_finished(chunk->complete);
  } else if (chunk.status().code() == absl::StatusCode::kOutOfRange) {
    d->set_eof(true);
    d->set_finished(core_->logs().Ended(key, read.attempt()));
  } else {
    d->set_error(std::string(chunk.status().message()));
  }
  Write(msg);
}

void ServerLink::SubscribeLog(const v1::LogRead& read) {
  LogSubscription sub{.id = read.request_id(),
                      .key = core_->supervisor().Holding(TaskKey{read.job(), read.role(), read.index(), read.job_id()}),
                      .attempt = read.attempt(),
                      .stream = read.stderr() ? LogStream::kStderr : LogStream::kStdout,
                      .offset = read.offset(),
                      .chunk_bytes = read.max_bytes() > 0 ? read.max_bytes() : 65536,
                      .window_bytes = read.window_bytes(),
                      .follow = read.follow(),
                      .tail_lines = read.has_tail_lines() ? read.tail_lines() : -1,
                      .since_unix_nanos = read.since_unix_nanos()};
  {
    absl::MutexLock lock(&mu_);
    sub.tag = static_cast<uint64_t>(session_);
  }
  absl::Status st = pusher_->Subscribe(sub);
  if (st.ok()) return;
  v1::AgentMessage msg;
  msg.mutable_log()->set_request_id(read.request_id());
  msg.mutable_log()->set_attempt(read.attempt());
  msg.mutable_log()->set_error(absl::StrCat("node ", core_->node_info().name, " cannot send the log of ",
                                            sub.key.ToString(), ": ", st.message()));
  Write(msg);
}

bool ServerLink::WriteLogPiece(const LogPiece& piece) {
  v1::AgentMessage msg;
  v1::LogData* d = msg.mutable_log();
  d->set_request_id(piece.id);
  d->set_attempt(piece.attempt);
  d->set_offset(piece.offset);
  d->set_next_offset(piece.next_offset);
  d->set_data(piece.data);
  d->set_eof(piece.eof);
  d->set_finished(piece.finished);
  d->set_error(piece.error);
  return Write(msg, static_cast<int64_t>(piece.tag));
}

void ServerLink::OpenExec(const v1::ExecOpen& open) {
  ExecOrder order{.id = open.request_id(),
                  .key = core_->supervisor().Holding(TaskKey{open.job(), open.role(), open.index(), open.job_id()}),
                  .command = {open.command().begin(), open.command().end()},
                  .tty = open.tty(),
                  .stdin = open.stdin(),
                  .rows = open.rows(),
                  .cols = open.cols(),
                  .term = open.term(),
                  .user = open.user()};
  if (open.window_bytes() > 0) order.window_bytes = open.window_bytes();
  uint64_t tag;
  {
    absl::MutexLock lock(&mu_);
    tag = static_cast<uint64_t>(session_);
  }
  exec_->Open(order, tag);
}

bool ServerLink::WriteExecPiece(const ExecPiece& piece) {
  v1::AgentMessage msg;
  v1::ExecOutput* o = msg.mutable_exec();
  o->set_request_id(piece.id);
  o->set_data(piece.data);
  o->set_stderr(piece.is_stderr);
  o->set_offset(piece.offset);
  o->set_started(piece.started);
  o->set_attempt(piece.attempt);
  o->set_exited(piece.exited);
  o->set_exit_code(piece.exit_code);
  o->set_signal(piece.signal);
  if (!piece.error.empty()) o->set_error(absl::StrCat("node ", node_name_, ": ", piece.error));
  o->set_code(piece.code);
  o->set_input_taken(piece.input_taken);
  return Write(msg, static_cast<int64_t>(piece.tag));
}

}  // namespace trainyard::agent
