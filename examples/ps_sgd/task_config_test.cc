// Unit tests of the ps example's pieces that need no process: the cluster
// spec from the environment, checkpoints, the wire's frames and the model.
#include "ps_sgd/task_config.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_sgd/checkpoint.h"
#include "ps_sgd/model.h"
#include "ps_sgd/wire.h"

namespace trainyard::examples {
namespace {

using ::testing::HasSubstr;

constexpr char kTfConfig[] =
    R"({"cluster": {"ps": ["h0:2000", "h1:2001"], "chief": ["c:1"], "worker": ["w0:1", "w1:1"]},
        "task": {"type": "worker", "index": 1}})";

TEST(TaskConfigTest, ReadsRoleRankAndPsFromTfConfig) {
  auto c = TaskConfigFromEnv({{"TF_CONFIG", kTfConfig}, {"TRAINYARD_CHECKPOINT_DIR", "/ck"},
                              {"TRAINYARD_RESTART_COUNT", "2"}}, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->role, "worker");
  EXPECT_EQ(c->num_workers, 3);
  EXPECT_EQ(c->rank, 2);  // the chief is rank 0
  EXPECT_FALSE(c->is_chief());
  EXPECT_THAT(c->ps, testing::ElementsAre("h0:2000", "h1:2001"));
  EXPECT_EQ(c->restart_count, 2);
}

TEST(TaskConfigTest, PsListensOnItsAllocatedPort) {
  std::string tf = R"({"cluster": {"ps": ["h0:2000", "h1:2001"], "worker": ["w:1"]}, "task": {"type": "ps", "index": 1}})";
  auto c = TaskConfigFromEnv({{"TF_CONFIG", tf}, {"TRAINYARD_CHECKPOINT_DIR", "/ck"}}, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen_port, 2001);
  c = TaskConfigFromEnv({{"TF_CONFIG", tf}, {"TRAINYARD_CHECKPOINT_DIR", "/ck"}, {"TRAINYARD_PORTS", "3001,3002"}}, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen_port, 3001);
}

TEST(TaskConfigTest, BadEnvironmentNamesTheVariable) {
  EXPECT_THAT(TaskConfigFromEnv({{"TF_CONFIG", "{oops"}}, "").status().message(), HasSubstr("TF_CONFIG"));
  EXPECT_THAT(TaskConfigFromEnv({{"TF_CONFIG", kTfConfig}}, "").status().message(),
              HasSubstr("TRAINYARD_CHECKPOINT_DIR"));
  EXPECT_THAT(TaskConfigFromEnv({{"TRAINYARD_ROLE", "worker"}, {"TRAINYARD_INDEX", "x"}}, "").status().message(),
              HasSubstr("TRAINYARD_INDEX='x'"));
  EXPECT_THAT(TaskConfigFromEnv({{"TRAINYARD_ROLE", "evaluator"}, {"TRAINYARD_CHECKPOINT_DIR", "/ck"}}, "h:1")
                  .status().message(),
              HasSubstr("role 'evaluator'"));
  EXPECT_THAT(TaskConfigFromEnv({{"TRAINYARD_ROLE", "worker"}, {"TRAINYARD_CHECKPOINT_DIR", "/ck"}}, "h:0")
                  .status().message(),
              HasSubstr("'h:0' is not host:port"));
}

TEST(CheckpointTest, RoundTripsAndRejectsAForeignFile) {
  auto dir = std::filesystem::temp_directory_path() / absl::StrCat("ckpt_test_", getpid());
  auto none = ReadCheckpoint(dir.string());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(WriteCheckpoint(dir.string(), Checkpoint{5, {0.1, -2.5e-17, 3.0}}).ok());
  auto back = ReadCheckpoint(dir.string());
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->epoch, 5);
  EXPECT_THAT((*back)->params, testing::ElementsAre(0.1, -2.5e-17, 3.0));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary left
  std::ofstream(CheckpointPath(dir.string())) << "hello\n";
  EXPECT_THAT(ReadCheckpoint(dir.string()).status().message(), HasSubstr("is not a ps_sgd checkpoint"));
  std::filesystem::remove_all(dir);
}

TEST(WireTest, SliceRepliesAndErrorsDecode) {
  Slice s{7, {1.5, -2.0}};
  auto back = DecodeSliceReply(EncodeSliceReply(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->offset, 7u);
  EXPECT_THAT(back->values, testing::ElementsAre(1.5, -2.0));
  EXPECT_THAT(DecodeSliceReply(EncodeErrorReply("no such shard")).status().message(), HasSubstr("no such shard"));
  EXPECT_FALSE(DecodeSliceReply(std::string("\0\1\2", 3)).ok());
  auto epoch = DecodeEpochBody(absl::string_view(EncodeEpoch(9)).substr(1));
  ASSERT_TRUE(epoch.ok());
  EXPECT_EQ(*epoch, 9u);
  EXPECT_EQ(*DecodeEpochReply(EncodeEpochReply(12)), 12u);
}

TEST(ModelTest, SameSeedSameDataAndGradientLowersTheLoss) {
  DatasetOptions o{.samples = 500, .features = 5, .seed = 3};
  Dataset a = MakeDataset(o), b = MakeDataset(o);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  std::vector<double> params(ParameterCount(5), 0.0), grad;
  Range all{0, 500};
  double before = LogLoss(a, params, all);
  Gradient(a, params, all, &grad);
  for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.5 * grad[i];
  EXPECT_LT(LogLoss(a, params, all), before);
  EXPECT_EQ(ShardOf(10, 2, 3).begin, 6);
  EXPECT_EQ(ShardOf(10, 2, 3).end, 10);
}

}  // namespace
}  // namespace trainyard::examples
