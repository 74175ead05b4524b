// Human-readable durations (see duration_text.h).
#include "common/duration_text.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard {
namespace {

// "A U1 B U2", leaving out a zero B.
std::string TwoUnits(int64_t a, const char* u1, int64_t b, const char* u2) {
  return b == 0 ? absl::StrCat(a, " ", u1) : absl::StrCat(a, " ", u1, " ", b, " ", u2);
}

}  // namespace

std::string DurationText(absl::Duration d) {
  if (d < absl::ZeroDuration()) return absl::StrCat("-", DurationText(-d));
  if (d == absl::InfiniteDuration()) return "forever";
  if (d < absl::Seconds(1)) return absl::StrCat(absl::ToInt64Milliseconds(d + absl::Microseconds(500)), " ms");
  if (d < absl::Seconds(59.95)) {
    double tenths = std::round(absl::ToDoubleSeconds(d) * 10);
    int64_t t = static_cast<int64_t>(tenths);
    return t % 10 == 0 ? absl::StrCat(t / 10, " s") : absl::StrFormat("%.1f s", tenths / 10);
  }
  int64_t s = absl::ToInt64Seconds(d + absl::Milliseconds(500));
  if (s < 3600) return TwoUnits(s / 60, "min", s % 60, "s");
  int64_t m = (s + 30) / 60;
  if (m < 24 * 60) return TwoUnits(m / 60, "h", m % 60, "min");
  int64_t h = (m + 30) / 60;
  return TwoUnits(h / 24, "d", h % 24, "h");
}

}  // namespace trainyard
