// Job arrays, dependencies and hold: parsing and the texts users see.
#include "api/job_array.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace trainyard::api {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("array: '", text, "' ", why,
                                                 " (Slurm's syntax: 0-99, 1,3,5-7, 0-15:4, each with an optional %N)"));
}

bool ParseIndex(absl::string_view s, int* out) {
  return !s.empty() && absl::SimpleAtoi(s, out) && *out >= 0 && s.find_first_of("+- ") == absl::string_view::npos;
}

// One "A", "A-B" or "A-B:S" item into `out`; false (with *why) when malformed.
bool ParseItem(absl::string_view item, std::set<int>* out, std::string* why) {
  int step = 1;
  if (size_t colon = item.find(':'); colon != absl::string_view::npos) {
    if (!ParseIndex(item.substr(colon + 1), &step) || step < 1) {
      *why = absl::StrCat("has a step that is not a positive number: '", item, "'");
      return false;
    }
    item = item.substr(0, colon);
  }
  size_t dash = item.find('-');
  int lo = 0, hi = 0;
  if (!ParseIndex(item.substr(0, dash), &lo) ||
      (dash != absl::string_view::npos && !ParseIndex(item.substr(dash + 1), &hi))) {
    *why = absl::StrCat("has an item that is not an index or a range: '", item, "'");
    return false;
  }
  if (dash == absl::string_view::npos) hi = lo;
  if (hi < lo) {
    *why = absl::StrCat("has a range that runs backwards: '", item, "'");
    return false;
  }
  if (hi > kMaxArrayIndex) {
    *why = absl::StrCat("has an index above ", kMaxArrayIndex, ", the highest an array may use");
    return false;
  }
  for (int64_t i = lo; i <= hi; i += step) {
    out->insert(static_cast<int>(i));
    if (static_cast<int>(out->size()) > kMaxArrayElements) {
      *why = absl::StrCat("has more than ", kMaxArrayElements, " elements, the most one array may have");
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<ArrayRange> ParseArrayRange(absl::string_view text) {
  if (text.size() > kMaxArrayTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat("array: ", text.size(), " bytes is above the ", kMaxArrayTextBytes,
                                                   " bytes an array's text may have"));
  }
  ArrayRange out;
  absl::string_view list = text;
  if (size_t pct = text.find('%'); pct != absl::string_view::npos) {
    list = text.substr(0, pct);
    if (!ParseIndex(text.substr(pct + 1), &out.throttle) || out.throttle < 1) {
      return Bad(text, "has a %N that is not a positive number");
    }
  }
  if (list.empty()) return Bad(text, "names no index");
  std::set<int> indices;
  std::string why;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    if (!ParseItem(item, &indices, &why)) return Bad(text, why);
  }
  out.indices.assign(indices.begin(), indices.end());
  return out;
}

std::string ArrayElementName(const std::string& array, int index) { return absl::StrCat(array, "-", index); }

std::string HeldReason(const std::string& job) { return absl::StrCat("held (trainyard release ", job, ")"); }

std::string WaitingForReason(const std::string& dep, bool after_ok) {
  return absl::StrCat("waiting for job ", dep, after_ok ? " (after-ok)" : " (after-any)");
}

std::string DependencyFailedMessage(const std::string& dep, absl::string_view how) {
  return absl::StrCat("dependency ", dep, " ended ", how, " (after-ok needs SUCCEEDED)");
}

std::string ThrottleReason(const std::string& array, int throttle) {
  return absl::StrCat("array ", array, ": ", throttle, " of its elements already placed (at most ", throttle,
                      " at once, %", throttle, ")");
}

}  // namespace trainyard::api
