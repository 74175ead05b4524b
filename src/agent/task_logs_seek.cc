// TaskLogs::StartOffset: `logs --tail N` and `--since` are decided on the
// node, so only the lines asked for travel. The tail is found by reading
// the log backwards for newlines; the first line since a time by the
// segments' first stamps (the keeper starts each at a line) and then a scan
// forward through the one segment that holds it.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/task_logs.h"
#include "api/log_lines.h"

namespace trainyard::agent {
namespace {

constexpr int64_t kBlock = 64 << 10;

}  // namespace

absl::StatusOr<int64_t> TaskLogs::StartOffset(const TaskKey& key, int attempt, LogStream stream, int tail_lines,
                                              int64_t since_unix_nanos) const {
  std::vector<LogSegment> segments = Segments(key, attempt, stream);
  if (segments.empty()) return absl::NotFoundError(absl::StrCat("no log for task ", key.ToString(), " attempt ", attempt));
  int64_t first = segments.front().base;
  int64_t end = segments.back().base + segments.back().size;
  // Bytes [offset, offset + limit), across segments; shorter where the log
  // ends or was rotated away meanwhile.
  auto read = [&](int64_t offset, int64_t limit) -> std::string {
    std::string data;
    while (static_cast<int64_t>(data.size()) < limit) {
      int64_t at = offset + static_cast<int64_t>(data.size());
      absl::StatusOr<LogChunk> c =
          Read(key, {.attempt = attempt, .stream = stream, .offset = at, .limit = limit - static_cast<int64_t>(data.size())});
      if (!c.ok() || c->data.empty() || c->next_offset != at + static_cast<int64_t>(c->data.size())) break;
      data += c->data;
    }
    return data;
  };
  int64_t start = first;
  if (since_unix_nanos > 0) {
    int64_t from = first;
    for (const LogSegment& s : segments) {
      std::optional<int64_t> stamp = api::ParseLogStamp(read(s.base, api::kLogStampBytes));
      if (stamp && *stamp < since_unix_nanos) from = s.base;
    }
    start = end;
    bool line_start = true;  // the segment begins a line
    for (int64_t at = from; at < end;) {
      std::string block = read(at, kBlock + api::kLogStampBytes);
      if (block.empty()) break;
      size_t i = 0;
      for (; i < std::min<size_t>(block.size(), kBlock); ++i) {
        if (line_start) {
          std::optional<int64_t> stamp = api::ParseLogStamp(absl::string_view(block).substr(i));
          if (stamp && *stamp >= since_unix_nanos) break;
        }
        line_start = block[i] == '\n';
      }
      if (i < std::min<size_t>(block.size(), kBlock)) {
        start = at + static_cast<int64_t>(i);
        break;
      }
      at += static_cast<int64_t>(std::min<size_t>(block.size(), kBlock));
    }
  }
  if (tail_lines >= 0) {
    // The tail's first line begins after the tail_lines-th newline from the
    // end, not counting one that ends the log.
    int64_t found = first;
    int seen = 0;
    for (int64_t to = end; to > first && found == first;) {
      int64_t from = std::max(first, to - kBlock);
      std::string block = read(from, to - from);
      if (static_cast<int64_t>(block.size()) != to - from) break;
      for (int64_t i = static_cast<int64_t>(block.size()) - 1; i >= 0; --i) {
        if (block[i] != '\n' || from + i == end - 1) continue;
        if (++seen == tail_lines) {
          found = from + i + 1;
          break;
        }
      }
      if (tail_lines == 0) found = end;
      to = from;
    }
    start = std::max(start, found);
  }
  return start;
}

}  // namespace trainyard::agent
