// The text tables of the sim's protocols (fgd_protocol.h, replay_protocol.h):
// one column per policy, as wide as the longest policy name
// ("core:fragmentation"), one row per figure.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace trainyard::sim {

// Appends to `out` a header of the names of `results` (each has .name), then
// a row per Row call. REQUIRES: out outlives the table.
template <typename Result>
class PolicyTable {
 public:
  PolicyTable(std::string* out, const std::vector<Result>& results) : out_(out), results_(results) {
    for (const Result& r : results_) width_ = std::max(width_, static_cast<int>(r.name.size()) + 2);
    absl::StrAppendFormat(out_, "%-34s", "");
    for (const Result& r : results_) absl::StrAppendFormat(out_, "%*s", width_, r.name);
    *out_ += "\n";
  }

  // A row: `label`, then value(result) of each result with two decimals.
  template <typename Value>
  void Row(const std::string& label, Value value) {
    absl::StrAppendFormat(out_, "%-34s", label);
    for (const Result& r : results_) absl::StrAppendFormat(out_, "%*.2f", width_, value(r));
    *out_ += "\n";
  }

 private:
  std::string* out_;
  const std::vector<Result>& results_;
  int width_ = 12;
};

}  // namespace trainyard::sim
