// Log files are written by the task's keeper as the task writes (see
// log_capture.h: stamped lines, rotated segments); readers see a log as one
// byte stream from offset 0 whose oldest part may have been dropped.
#include "agent/task_logs.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "api/log_lines.h"

namespace trainyard::agent {

std::string TaskLogs::TaskDir(const TaskKey& key) const {
  return absl::StrCat(data_dir_, "/logs/", key.Place());
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

namespace {

// "attempt-N.stdout" or "attempt-N.stdout@BASE": N, the stream and BASE.
bool ParseLogName(absl::string_view name, int* attempt, std::string* stream, int64_t* base) {
  if (!absl::ConsumePrefix(&name, "attempt-")) return false;
  size_t dot = name.find('.');
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), attempt)) return false;
  absl::string_view rest = name.substr(dot + 1);
  size_t at = rest.find('@');
  *base = 0;
  if (at != absl::string_view::npos && !absl::SimpleAtoi(rest.substr(at + 1), base)) return false;
  *stream = std::string(rest.substr(0, at));
  return *stream == "stdout" || *stream == "stderr";
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

}  // namespace

absl::StatusOr<std::vector<int>> TaskLogs::Attempts(const TaskKey& key) const {
  if (absl::Status s = key.Validate(); !s.ok()) return s;
  std::set<int> attempts;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(TaskDir(key), ec)) {
    int attempt = 0;
    std::string stream;
    int64_t base;
    if (ParseLogName(entry.path().filename().string(), &attempt, &stream, &base) && stream == "stdout") {
      attempts.insert(attempt);
    }
  }
  if (attempts.empty()) return absl::NotFoundError(absl::StrCat("no logs for task ", key.ToString()));
  return std::vector<int>(attempts.begin(), attempts.end());
}

std::vector<LogSegment> TaskLogs::Segments(const TaskKey& key, int attempt, LogStream stream) const {
  std::vector<LogSegment> segments;
  std::string want = stream == LogStream::kStdout ? "stdout" : "stderr";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(TaskDir(key), ec)) {
    int a = 0;
    std::string s;
    int64_t base = 0;
    if (!ParseLogName(entry.path().filename().string(), &a, &s, &base) || a != attempt || s != want) continue;
    int64_t size = FileSize(entry.path().string());
    if (size >= 0) segments.push_back({.base = base, .size = size, .path = entry.path().string()});
  }
  std::sort(segments.begin(), segments.end(), [](const LogSegment& a, const LogSegment& b) { return a.base < b.base; });
  return segments;
}

int64_t TaskLogs::WrittenBytes(const TaskKey& key, int attempt) const {
  int64_t bytes = 0;
  for (LogStream stream : {LogStream::kStdout, LogStream::kStderr}) {
    std::vector<LogSegment> segments = Segments(key, attempt, stream);
    if (!segments.empty()) bytes += segments.back().base + segments.back().size;
  }
  return bytes;
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
  // The keeper may remove a segment between the listing and the read: list
  // again (it only removes old ones, so this ends).
  for (int tries = 0;; ++tries) {
    std::vector<LogSegment> segments = Segments(key, attempt, options.stream);
    if (segments.empty()) {
      return absl::NotFoundError(absl::StrCat("no log for task ", key.ToString(), " attempt ", attempt));
    }
    absl::StatusOr<LogChunk> chunk = ReadSegments(segments, options);
    if (chunk.ok()) {
      chunk->complete = ended && chunk->at_end;
      return chunk;
    }
    if (!absl::IsUnavailable(chunk.status()) || tries == 3) return chunk.status();
  }
}

absl::StatusOr<LogChunk> TaskLogs::ReadSegments(const std::vector<LogSegment>& segments,
                                                const LogReadOptions& options) const {
  int64_t end = segments.back().base + segments.back().size;
  if (options.offset < 0 || options.offset > end) {
    return absl::OutOfRangeError(absl::StrCat("offset ", options.offset, " is outside the log (size ", end, ")"));
  }
  LogChunk chunk;
  if (options.offset < segments.front().base) {
    // Rotated away: say so where the bytes were, and go on after them.
    std::ifstream first(segments.front().path, std::ios::binary);
    std::string head(api::kLogStampBytes, '\0');
    first.read(head.data(), api::kLogStampBytes);
    std::optional<int64_t> stamp = api::ParseLogStamp(head);
    chunk.data = absl::StrCat(stamp ? api::LogStamp(*stamp) : "", "[trainyard: ", segments.front().base - options.offset,
                              " bytes of this log were dropped here; the agent keeps the newest part of each "
                              "attempt's log, up to its --log-max-attempt-bytes]\n");
    chunk.next_offset = segments.front().base;
    return chunk;
  }
  const LogSegment* seg = &segments.front();
  for (const LogSegment& s : segments) {
    if (s.base <= options.offset) seg = &s;
  }
  std::ifstream in(seg->path, std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat(seg->path, " was removed"));
  int64_t n = std::min<int64_t>(options.limit, seg->base + seg->size - options.offset);
  chunk.data.resize(n);
  in.seekg(options.offset - seg->base);
  in.read(chunk.data.data(), n);
  chunk.data.resize(in.gcount());
  chunk.next_offset = options.offset + static_cast<int64_t>(chunk.data.size());
  chunk.at_end = chunk.next_offset == end;
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
