// Text the client verbs print: user-supplied strings made safe for a
// terminal, counts with their noun, times and elapsed durations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace trainyard::cli {

// `s` with control characters escaped so that a user name, a reason or an
// event text cannot move the cursor, clear the screen or forge lines:
// \n, \r, \t as themselves, other C0 bytes and DEL as \xNN, C1 controls
// (U+0080..U+009F) as \u00NN. Other UTF-8 passes through.
std::string Printable(std::string_view s);

// "1 task", "2 tasks": `n` and the noun, with an "s" unless n is 1.
std::string Count(int64_t n, const std::string& noun);

// A Unix time in ms as local time, "2026-12-01 10:00:51 UTC"; "-" for 0.
std::string TimeText(int64_t unix_ms);

// How long a job ran or has been running: from start to end (end 0: to
// now), as DurationText; "-" when it has not started.
std::string ElapsedText(int64_t start_ms, int64_t end_ms, int64_t now_ms);

}  // namespace trainyard::cli
