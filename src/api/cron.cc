#include "api/cron.h"

#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace trainyard::api {
namespace {

struct Field {
  const char* name;
  int low;
  int high;
  const char* const* names;  // nullptr, or the names of low..low+count-1
  int names_from;
  int names_count;
  int open_high;  // where `*` and `a/n` end (weekdays: 6, Saturday; 7 only when named)
};

constexpr const char* kMonths[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                   "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* kWeekdays[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

constexpr Field kSecond{"second", 0, 59, nullptr, 0, 0, 59};
constexpr Field kMinute{"minute", 0, 59, nullptr, 0, 0, 59};
constexpr Field kHour{"hour", 0, 23, nullptr, 0, 0, 23};
constexpr Field kDay{"day of month", 1, 31, nullptr, 0, 0, 31};
constexpr Field kMonth{"month", 1, 12, kMonths, 1, 12, 12};
constexpr Field kWeekday{"day of week", 0, 7, kWeekdays, 0, 7, 6};

// A number or (for months and weekdays) a name.
absl::StatusOr<int> Value(absl::string_view text, const Field& f, const std::string& where) {
  int v = 0;
  if (absl::SimpleAtoi(text, &v)) {
    if (v < f.low || v > f.high) {
      return absl::InvalidArgumentError(absl::StrCat(where, v, " is outside ", f.low, "-", f.high));
    }
    return v;
  }
  std::string lower = absl::AsciiStrToLower(text);
  for (int i = 0; i < f.names_count; ++i) {
    if (lower == f.names[i]) return f.names_from + i;
  }
  return absl::InvalidArgumentError(absl::StrCat(where, "'", text, "' is not a number",
                                                 f.names ? " or a name" : "", " (", f.low, "-", f.high, ")"));
}

// Sets in `bits` (indexed by value) what `text` names; `any` says it was `*`.
template <size_t N>
absl::Status ParseField(absl::string_view text, int index, const Field& f, std::bitset<N>* bits, bool* any) {
  const std::string where = absl::StrCat("field ", index, " (", f.name, "): ");
  // As Vixie cron: a field that begins with `*` (`*/2` too) restricts
  // nothing in the day-of-month / day-of-week rule.
  *any = !text.empty() && (text[0] == '*' || text[0] == '?');
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "empty"));
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    if (part.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "an empty item in '", text, "'"));
    absl::string_view range = part;
    int step = 1;
    if (size_t slash = part.find('/'); slash != absl::string_view::npos) {
      range = part.substr(0, slash);
      if (!absl::SimpleAtoi(part.substr(slash + 1), &step) || step < 1 || step > f.high) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the step in '", part, "' is not a whole number in 1-", f.high));
      }
    }
    int first = f.low, last = f.open_high;
    if (range != "*" && range != "?") {
      size_t dash = range.find('-');
      absl::StatusOr<int> a = Value(range.substr(0, dash), f, where);
      if (!a.ok()) return a.status();
      first = *a;
      last = part.find('/') != absl::string_view::npos && dash == absl::string_view::npos ? std::max(*a, f.open_high) : *a;
      if (dash != absl::string_view::npos) {
        absl::StatusOr<int> b = Value(range.substr(dash + 1), f, where);
        if (!b.ok()) return b.status();
        last = *b;
      }
      if (last < first) {
        return absl::InvalidArgumentError(absl::StrCat(where, "the range '", range, "' runs backwards"));
      }
    }
    for (int v = first; v <= last; v += step) bits->set(static_cast<size_t>(v));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CronSchedule> CronSchedule::Parse(absl::string_view text) {
  if (text.size() > 256) return absl::InvalidArgumentError("longer than 256 characters");
  std::string t(absl::StripAsciiWhitespace(text));
  static const std::array<std::pair<const char*, const char*>, 8> kMacros = {{{"@yearly", "0 0 1 1 *"},
                                                                              {"@annually", "0 0 1 1 *"},
                                                                              {"@monthly", "0 0 1 * *"},
                                                                              {"@weekly", "0 0 * * 0"},
                                                                              {"@daily", "0 0 * * *"},
                                                                              {"@midnight", "0 0 * * *"},
                                                                              {"@hourly", "0 * * * *"},
                                                                              {"@reboot", nullptr}}};
  if (!t.empty() && t[0] == '@') {
    for (const auto& [macro, fields] : kMacros) {
      if (absl::AsciiStrToLower(t) != macro) continue;
      if (fields == nullptr) return absl::InvalidArgumentError("@reboot is not a schedule here: a server has no boot");
      t = fields;
      break;
    }
    if (t[0] == '@') {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t, "' is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"));
    }
  }
  std::vector<absl::string_view> fields = absl::StrSplit(t, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() != 5 && fields.size() != 6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", t, "' has ", fields.size(),
        " fields; a schedule has 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"));
  }
  CronSchedule c;
  c.has_seconds_ = fields.size() == 6;
  size_t i = 0;
  bool ignored = false;
  if (c.has_seconds_) {
    if (absl::Status s = ParseField(fields[i], 1, kSecond, &c.seconds_, &ignored); !s.ok()) return s;
    ++i;
  } else {
    c.seconds_.set(0);
  }
  int n = c.has_seconds_ ? 2 : 1;
  if (absl::Status s = ParseField(fields[i++], n++, kMinute, &c.minutes_, &ignored); !s.ok()) return s;
  if (absl::Status s = ParseField(fields[i++], n++, kHour, &c.hours_, &ignored); !s.ok()) return s;
  if (absl::Status s = ParseField(fields[i++], n++, kDay, &c.days_, &c.days_any_); !s.ok()) return s;
  if (absl::Status s = ParseField(fields[i++], n++, kMonth, &c.months_, &ignored); !s.ok()) return s;
  std::bitset<8> weekdays;
  if (absl::Status s = ParseField(fields[i++], n++, kWeekday, &weekdays, &c.weekdays_any_); !s.ok()) return s;
  for (size_t d = 0; d < 7; ++d) c.weekdays_[d] = weekdays[d];
  if (weekdays[7]) c.weekdays_[0] = true;  // 7 is Sunday too
  return c;
}

