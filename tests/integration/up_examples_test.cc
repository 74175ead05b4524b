// Every example of examples/ run as the README says: a `trainyard up`
// cluster (2 nodes, nothing exported), the checked-in spec submitted with
// `submit --wait` as the admin up made, and the output the example's docs
// promise read back with `trainyard logs` (docs/examples.md).
#include <stdlib.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

std::string UpExamplesSpec(const std::string& name) { return absl::StrCat(TRAINYARD_SOURCE_DIR, "/examples/", name); }

bool TorchImports() {
  return RunCommandLine({"/usr/bin/python3", "-c", "import torch"}, absl::Seconds(60)).exit_code == 0;
}

int UpExamplesCount(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(UpExamplesTest, EveryExampleRunsOnUpAsTheReadmeSubmitsIt) {
  // What the README's reader has: no variable exported.
  unsetenv("TRAINYARD_EXAMPLES_BIN");
  unsetenv("TRAINYARD_EXAMPLES_DIR");
  TempDir dir;
  int port = FreePortPair();
  std::string address = absl::StrCat("127.0.0.1:", port);
  Process up({TrainyardBin(), "up", "--nodes", "2", "--port", std::to_string(port), "--data-dir",
              dir.path() + "/cluster"},
             dir.path() + "/up.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(up.log()).find("Press Ctrl-C") != std::string::npos || !up.Running(); },
                        absl::Seconds(60), absl::Milliseconds(50)))
      << ReadFile(up.log());
  ASSERT_TRUE(up.Running()) << ReadFile(up.log());
  const std::vector<std::string> as_up = UpClientEnv(dir.path() + "/cluster");
  auto run = [&](const std::string& spec, const std::string& job) {
    SCOPED_TRACE(spec);
    CommandResult submitted = RunCli({"submit", UpExamplesSpec(spec), "--wait", "--server", address}, absl::Seconds(240), as_up);
    CommandResult logs = RunCli({"logs", job, "--server", address}, absl::Seconds(60), as_up);
    EXPECT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err << logs.out << logs.err;
    EXPECT_THAT(submitted.out, HasSubstr("SUCCEEDED"));
    return logs.out;
  };

  std::string hello = run("hello.yaml", "hello");
  EXPECT_THAT(hello, HasSubstr("hello from hello-worker-0"));
  EXPECT_THAT(hello, HasSubstr("hello from hello-worker-1"));

  // One launcher task; mpirun's daemon comes through `trainyard rsh`.
  if (std::filesystem::exists(std::filesystem::path(TrainyardBin()).parent_path() / "examples/trainyard-mpi-allreduce")) {
    std::string mpi = run("mpi.yaml", "mpi-allreduce");
    EXPECT_EQ(UpExamplesCount(mpi, "allreduce sum 10 (expected 10)"), 4) << mpi;
  } else {
    ADD_FAILURE() << "trainyard-mpi-allreduce is not built (Open MPI missing: scripts/setup installs it)";
  }

  std::string demo = run("demo.yaml", "ps-sgd-demo");
  EXPECT_THAT(demo, HasSubstr("epoch 12 loss"));
  EXPECT_THAT(demo, HasSubstr("worker 0 done"));

  if (TorchImports()) {
    std::string ddp = run("pytorch_ddp.yaml", "pytorch-ddp");
    EXPECT_EQ(UpExamplesCount(ddp, "epoch 8 loss"), 4) << ddp;
  } else {
    std::cerr << "pytorch_ddp.yaml not run: /usr/bin/python3 cannot import torch\n";
  }
  up.Stop(absl::Seconds(30));
}

}  // namespace
}  // namespace trainyard::testing
