// For tests: job spec texts that are not YAML, or YAML that no spec reader
// should trust — keys that are lists or mappings, anchors and aliases that
// loop, nesting past any sane depth, binary bytes — each with a name. The
// parser's unit test and the server's integration test feed every one and
// expect a clean error, never a crash.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace trainyard::api::testing {

inline std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Seeded random bytes, every value 0..255 possible (NULs too).
inline std::string BinaryBytes(unsigned seed, int size) {
  std::mt19937 rng(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

inline std::vector<std::pair<std::string, std::string>> MalformedSpecs() {
  const std::string role = "name: bad\nreplicas:\n  worker:\n    command: [x]\n";
  std::string laughs = "name: lol\n";
  laughs += "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    std::string me = absl::StrCat("a", i), below = absl::StrCat("*a", i - 1);
    laughs.append(me).append(": &").append(me).append(" [");
    for (int j = 0; j < 9; ++j) laughs.append(below).append(", ");
    laughs.append(below).append("]\n");
  }
  laughs += "replicas:\n  worker:\n    command: *a8\n    env: *a8\n";
  return {
      {"list key in env", absl::StrCat(role, "    env: {[k]: v}\n")},
      {"mapping key in env", absl::StrCat(role, "    env: {{a: b}: v}\n")},
      {"list key at the top", absl::StrCat("? [a, b]\n: c\n", role)},
      {"mapping key in replicas", "name: bad\nreplicas:\n  {w: 1}: {command: [x]}\n"},
      {"list key in resources", absl::StrCat(role, "    resources: {[cpu]: 1}\n")},
      {"null key", absl::StrCat("~: x\n", role)},
      {"alias to itself", "name: &a [*a]\nreplicas: {worker: {command: [x]}}\n"},
      {"replicas alias their own map", "name: loop\nreplicas: &r\n  worker: *r\n"},
      {"role is its own alias", "name: loop\nreplicas:\n  worker: &w {command: [x], env: *w}\n"},
      {"merge key loop", "name: m\nreplicas:\n  worker: &w\n    <<: *w\n    command: [x]\n"},
      {"undefined alias", "name: *nowhere\n"},
      {"billion laughs", laughs},
      {"deep flow lists", absl::StrCat(Repeat("[", 100000), Repeat("]", 100000))},
      {"deep flow maps", absl::StrCat(Repeat("{a: ", 50000), "b", Repeat("}", 50000))},
      {"deep block maps", [] {
         std::string s;
         for (int i = 0; i < 3000; ++i) s.append(i, ' ').append("a:\n");
         return s;
       }()},
      {"deep nesting in env", absl::StrCat(role, "    env: {A: ", Repeat("[", 5000), Repeat("]", 5000), "}\n")},
      {"binary", BinaryBytes(1, 4096)},
      {"binary after a good start", absl::StrCat(role, BinaryBytes(2, 512))},
      {"NUL bytes raw", std::string("name: a\0b\nreplicas: {worker: {command: [x]}}\n", 45)},
      {"UTF-16 byte order mark", std::string("\xff\xfe" "n\0a\0m\0e\0", 10)},
      {"invalid UTF-8", "name: \xc3\x28\xa0\xa1\nreplicas: {worker: {command: [\"\xf0\x28\x8c\xbc\"]}}\n"},
      {"unterminated quote", "name: \"abc\nreplicas: {}\n"},
      {"tab indentation", "name: a\nreplicas:\n\tworker:\n\t\tcommand: [x]\n"},
      {"unknown directive", absl::StrCat("%YAML 9.9\n---\n", role)},
      {"odd tags", "name: !!binary aGk=\nreplicas: !<tag:yaml.org,2002:seq> [1]\n"},
      {"huge numbers", absl::StrCat(role, "    count: 99999999999999999999999999\n    maxRestarts: 1e308\n")},
      {"a scalar", "just words"},
      {"a list", "- a\n- b\n"},
      {"empty", ""},
      {"only a comment", "# nothing\n"},
      {"many documents", absl::StrCat(role, "---\n", role, "---\n")},
  };
}

}  // namespace trainyard::api::testing
