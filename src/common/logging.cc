// Leveled stderr logging.
#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace trainyard {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
constexpr const char* kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};
}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  static constexpr std::string_view kText[] = {"debug", "info", "warning", "error"};
  for (int i = 0; i < 4; ++i) {
    if (text == kText[i]) {
      *level = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void LogLine(LogLevel level, std::string_view component, std::string_view message) {
  std::string line = absl::StrFormat(
      "%s %s %s: %s\n", kNames[static_cast<int>(level)],
      absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()), component, message);
  // One write() per line keeps lines from several threads whole.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace trainyard
