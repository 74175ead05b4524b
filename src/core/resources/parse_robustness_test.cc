// Seeded random text fed to every parser of the resource model: each must
// return a value or an error, never crash (run under the sanitizer build to
// also catch undefined behaviour). Parsed values must print and re-parse.
#include <random>
#include <string>
#include <vector>

#include "core/resources/gpu_set.h"
#include "core/resources/gpu_topology.h"
#include "core/resources/port_ranges.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

std::string RandomText(std::mt19937& rng, const std::string& alphabet,
                       const std::vector<std::string>& words, int max_len) {
  std::string out;
  int len = static_cast<int>(rng() % max_len);
  for (int i = 0; i < len; ++i) {
    if (rng() % 4 == 0) {
      out += words[rng() % words.size()];
    } else {
      out += alphabet[rng() % alphabet.size()];
    }
  }
  return out;
}

TEST(ParseRobustnessTest, SpecsAndSetsNeverCrash) {
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789-,;=+[] ";
  const std::vector<std::string> words = {"gpus=",  "switches=", "sockets=", "nvlink=", "63",
                                          "64",     "65535",     "65536",    "0-7",     "4-5",
                                          "999999999999999999999"};
  for (int i = 0; i < 20000; ++i) {
    std::string text = RandomText(rng, alphabet, words, 40);
    if (absl::StatusOr<GpuTopology> t = GpuTopology::FromSpec(text); t.ok()) {
      ASSERT_EQ(*GpuTopology::FromSpec(t->ToSpec()), *t) << text;
    }
    if (absl::StatusOr<GpuSet> s = GpuSet::Parse(text); s.ok()) {
      ASSERT_EQ(*GpuSet::Parse(s->ToString()), *s) << text;
    }
    if (absl::StatusOr<PortRanges> p = PortRanges::Parse(text); p.ok()) {
      ASSERT_EQ(*PortRanges::Parse(p->ToString()), *p) << text;
    }
  }
}

TEST(ParseRobustnessTest, NvidiaSmiTextNeverCrashes) {
  std::mt19937 rng(11);
  const std::string alphabet = " \t\n\x1b[m";
  const std::vector<std::string> words = {"GPU0", "GPU1", "GPU2", "X",    "NV12", "NV",
                                          "PIX",  "PXB",  "SYS",  "NODE", "CPU",  "Affinity",
                                          "NUMA", "N/A",  "0-63", "1",    "NIC0", "Legend:"};
  for (int i = 0; i < 20000; ++i) {
    std::string text = RandomText(rng, alphabet, words, 60);
    absl::StatusOr<GpuTopology> t = GpuTopology::FromNvidiaSmiTopo(text);
    if (t.ok()) {
      ASSERT_EQ(*GpuTopology::FromSpec(t->ToSpec()), *t) << text;
    }
  }
}

}  // namespace
}  // namespace trainyard::core
