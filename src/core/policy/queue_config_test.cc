// Queue tree validation: each error names the queue path and the field.
#include "core/policy/queue_config.h"

#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

QueuesConfig Two(QueueConfig a, QueueConfig b) {
  QueuesConfig c;
  c.root.children = {std::move(a), std::move(b)};
  return c;
}

TEST(QueueConfigTest, DefaultIsValid) { EXPECT_TRUE(ValidateQueues(DefaultQueues()).ok()); }

TEST(QueueConfigTest, ErrorsNameTheQueueAndField) {
  EXPECT_EQ(ValidateQueues(Two({.name = "research", .capacity_percent = 40,
                                .max_capacity_percent = 30},
                               {.name = "prod", .capacity_percent = 60}))
                .message(),
            "queue root.research: max_capacity_percent 30 is below capacity_percent 40");
  EXPECT_EQ(ValidateQueues(Two({.name = "a", .capacity_percent = 120}, {.name = "b"})).message(),
            "queue root.a: capacity_percent 120 is outside 0..100");
  EXPECT_EQ(ValidateQueues(Two({.name = "a"}, {.name = "a"})).message(),
            "queue root.a: name is used by another queue");
  EXPECT_EQ(ValidateQueues(Two({.name = "a", .weight = 0}, {.name = "b"})).message(),
            "queue root.a: weight 0 must be above 0");
  EXPECT_EQ(ValidateQueues(Two({.name = "a", .user_limit_percent = 0}, {.name = "b"})).message(),
            "queue root.a: user_limit_percent must be above 0");
  QueueConfig neg{.name = "a"};
  neg.min_share.gpus = -1;
  EXPECT_EQ(ValidateQueues(Two(neg, {.name = "b"})).message(),
            "queue root.a: min_share has a negative quantity: memory=0MB vcores=0 gpus=-1");
  EXPECT_EQ(ValidateQueues(Two({.name = ""}, {.name = "b"})).message(),
            "queue root.(unnamed): name is empty");
  EXPECT_EQ(ValidateQueues(Two({.name = "a", .max_time = absl::Hours(1), .default_time = absl::Hours(2)},
                               {.name = "b"}))
                .message(),
            "queue root.a: default_time 2h is above max_time 1h");
  EXPECT_EQ(ValidateQueues(Two({.name = "a", .max_time = absl::Hours(-1)}, {.name = "b"})).message(),
            "queue root.a: max_time and default_time must not be negative");
  EXPECT_TRUE(ValidateQueues(Two({.name = "a", .default_time = absl::Hours(2)}, {.name = "b"})).ok())
      << "a default without a maximum";
}

}  // namespace
}  // namespace trainyard::core
