// Log files are plain files appended by the task itself (its stdout/stderr
// are opened O_APPEND onto them), so the agent never copies output and a
// reader sees it as soon as the task writes it.
#include "agent/task_logs.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace trainyard::agent {

std::string TaskLogs::TaskDir(const TaskKey& key) const {
  return absl::StrCat(data_dir_, "/logs/", key.job, "/", key.role, "-", key.index);
}

std::string TaskLogs::Path(const TaskKey& key, int attempt, LogStream stream) const {
  return absl::StrCat(TaskDir(key), "/attempt-", attempt,
                      stream == LogStream::kStdout ? ".stdout" : ".stderr");
}

std::string TaskLogs::WaitStatusPath(const TaskKey& key, int attempt) const {
  return absl::StrCat(TaskDir(key), "/attempt-", attempt, ".wait");
}

absl::Status TaskLogs::Prepare(const TaskKey& key) const {
  std::error_code ec;
  std::filesystem::create_directories(TaskDir(key), ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", TaskDir(key), ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status TaskLogs::MarkEnded(const TaskKey& key, int attempt, const TaskExit& exit) const {
  std::string path = absl::StrCat(TaskDir(key), "/attempt-", attempt, ".exit");
  std::ofstream out(path, std::ios::trunc);
  out << "exit_code=" << exit.exit_code << "\nsignal=" << exit.signal
      << "\noom_killed=" << (exit.oom_killed ? 1 : 0) << "\nmessage=" << exit.message << "\n";
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

bool TaskLogs::Ended(const TaskKey& key, int attempt) const {
  struct stat st;
  return stat(absl::StrCat(TaskDir(key), "/attempt-", attempt, ".exit").c_str(), &st) == 0;
}

absl::StatusOr<std::vector<int>> TaskLogs::Attempts(const TaskKey& key) const {
  if (absl::Status s = key.Validate(); !s.ok()) return s;
  std::vector<int> attempts;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(TaskDir(key), ec)) {
    std::string file = entry.path().filename().string();
    absl::string_view name = file;
    int attempt = 0;
    if (absl::ConsumePrefix(&name, "attempt-") && absl::ConsumeSuffix(&name, ".stdout") &&
        absl::SimpleAtoi(name, &attempt)) {
      attempts.push_back(attempt);
    }
  }
  if (attempts.empty()) return absl::NotFoundError(absl::StrCat("no logs for task ", key.ToString()));
  std::sort(attempts.begin(), attempts.end());
  return attempts;
}

absl::StatusOr<LogChunk> TaskLogs::Read(const TaskKey& key, const LogReadOptions& options) const {
  if (absl::Status s = key.Validate(); !s.ok()) return s;
  int attempt = options.attempt;
  if (attempt < 0) {
    absl::StatusOr<std::vector<int>> attempts = Attempts(key);
    if (!attempts.ok()) return attempts.status();
    attempt = attempts->back();
  }
  // Check "ended" before reading, so data written before the end is never
  // missed by a reader that sees complete = true.
  bool ended = Ended(key, attempt);
  std::string path = Path(key, attempt, options.stream);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no log for task ", key.ToString(), " attempt ", attempt));
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  if (options.offset < 0 || options.offset > size) {
    return absl::OutOfRangeError(absl::StrCat("offset ", options.offset, " is outside the log (size ", size, ")"));
  }
  LogChunk chunk;
  int64_t n = std::min<int64_t>(options.limit, size - options.offset);
  chunk.data.resize(n);
  in.seekg(options.offset);
  in.read(chunk.data.data(), n);
  chunk.next_offset = options.offset + n;
  chunk.at_end = chunk.next_offset == size;
  chunk.complete = ended && chunk.at_end;
  return chunk;
}

absl::Status TaskLogs::Follow(const TaskKey& key, const LogReadOptions& options,
                              const std::function<bool(const std::string&)>& sink,
                              absl::Duration poll) const {
  LogReadOptions next = options;
  if (next.attempt < 0) {
    absl::StatusOr<std::vector<int>> attempts = Attempts(key);
    if (!attempts.ok()) return attempts.status();
    next.attempt = attempts->back();
  }
  while (true) {
    absl::StatusOr<LogChunk> chunk = Read(key, next);
    if (!chunk.ok()) return chunk.status();
    if (!chunk->data.empty() && !sink(chunk->data)) return absl::OkStatus();
    if (chunk->complete) return absl::OkStatus();
    if (chunk->data.empty()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(poll));
    next.offset = chunk->next_offset;
  }
}

}  // namespace trainyard::agent
