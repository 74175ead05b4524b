// PortRanges: parsing and printing, and the set operations as linear sweeps
// over the sorted ranges (no per-port work, so a 1..65535 range is as cheap
// as a single port).
#include "core/resources/port_ranges.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace trainyard::core {
namespace {

absl::StatusOr<uint32_t> ParsePort(absl::string_view text, absl::string_view part) {
  uint64_t value = 0;
  if (text.empty() || !absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ports: '", part, "' is not a port or a range like 1000-2000"));
  }
  if (value < kMinPort || value > kMaxPort) {
    return absl::InvalidArgumentError(absl::StrCat("ports: port ", value, " in '", part,
                                                   "' is outside ", kMinPort, "..", kMaxPort));
  }
  return static_cast<uint32_t>(value);
}

// Parses one "a-b" or "a" element (brackets and spaces already removed).
absl::StatusOr<PortRange> ParseRange(absl::string_view part) {
  std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
  absl::StatusOr<uint32_t> begin = ParsePort(ends[0], part);
  if (!begin.ok()) return begin.status();
  uint32_t end = *begin;
  if (ends.size() == 2) {
    absl::StatusOr<uint32_t> e = ParsePort(ends[1], part);
    if (!e.ok()) return e.status();
    end = *e;
  }
  if (end < *begin) {
    return absl::InvalidArgumentError(absl::StrCat("ports: range '", part, "' is reversed"));
  }
  return PortRange{*begin, end};
}

bool ValidRange(PortRange r) {
  return r.begin >= kMinPort && r.begin <= r.end && r.end <= kMaxPort;
}

}  // namespace

absl::StatusOr<PortRanges> PortRanges::Of(uint32_t begin, uint32_t end) {
  if (end < begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("ports: range ", begin, "-", end, " is reversed"));
  }
  if (begin < kMinPort || end > kMaxPort) {
    return absl::InvalidArgumentError(absl::StrCat("ports: range ", begin, "-", end,
                                                   " is outside ", kMinPort, "..", kMaxPort));
  }
  PortRanges out;
  out.ranges_.push_back({begin, end});
  return out;
}

absl::StatusOr<PortRanges> PortRanges::Parse(std::string_view text_in) {
  absl::string_view text(text_in.data(), text_in.size());
  std::string compact;
  for (char c : text) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  PortRanges out;
  if (compact.empty() || compact == "[]") return PortRanges();
  for (absl::string_view part : absl::StrSplit(compact, ',')) {
    absl::ConsumePrefix(&part, "[");
    absl::ConsumeSuffix(&part, "]");
    if (part.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("ports: empty element in '", text, "'"));
    }
    absl::StatusOr<PortRange> range = ParseRange(part);
    if (!range.ok()) return range.status();
    out.Add(*range);
  }
  return out;
}

uint32_t PortRanges::Count() const {
  uint32_t n = 0;
  for (const PortRange& r : ranges_) n += r.Size();
  return n;
}

bool PortRanges::Contains(uint32_t port) const {
  // First range whose end is >= port.
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), port,
                             [](const PortRange& r, uint32_t p) { return r.end < p; });
  return it != ranges_.end() && it->begin <= port;
}

bool PortRanges::ContainsAll(const PortRanges& other) const {
  auto it = ranges_.begin();
  for (const PortRange& o : other.ranges_) {
    while (it != ranges_.end() && it->end < o.begin) ++it;
    if (it == ranges_.end() || it->begin > o.begin || it->end < o.end) return false;
  }
  return true;
}

void PortRanges::Add(PortRange range) {
  if (!ValidRange(range)) return;
  // The first range that touches or follows `range`.
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), range.begin,
                                [](const PortRange& r, uint32_t b) { return r.end + 1 < b; });
  auto last = first;
  while (last != ranges_.end() && last->begin <= range.end + 1) {
    range.begin = std::min(range.begin, last->begin);
    range.end = std::max(range.end, last->end);
    ++last;
  }
  if (first == last) {
    ranges_.insert(first, range);
    return;
  }
  *first = range;
  ranges_.erase(first + 1, last);
}

PortRanges PortRanges::Union(const PortRanges& other) const {
  PortRanges out;
  auto a = ranges_.begin();
  auto b = other.ranges_.begin();
  while (a != ranges_.end() || b != other.ranges_.end()) {
    PortRange next;
    if (b == other.ranges_.end() || (a != ranges_.end() && a->begin <= b->begin)) {
      next = *a++;
    } else {
      next = *b++;
    }
    if (!out.ranges_.empty() && out.ranges_.back().end + 1 >= next.begin) {
      out.ranges_.back().end = std::max(out.ranges_.back().end, next.end);
    } else {
      out.ranges_.push_back(next);
    }
  }
  return out;
}

PortRanges PortRanges::Subtract(const PortRanges& other) const {
  PortRanges out;
  auto b = other.ranges_.begin();
  for (PortRange a : ranges_) {
    while (b != other.ranges_.end() && b->end < a.begin) ++b;
    uint32_t cursor = a.begin;
    auto c = b;
    while (c != other.ranges_.end() && c->begin <= a.end) {
      if (c->begin > cursor) out.ranges_.push_back({cursor, c->begin - 1});
      cursor = std::max(cursor, c->end + 1);
      if (c->end >= a.end) break;
      ++c;
    }
    if (cursor <= a.end) out.ranges_.push_back({cursor, a.end});
  }
  return out;
}

PortRanges PortRanges::Intersect(const PortRanges& other) const {
  PortRanges out;
  auto a = ranges_.begin();
  auto b = other.ranges_.begin();
  while (a != ranges_.end() && b != other.ranges_.end()) {
    uint32_t lo = std::max(a->begin, b->begin);
    uint32_t hi = std::min(a->end, b->end);
    if (lo <= hi) out.ranges_.push_back({lo, hi});
    if (a->end < b->end) {
      ++a;
    } else {
      ++b;
    }
  }
  return out;
}

std::optional<PortRanges> PortRanges::TakeLowest(uint32_t n) const {
  PortRanges out;
  for (const PortRange& r : ranges_) {
    if (n == 0) break;
    uint32_t take = std::min(n, r.Size());
    out.ranges_.push_back({r.begin, r.begin + take - 1});
    n -= take;
  }
  if (n > 0) return std::nullopt;
  return out;
}

std::string PortRanges::ToString() const {
  std::string out;
  for (const PortRange& r : ranges_) {
    if (!out.empty()) out += ',';
    if (r.begin == r.end) {
      absl::StrAppend(&out, r.begin);
    } else {
      absl::StrAppend(&out, r.begin, "-", r.end);
    }
  }
  return out;
}

PortRanges DefaultServingPorts(const PortRanges& ephemeral) {
  PortRanges all;
  all.Add({kFirstServedPort, kMaxPort});
  return all.Subtract(ephemeral);
}

}  // namespace trainyard::core
