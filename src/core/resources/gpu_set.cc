// GpuSet: parsing, printing and the few operations that need a loop.
#include "core/resources/gpu_set.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace trainyard::core {
namespace {

// Parses one GPU index, naming `part` in the error.
absl::StatusOr<int> ParseIndex(absl::string_view text, absl::string_view part) {
  int value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU set: '", part, "' is not a GPU index or range like 0-3"));
  }
  if (value < 0 || value >= kMaxGpus) {
    return absl::InvalidArgumentError(absl::StrCat("GPU set: GPU index ", value, " in '", part,
                                                   "' is outside 0..", kMaxGpus - 1));
  }
  return value;
}

}  // namespace

absl::StatusOr<GpuSet> GpuSet::FromIndices(const std::vector<int>& indices) {
  uint64_t bits = 0;
  for (int i : indices) {
    if (i < 0 || i >= kMaxGpus) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU index ", i, " is outside 0..", kMaxGpus - 1));
    }
    bits |= uint64_t{1} << i;
  }
  return GpuSet(bits);
}

absl::StatusOr<GpuSet> GpuSet::Parse(std::string_view text_in) {
  absl::string_view text(text_in.data(), text_in.size());
  uint64_t bits = 0;
  if (absl::StripAsciiWhitespace(text).empty()) return GpuSet();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU set: empty element in '", text, "'"));
    }
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    absl::StatusOr<int> first = ParseIndex(ends[0], part);
    if (!first.ok()) return first.status();
    int last = *first;
    if (ends.size() == 2) {
      absl::StatusOr<int> end = ParseIndex(ends[1], part);
      if (!end.ok()) return end.status();
      last = *end;
    }
    if (last < *first) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU set: range '", part, "' is reversed"));
    }
    for (int i = *first; i <= last; ++i) bits |= uint64_t{1} << i;
  }
  return GpuSet(bits);
}

GpuSet GpuSet::LowestN(int n) const {
  uint64_t rest = bits_;
  uint64_t out = 0;
  for (int i = 0; i < n && rest != 0; ++i) {
    uint64_t low = rest & (~rest + 1);
    out |= low;
    rest ^= low;
  }
  return GpuSet(out);
}

std::vector<int> GpuSet::Indices() const {
  std::vector<int> out;
  out.reserve(Count());
  for (uint64_t rest = bits_; rest != 0; rest &= rest - 1) out.push_back(__builtin_ctzll(rest));
  return out;
}

std::string GpuSet::ToString() const {
  std::vector<std::string> parts;
  int i = 0;
  while (i < kMaxGpus) {
    if (!Contains(i)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < kMaxGpus && Contains(j + 1)) ++j;
    parts.push_back(i == j ? absl::StrCat(i) : absl::StrCat(i, "-", j));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string GpuSet::ToBitmap(int gpu_count) const {
  std::string out;
  for (int i = 0; i < gpu_count && i < kMaxGpus; ++i) out += Contains(i) ? "■" : "□";
  return out;
}

}  // namespace trainyard::core
