// Replays every checked-in input of every fuzz target (fuzz/corpus/NAME:
// the seeds and each input that once crashed, hung or leaked, kept as a
// regression) through the same entry points the fuzzers use. Runs in every
// build, so a fixed crash stays fixed without the fuzz preset.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "common/logging.h"
#include "fuzz/entry_points.h"
#include "gtest/gtest.h"

namespace trainyard::fuzz {

// How gtest names a target in its output.
void PrintTo(const Target& target, std::ostream* os) { *os << target.name; }

namespace {

std::vector<std::filesystem::path> Inputs(const std::string& target) {
  std::vector<std::filesystem::path> files;
  std::filesystem::path dir = std::filesystem::path(TRAINYARD_FUZZ_CORPUS) / target;
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzCorpus : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzCorpus, EveryCheckedInInputRunsCleanly) {
  SetLogLevel(LogLevel::kError);
  std::vector<std::filesystem::path> inputs = Inputs(GetParam().name);
  ASSERT_GE(inputs.size(), 3u) << "fuzz/corpus/" << GetParam().name << " needs seeds";
  for (const auto& path : inputs) {
    SCOPED_TRACE(path.string());
    std::ifstream file(path, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    GetParam().run(bytes.str());  // aborts the test program on a broken invariant
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpus, ::testing::ValuesIn(Targets()),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace trainyard::fuzz
