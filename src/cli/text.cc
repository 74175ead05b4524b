// Text helpers of the client verbs (see text.h).
#include "cli/text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/duration_text.h"

namespace trainyard::cli {

std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(s[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Count(int64_t n, const std::string& noun) { return absl::StrCat(n, " ", noun, n == 1 ? "" : "s"); }

std::string TimeText(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", absl::FromUnixMillis(unix_ms), absl::LocalTimeZone());
}

std::string ElapsedText(int64_t start_ms, int64_t end_ms, int64_t now_ms) {
  if (start_ms <= 0) return "-";
  return DurationText(absl::Milliseconds((end_ms > 0 ? end_ms : now_ms) - start_ms));
}

}  // namespace trainyard::cli
