// Durations as a person reads them in messages and tables: rounded to what
// matters at their size ("850 ms", "5.3 s", "2 min 5 s", "3 h 20 min"),
// never "5.312941s".
#pragma once

#include <string>

#include "absl/time/time.h"

namespace trainyard {

// Below 1 s: whole milliseconds; below 1 min: seconds with one decimal
// ("5.3 s", "12 s" when the decimal is 0); below 1 h: minutes and whole
// seconds; below 1 day: hours and minutes; else days and hours. Zero parts
// are left out ("2 min", not "2 min 0 s"). A negative duration gets a "-".
std::string DurationText(absl::Duration d);

}  // namespace trainyard
