// Tests of the PyTorch DDP example: two ranks on loopback with the env://
// variables Trainyard gives a `framework: pytorch` job train, their loss
// falls, rank 0 checkpoints, and a second run resumes after the checkpoint.
// Skipped (with the reason) when /usr/bin/python3 cannot import torch.
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_process.h"

namespace trainyard::examples {
namespace {

// The loss the example reaches by epoch 8 (docs/examples.md).
constexpr double kDdpStatedLoss = 0.05;

bool TorchImports() {
  return std::system("/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' "
                     ">/dev/null 2>&1") == 0;
}

class PytorchDdpTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!TorchImports()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch with gloo (python3-torch)";
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("pytorch_ddp_test_", getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Runs `world` ranks to the end; returns each rank's output.
  std::vector<std::string> Run(int world, int epochs, const std::string& run) {
    int port = PickFreePort();
    std::vector<std::unique_ptr<TestProcess>> ranks;
    for (int r = 0; r < world; ++r) {
      std::map<std::string, std::string> env = {
          {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", absl::StrCat(port)},
          {"RANK", absl::StrCat(r)},            {"WORLD_SIZE", absl::StrCat(world)},
          {"LOCAL_RANK", absl::StrCat(r)},      {"LOCAL_WORLD_SIZE", absl::StrCat(world)},
          {"TRAINYARD_CHECKPOINT_DIR", (dir_ / "ckpt").string()}};
      ranks.push_back(std::make_unique<TestProcess>(
          std::vector<std::string>{"/usr/bin/python3", TRAINYARD_EXAMPLES_DIR "/pytorch_ddp/train.py",
                                   "--epochs", absl::StrCat(epochs)},
          env, (dir_ / absl::StrCat(run, "-rank", r, ".log")).string()));
    }
    std::vector<std::string> out;
    for (auto& p : ranks) {
      EXPECT_EQ(p->WaitForExit(absl::Seconds(90)), 0) << p->Output();
      out.push_back(p->Output());
    }
    return out;
  }

  std::filesystem::path dir_;
};

TEST_F(PytorchDdpTest, TwoRanksTrainCheckpointAndResume) {
  std::vector<std::string> first = Run(2, 4, "first");
  auto losses = EpochLosses(first[0]);
  ASSERT_EQ(losses.size(), 4u) << first[0];
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i].second, losses[i - 1].second) << first[0];
  EXPECT_EQ(EpochLosses(first[1]), losses);  // DDP keeps the replicas equal
  EXPECT_TRUE(std::filesystem::exists(dir_ / "ckpt" / "pytorch_ddp.pt"));

  std::vector<std::string> second = Run(2, 8, "second");
  for (const std::string& out : second) EXPECT_THAT(out, testing::HasSubstr("resumed from epoch 4"));
  auto resumed = EpochLosses(second[0]);
  ASSERT_EQ(resumed.size(), 4u) << second[0];
  EXPECT_EQ(resumed.front().first, 5);
  EXPECT_LT(resumed.front().second, losses.back().second) << second[0];
  EXPECT_LE(resumed.back().second, kDdpStatedLoss) << second[0];
}

// An elastic job (docs/elastic.md) restarts at another WORLD_SIZE: each
// rank's shard, and so the steps of an epoch, change; the run goes on from
// the epoch the checkpoint saved, not from its step count read at the new
// size.
TEST_F(PytorchDdpTest, ARunResumedAtAnotherWorldSizeGoesOnFromTheSameEpoch) {
  std::vector<std::string> first = Run(2, 4, "two-ranks");
  ASSERT_EQ(EpochLosses(first[0]).size(), 4u) << first[0];
  std::vector<std::string> second = Run(1, 8, "one-rank");  // 2048 samples / 64: 32 steps an epoch, not 16
  EXPECT_THAT(second[0], testing::HasSubstr("resumed from epoch 4 at step 128")) << second[0];
  auto resumed = EpochLosses(second[0]);
  ASSERT_EQ(resumed.size(), 4u) << second[0];
  EXPECT_EQ(resumed.front().first, 5);
  EXPECT_LE(resumed.back().second, kDdpStatedLoss) << second[0];
}

}  // namespace
}  // namespace trainyard::examples
