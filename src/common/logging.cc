// Leveled stderr logging.
#include "common/logging.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/str_format.h"

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
  // localtime_r and a fixed format: absl::FormatTime in the local zone
  // costs microseconds a line, which shows at thousands of lines a second.
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  std::string line = absl::StrFormat("%s %02d:%02d:%02d.%03d %s: %s\n", kNames[static_cast<int>(level)],
                                     tm.tm_hour, tm.tm_min, tm.tm_sec,
                                     static_cast<int>(ts.tv_nsec / 1000000), component, message);
  // One write() per line keeps lines from several threads whole.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;  // a log line that stderr cannot take has nowhere else to go
}

}  // namespace trainyard
