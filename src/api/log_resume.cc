#include "api/log_resume.h"

#include <algorithm>

namespace trainyard::api {

bool LogResume::Take(v1::LogChunk& chunk) {
  if (!chunk.error().empty() || chunk.output_end()) return true;
  if (chunk.attempt_start()) {
    auto [it, added] = attempts_.try_emplace(chunk.task(), chunk.attempt());
    if (!added && it->second == chunk.attempt()) return false;  // brought again after a resume
    it->second = chunk.attempt();
    return true;
  }
  if (chunk.data().empty()) return true;
  Output& o = outputs_[{chunk.task(), chunk.stderr()}];
  if (o.attempt != chunk.attempt()) {
    o = Output();  // a new attempt: its log starts anew
    o.attempt = chunk.attempt();
  }
  std::string out;
  o.splitter.Add(chunk.data(), [&](const LogPiece& piece) { Pass(o, piece, &out); });
  if (out.empty()) return false;
  chunk.set_data(std::move(out));
  return true;
}

void LogResume::Pass(Output& o, const LogPiece& piece, std::string* out) {
  absl::string_view text = piece.text;
  if (piece.line_start) {
    o.skip_line = false;
    if (o.replaying) {
      if (piece.unix_nanos < o.stamp) {
        o.skip_line = true;  // before the last line printed
        return;
      }
      if (piece.unix_nanos == o.stamp && ++o.seen_same < o.same) {
        o.skip_line = true;  // an earlier line with the same stamp, printed whole
        return;
      }
      o.replaying = false;
      if (piece.unix_nanos == o.stamp) {
        // The line the first stream was in: the printer has its start.
        o.skip_bytes = o.into_line;
        size_t n = std::min<size_t>(o.skip_bytes, text.size());
        o.skip_bytes -= n;
        text.remove_prefix(n);
        out->append(text.data(), text.size());
        o.into_line += text.size();
        return;
      }
    }
    if (piece.unix_nanos == o.stamp) {
      ++o.same;
    } else {
      o.stamp = piece.unix_nanos;
      o.same = 1;
    }
    o.into_line = text.size();
    if (piece.unix_nanos > 0) out->append(LogStamp(piece.unix_nanos));
    out->append(text.data(), text.size());
    return;
  }
  if (o.skip_line) return;
  if (o.skip_bytes > 0) {
    size_t n = std::min<size_t>(o.skip_bytes, text.size());
    o.skip_bytes -= n;
    text.remove_prefix(n);
  }
  out->append(text.data(), text.size());
  o.into_line += text.size();
}

void LogResume::Resume(v1::LogsRequest& req, int64_t now) {
  const int64_t recent = now - kDeliveryLagNanos;
  // Outputs not seen yet: from when the first stream opened.
  int64_t since = std::max(opened_ - kClockSkewNanos, recent);
  for (auto& [key, o] : outputs_) {
    if (o.stamp < 0) continue;
    since = std::min(since, std::max(o.stamp, recent));
    o.replaying = true;
    o.seen_same = 0;
    o.skip_bytes = 0;
    o.skip_line = false;
    o.splitter = LogSplitter();  // a stamp cut off by the end is brought again whole
  }
  req.set_since_unix_nanos(std::max<int64_t>({req.since_unix_nanos(), since, 0}));
  req.clear_tail_lines();
}

}  // namespace trainyard::api
