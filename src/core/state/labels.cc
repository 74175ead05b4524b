// Parsing and matching of node labels and label selectors.
#include "core/state/labels.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace trainyard::core {
namespace {

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

// Splits on ',' and ';' that are outside parentheses.
std::vector<std::string> SplitTop(absl::string_view text) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' || c == ';') && depth == 0) {
      parts.push_back(Trim(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  parts.push_back(Trim(cur));
  return parts;
}

bool ValidKey(absl::string_view k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.' || c == '/';
  });
}

// Parses "key in (a, b)" / "key notin (a, b)"; false when it is not that form.
absl::StatusOr<bool> ParseSetForm(const std::string& part, LabelRequirement* r) {
  size_t open = part.find('(');
  if (open == std::string::npos) return false;
  if (part.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("label selector \"", part, "\": missing ')'"));
  }
  std::vector<std::string> head = absl::StrSplit(part.substr(0, open), ' ', absl::SkipEmpty());
  if (head.size() != 2 || (head[1] != "in" && head[1] != "notin") || !ValidKey(head[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label selector \"", part, "\": expected \"key in (v1, v2)\" or \"key notin (v1, v2)\""));
  }
  r->key = head[0];
  r->op = head[1] == "in" ? LabelRequirement::Op::kIn : LabelRequirement::Op::kNotIn;
  std::string inner = part.substr(open + 1, part.size() - open - 2);
  for (absl::string_view v : absl::StrSplit(inner, ',')) {
    std::string value = Trim(v);
    if (value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label selector \"", part, "\": empty value in the set"));
    }
    r->values.push_back(value);
  }
  std::sort(r->values.begin(), r->values.end());
  return true;
}

absl::StatusOr<LabelRequirement> ParseRequirement(const std::string& part) {
  LabelRequirement r;
  absl::StatusOr<bool> set_form = ParseSetForm(part, &r);
  if (!set_form.ok()) return set_form.status();
  if (*set_form) return r;
  size_t ne = part.find("!=");
  size_t eq = part.find('=');
  if (ne != std::string::npos) {
    r.key = Trim(part.substr(0, ne));
    r.op = LabelRequirement::Op::kNotIn;
    r.values = {Trim(part.substr(ne + 2))};
  } else if (eq != std::string::npos) {
    size_t skip = part.compare(eq, 2, "==") == 0 ? 2 : 1;
    r.key = Trim(part.substr(0, eq));
    r.values = {Trim(part.substr(eq + skip))};
  } else if (!part.empty() && part[0] == '!') {
    r.key = Trim(part.substr(1));
    r.op = LabelRequirement::Op::kNotExists;
  } else {
    r.key = part;
    r.op = LabelRequirement::Op::kExists;
  }
  if (!ValidKey(r.key) || (!r.values.empty() && r.values[0].empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label selector \"", part,
        "\": expected \"key in (v1, v2)\", \"key=value\", \"key!=value\", \"key\" or \"!key\""));
  }
  return r;
}

const std::string* Find(const Labels& labels, const std::string& key) {
  auto it = std::lower_bound(labels.begin(), labels.end(), key,
                             [](const auto& kv, const std::string& k) { return kv.first < k; });
  if (it == labels.end() || it->first != key) return nullptr;
  return &it->second;
}

}  // namespace

absl::StatusOr<Labels> ParseLabels(std::string_view std_text) {
  absl::string_view text(std_text.data(), std_text.size());
  Labels labels;
  if (Trim(text).empty()) return labels;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::string p = Trim(part);
    size_t eq = p.find('=');
    if (eq == std::string::npos || !ValidKey(Trim(p.substr(0, eq)))) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: \"", p, "\" is not key=value"));
    }
    labels.emplace_back(Trim(p.substr(0, eq)), Trim(p.substr(eq + 1)));
  }
  std::sort(labels.begin(), labels.end());
  for (size_t i = 1; i < labels.size(); ++i) {
    if (labels[i].first == labels[i - 1].first) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: key \"", labels[i].first, "\" is given twice"));
    }
  }
  return labels;
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(std::string_view std_text) {
  absl::string_view text(std_text.data(), std_text.size());
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  for (const std::string& part : SplitTop(text)) {
    if (part.empty()) continue;
    absl::StatusOr<LabelRequirement> r = ParseRequirement(part);
    if (!r.ok()) return r.status();
    sel.requirements_.push_back(*std::move(r));
  }
  return sel;
}

bool LabelSelector::Matches(const Labels& labels) const {
  for (const LabelRequirement& r : requirements_) {
    const std::string* v = Find(labels, r.key);
    bool in = v != nullptr && std::find(r.values.begin(), r.values.end(), *v) != r.values.end();
    switch (r.op) {
      case LabelRequirement::Op::kIn:
        if (!in) return false;
        break;
      case LabelRequirement::Op::kNotIn:
        if (in) return false;
        break;
      case LabelRequirement::Op::kExists:
        if (v == nullptr) return false;
        break;
      case LabelRequirement::Op::kNotExists:
        if (v != nullptr) return false;
        break;
    }
  }
  return true;
}

std::string LabelSelector::ToString() const {
  std::vector<std::string> parts;
  for (const LabelRequirement& r : requirements_) {
    switch (r.op) {
      case LabelRequirement::Op::kIn:
        parts.push_back(absl::StrCat(r.key, " in (", absl::StrJoin(r.values, ", "), ")"));
        break;
      case LabelRequirement::Op::kNotIn:
        parts.push_back(absl::StrCat(r.key, " notin (", absl::StrJoin(r.values, ", "), ")"));
        break;
      case LabelRequirement::Op::kExists:
        parts.push_back(r.key);
        break;
      case LabelRequirement::Op::kNotExists:
        parts.push_back(absl::StrCat("!", r.key));
        break;
    }
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace trainyard::core
