// Node labels and the selectors a job uses to pick nodes by them:
// "gpu_model in (V100M16, V100M32)", "gpu_model notin (K80)", "zone=a",
// "zone!=b", "infiniband" (the key exists), "!spot" (it does not).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::core {

// A node's labels as (key, value) pairs, sorted by key, keys unique.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Builds sorted Labels from "k=v,k2=v2" ("" = none). Errors name the part
// without '=' or a key given twice.
absl::StatusOr<Labels> ParseLabels(std::string_view text);

// One requirement on one label key.
struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kNotExists };
  std::string key;
  Op op = Op::kIn;
  std::vector<std::string> values;  // for kIn / kNotIn; "k=v" is kIn {v}
  bool operator==(const LabelRequirement&) const = default;
};

// A conjunction of requirements; the empty selector matches every node.
class LabelSelector {
 public:
  LabelSelector() = default;
  // Parses requirements separated by ';' or by ',' outside parentheses:
  // "gpu_model in (V100M16, V100M32)", "k notin (a,b)", "k=v", "k==v",
  // "k!=v", "k", "!k". Errors quote the requirement that does not parse.
  static absl::StatusOr<LabelSelector> Parse(std::string_view text);

  // True when `labels` satisfies every requirement.
  bool Matches(const Labels& labels) const;
  bool Empty() const { return requirements_.empty(); }
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }
  void Add(LabelRequirement r) { requirements_.push_back(std::move(r)); }
  // Canonical text, e.g. "gpu_model in (V100M16, V100M32)".
  std::string ToString() const;
  bool operator==(const LabelSelector&) const = default;

 private:
  std::vector<LabelRequirement> requirements_;
};

}  // namespace trainyard::core
