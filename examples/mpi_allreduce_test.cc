// Test of the MPI example: mpirun starts 2 ranks on this node from a
// hostfile like the one Trainyard writes for `framework: mpi`, and every rank
// reports the right allreduce sum. Skipped (with the reason) when Open MPI
// is not installed.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_process.h"

namespace trainyard::examples {
namespace {

TEST(MpiAllreduceTest, TwoRanksFromTheHostfileSumTheirContributions) {
  std::string bin = TRAINYARD_MPI_ALLREDUCE_BIN;
  std::string mpirun = TRAINYARD_MPIRUN;
  if (bin.empty() || mpirun.empty() || !std::filesystem::exists(mpirun)) {
    GTEST_SKIP() << "Open MPI is not installed (openmpi-bin, libopenmpi-dev: run scripts/setup)";
  }
  auto dir = std::filesystem::temp_directory_path() / absl::StrCat("mpi_test_", getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mpi_hostfile") << "localhost slots=2\n";
  TestProcess p({mpirun, "--allow-run-as-root", "--oversubscribe", "-hostfile", (dir / "mpi_hostfile").string(),
                 "-np", "2", bin},
                {{"OMPI_MCA_btl", "self,tcp"}, {"OMPI_MCA_plm_rsh_agent", ""}, {"TMPDIR", dir.string()}},
                (dir / "mpirun.log").string());
  EXPECT_EQ(p.WaitForExit(absl::Seconds(60)), 0) << p.Output();
  EXPECT_THAT(p.Output(), testing::HasSubstr("rank 0 of 2 on"));
  EXPECT_THAT(p.Output(), testing::HasSubstr("rank 1 of 2 on"));
  EXPECT_THAT(p.Output(), testing::HasSubstr("allreduce sum 3 (expected 3)"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainyard::examples