absl::Time CronSchedule::Next(absl::Time after, absl::TimeZone zone) const {
  absl::CivilSecond t = absl::ToCivilSecond(after, zone) + 1;
  const absl::CivilSecond limit = t + 5 * 366 * 86400;
  auto day_matches = [this](absl::CivilDay d) {
    bool dom = days_[static_cast<size_t>(d.day())];
    bool dow = weekdays_[static_cast<size_t>(absl::GetWeekday(d)) == 6 ? 0 : static_cast<size_t>(absl::GetWeekday(d)) + 1];
    if (days_any_ && weekdays_any_) return true;
    if (days_any_) return dow;
    if (weekdays_any_) return dom;
    return dom || dow;
  };
  while (t < limit) {
    if (!months_[static_cast<size_t>(t.month())]) {
      t = absl::CivilSecond(absl::CivilMonth(t) + 1);
      continue;
    }
    if (!day_matches(absl::CivilDay(t))) {
      t = absl::CivilSecond(absl::CivilDay(t) + 1);
      continue;
    }
    if (!hours_[static_cast<size_t>(t.hour())]) {
      t = absl::CivilSecond(absl::CivilHour(t) + 1);
      continue;
    }
    if (!minutes_[static_cast<size_t>(t.minute())]) {
      t = absl::CivilSecond(absl::CivilMinute(t) + 1);
      continue;
    }
    if (!seconds_[static_cast<size_t>(t.second())]) {
      t += 1;
      continue;
    }
    absl::TimeZone::TimeInfo info = zone.At(t);
    // Skipped by a daylight-saving change: at the change. Repeated: the
    // first time only.
    absl::Time when = info.kind == absl::TimeZone::TimeInfo::SKIPPED ? info.trans : info.pre;
    if (when > after) return when;
    t += 1;
  }
  return absl::InfiniteFuture();
}

absl::StatusOr<absl::TimeZone> LoadScheduleZone(const std::string& name) {
  if (name.empty() || name == "UTC") return absl::UTCTimeZone();
  // An IANA name only: the time zone library opens what it is given as a
  // path (and keeps every name it saw), so no path, no prefix, no "..".
  bool plain = name.size() <= 64 && name.front() != '/' && name.back() != '/' &&
               name.find("..") == std::string::npos && name.find("//") == std::string::npos &&
               std::all_of(name.begin(), name.end(), [](char c) {
                 return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' ||
                        c == '+';
               });
  if (!plain) {
    return absl::InvalidArgumentError(absl::StrCat(
        "time zone '", name.substr(0, 64), name.size() > 64 ? "...'" : "'",
        " is not an IANA name (letters, digits, '/', '_', '-', '+'; at most 64 characters)"));
  }
  absl::TimeZone zone;
  if (!absl::LoadTimeZone(name, &zone)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time zone '", name, "' is not known here (an IANA name such as Europe/Berlin or America/New_York)"));
  }
  return zone;
}

}  // namespace trainyard::api
