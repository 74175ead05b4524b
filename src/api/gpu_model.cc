// GPU model short names; see gpu_model.h.
#include "api/gpu_model.h"

#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace trainyard::api {
namespace {

constexpr std::array<std::string_view, 4> kVendorWords = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO"};
constexpr std::array<std::string_view, 13> kFormWords = {
    "SXM", "SXM2", "SXM3", "SXM4", "SXM5", "PCIE", "PCI", "NVL", "NVLINK",
    "HBM2", "HBM2E", "HBM3", "HBM3E"};

bool IsOneOf(std::string_view word, auto& words) {
  for (std::string_view w : words) {
    if (word == w) return true;
  }
  return false;
}

// "32GB" -> "32"; "" when the word is not a memory size.
std::string_view MemoryOf(std::string_view word) {
  if (word.size() < 3 || word.substr(word.size() - 2) != "GB") return "";
  word.remove_suffix(2);
  bool digits = std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
  return digits && word.find_first_not_of('0') != std::string_view::npos ? word : "";
}

}  // namespace

std::string CanonicalGpuModel(std::string_view name) {
  std::string upper = absl::AsciiStrToUpper(absl::string_view(name.data(), name.size()));
  std::vector<std::string_view> words;
  for (absl::string_view w : absl::StrSplit(upper, absl::ByAnyChar(" -_\t"), absl::SkipEmpty())) {
    words.emplace_back(w.data(), w.size());
  }
  std::string out, memory;
  for (std::string_view w : words) {
    if (IsOneOf(w, kVendorWords) || IsOneOf(w, kFormWords)) continue;
    if (std::string_view gb = MemoryOf(w); !gb.empty()) {
      memory = std::string(gb);
      continue;
    }
    out += w;
  }
  if (out.empty()) {
    return std::string(absl::StripAsciiWhitespace(absl::string_view(name.data(), name.size())));
  }
  return memory.empty() ? out : out + "M" + memory;
}

}  // namespace trainyard::api
