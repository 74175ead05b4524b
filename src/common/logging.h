// Minimal leveled logging to stderr, one line per message, safe from several
// threads. Daemons set the level from their --log-level flag.
#pragma once

#include <string_view>

#include "absl/strings/str_format.h"

namespace trainyard {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Sets the lowest level that is printed (default kInfo).
void SetLogLevel(LogLevel level);
// Parses "debug", "info", "warning", "error"; returns false when unknown.
bool ParseLogLevel(std::string_view text, LogLevel* level);
bool LogEnabled(LogLevel level);
// Writes one line "LEVEL time component: message" to stderr.
void LogLine(LogLevel level, std::string_view component, std::string_view message);

template <typename... Args>
void Log(LogLevel level, std::string_view component, const absl::FormatSpec<Args...>& format,
         const Args&... args) {
  if (LogEnabled(level)) LogLine(level, component, absl::StrFormat(format, args...));
}

}  // namespace trainyard
