// Tests of the shipped job specs: the copies the build writes into
// <build dir>/examples carry the absolute paths of the programs (what
// `trainyard up --demo` submits), and every spec names its framework and the
// roles that framework needs.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::examples {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JobSpecsTest, GeneratedDemoRunsTheBuiltBinaryByItsAbsolutePath) {
  std::string demo = Read(TRAINYARD_BUILD_EXAMPLES_DIR "/demo.yaml");
  ASSERT_FALSE(demo.empty()) << "missing " TRAINYARD_BUILD_EXAMPLES_DIR "/demo.yaml";
  EXPECT_THAT(demo, HasSubstr(std::string("exec \"") + TRAINYARD_PS_SGD_BIN + "\""));
  EXPECT_THAT(demo, Not(HasSubstr("${TRAINYARD_EXAMPLES_BIN")));
  EXPECT_TRUE(std::filesystem::exists(TRAINYARD_PS_SGD_BIN));
  std::string ddp = Read(TRAINYARD_BUILD_EXAMPLES_DIR "/pytorch_ddp.yaml");
  EXPECT_THAT(ddp, HasSubstr(TRAINYARD_EXAMPLES_DIR "/pytorch_ddp/train.py"));
}

TEST(JobSpecsTest, CheckedInSpecsNameTheirFrameworkAndRoles) {
  std::string demo = Read(TRAINYARD_EXAMPLES_DIR "/demo.yaml");
  EXPECT_THAT(demo, HasSubstr("framework: tensorflow"));
  EXPECT_THAT(demo, HasSubstr("  ps:\n    count: 2"));
  EXPECT_THAT(demo, HasSubstr("  worker:\n    count: 4"));
  EXPECT_THAT(demo, HasSubstr("gpus: 1"));
  EXPECT_THAT(demo, HasSubstr("restartPolicy: OnFailure"));
  EXPECT_THAT(Read(TRAINYARD_EXAMPLES_DIR "/pytorch_ddp.yaml"), HasSubstr("  master:\n    count: 1"));
  EXPECT_THAT(Read(TRAINYARD_EXAMPLES_DIR "/pytorch_elastic.yaml"), HasSubstr("    count: 3\n    minCount: 1"));
  EXPECT_THAT(Read(TRAINYARD_EXAMPLES_DIR "/mpi.yaml"), HasSubstr("framework: mpi"));
  EXPECT_THAT(Read(TRAINYARD_EXAMPLES_DIR "/hello.yaml"), HasSubstr("hello from $TRAINYARD_TASK_NAME"));
}

}  // namespace
}  // namespace trainyard::examples
