// The log line format: stamps written and parsed, a log split into lines as
// its bytes arrive (see log_lines.h).
#include "api/log_lines.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace trainyard::api {

std::string LogStamp(int64_t unix_nanos) { return absl::StrFormat("%019d ", unix_nanos); }

std::optional<int64_t> ParseLogStamp(absl::string_view line) {
  if (line.size() < kLogStampBytes || line[kLogStampBytes - 1] != ' ') return std::nullopt;
  int64_t v = 0;
  for (int i = 0; i < kLogStampBytes - 1; ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(line[i]))) return std::nullopt;
    int digit = line[i] - '0';
    // 19 digits go past int64's largest (9223372036854775807): such a
    // line's start is text, not a stamp.
    if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

std::string FormatLogTime(int64_t unix_nanos) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E9SZ", absl::FromUnixNanos(unix_nanos), absl::UTCTimeZone());
}

void LogSplitter::Add(absl::string_view data, const Emit& emit) {
  std::string joined;
  if (!held_.empty()) {
    joined = held_ + std::string(data);
    held_.clear();
    data = joined;
  }
  while (!data.empty()) {
    bool start = at_line_start_;
    if (start) {
      // Could the line's first bytes still turn out to be a stamp?
      size_t n = std::min<size_t>(data.size(), kLogStampBytes);
      bool maybe = true;
      for (size_t i = 0; i < n && maybe; ++i) {
        maybe = i + 1 == kLogStampBytes ? data[i] == ' ' : absl::ascii_isdigit(static_cast<unsigned char>(data[i]));
      }
      if (maybe && n < kLogStampBytes) {
        held_ = std::string(data);
        return;
      }
      std::optional<int64_t> stamp = ParseLogStamp(data);
      nanos_ = stamp.value_or(0);
      if (stamp) data.remove_prefix(kLogStampBytes);
      if (data.empty()) {  // the line's text comes in the next chunk
        at_line_start_ = false;
        emit(LogPiece{.unix_nanos = nanos_, .text = data, .line_start = true, .line_end = false});
        return;
      }
    }
    size_t nl = data.find('\n');
    size_t len = nl == absl::string_view::npos ? data.size() : nl + 1;
    at_line_start_ = nl != absl::string_view::npos;
    emit(LogPiece{.unix_nanos = nanos_, .text = data.substr(0, len), .line_start = start, .line_end = at_line_start_});
    data.remove_prefix(len);
  }
}

void LogSplitter::Finish(const Emit& emit) {
  if (held_.empty()) return;
  std::string rest;
  rest.swap(held_);
  emit(LogPiece{.unix_nanos = 0, .text = rest, .line_start = true, .line_end = false});
  at_line_start_ = true;
}

}  // namespace trainyard::api
