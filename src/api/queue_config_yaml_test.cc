// Queue configuration YAML: a full file, and errors that name line, queue
// and key.
#include "api/queue_config_yaml.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(QueueConfigYamlTest, ParsesATreeInCamelCase) {
  auto file = ParseQueueConfigYaml(R"(
policy: fair
reclaimTimeout: 2m
defaultQueue: vision
queues:
  - name: research
    capacity: 40
    maxCapacity: 60
    userLimit: 50
    queues:
      - {name: vision, capacity: 50}
  - name: prod
    capacity: 60
    minShare: {memory: 4Gi, cpu: 500m, gpus: 8}
)");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->default_queue, "vision");
  EXPECT_EQ(file->queues.reclaim_timeout, absl::Minutes(2));
  const core::QueueConfig& research = file->queues.root.children[0];
  EXPECT_EQ(research.max_capacity_percent, 60);
  EXPECT_EQ(research.user_limit_percent, 50);
  const core::QueueConfig& prod = file->queues.root.children[1];
  EXPECT_EQ(prod.min_share.memory_mb, 4096);
  EXPECT_EQ(prod.min_share.vcores_milli, 500);
  EXPECT_EQ(prod.min_share.gpus, 8);
  EXPECT_TRUE(IsLeafQueue(file->queues, "vision"));
  EXPECT_FALSE(IsLeafQueue(file->queues, "research"));
}

TEST(QueueConfigYamlTest, TimeLimitsAreDurationsInheritedFromTheParentUnlessSet) {
  auto file = ParseQueueConfigYaml(R"(
queues:
  - name: research
    maxTime: 24h
    defaultTime: 2h
    queues:
      - {name: vision}
      - {name: quick, maxTime: 30m}
      - {name: long, defaultTime: 12h}
  - name: open
)");
  ASSERT_TRUE(file.ok()) << file.status();
  const core::QueueConfig& research = file->queues.root.children[0];
  EXPECT_EQ(research.max_time, absl::Hours(24));
  const core::QueueConfig& vision = research.children[0];
  EXPECT_EQ(vision.max_time, absl::Hours(24));
  EXPECT_EQ(vision.default_time, absl::Hours(2));
  const core::QueueConfig& quick = research.children[1];
  EXPECT_EQ(quick.max_time, absl::Minutes(30));
  EXPECT_EQ(quick.default_time, absl::Minutes(30)) << "the parent's default, cut to the queue's own maximum";
  EXPECT_EQ(research.children[2].default_time, absl::Hours(12));
  EXPECT_EQ(file->queues.root.children[1].max_time, absl::ZeroDuration()) << "no limit";

  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - {name: a, maxTime: soon}\n", "q.yaml").status().message(),
            "q.yaml:2: queue root.a: maxTime: 'soon' is not a duration like 2h, 30m, 90s or 1h30m");
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - {name: a, maxTime: 1h, defaultTime: 2h}\n", "q.yaml").status().message(),
            "q.yaml:2: queue root.a: defaultTime: 2h is above maxTime 1h");
}

TEST(QueueConfigYamlTest, AclsAreInheritedFromTheParentUnlessSet) {
  auto file = ParseQueueConfigYaml(R"(
queues:
  - name: research
    aclSubmitJobs: [alice, bob]
    aclAdministerJobs: carol
    queues:
      - {name: vision}
      - {name: nlp, aclSubmitJobs: "*", aclProduction: "alice, dave"}
  - name: open
)");
  ASSERT_TRUE(file.ok()) << file.status();
  const QueueAcl& vision = file->acls.at("vision");
  EXPECT_EQ(vision.submit_jobs, (std::vector<std::string>{"alice", "bob"}));
  EXPECT_EQ(vision.administer_jobs, (std::vector<std::string>{"carol"}));
  EXPECT_TRUE(vision.production.empty());
  const QueueAcl& nlp = file->acls.at("nlp");
  EXPECT_TRUE(AclAllows(nlp.submit_jobs, "eve"));
  EXPECT_EQ(nlp.production, (std::vector<std::string>{"alice", "dave"}));
  EXPECT_TRUE(AclAllows(file->acls.at("open").submit_jobs, "anyone"));
  EXPECT_FALSE(AclAllows(file->acls.at("open").administer_jobs, "anyone"));
}

TEST(QueueConfigYamlTest, AclOfTheWrongShapeNamesTheKey) {
  auto file = ParseQueueConfigYaml("queues:\n  - {name: a, aclSubmitJobs: {x: 1}}\n");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("queue root.a: aclSubmitJobs: expected a list of user names"),
            std::string::npos)
      << file.status();
}

TEST(QueueConfigYamlTest, DefaultQueueMustBeALeaf) {
  EXPECT_EQ(ParseQueueConfigYaml("defaultQueue: root\nqueues: [{name: a}]\n", "q.yaml").status().message(),
            "q.yaml: defaultQueue: 'root' is not a leaf queue of the tree");
  EXPECT_EQ(ParseQueueConfigYaml("queues: [{name: a, maxCapacity: 50, max_capacity: 60}]\n", "q.yaml")
                .status()
                .message(),
            "q.yaml:1: queue root.a: maxCapacity: given twice");
}

// Files written before the keys were camelCase still load.
TEST(QueueConfigYamlTest, ParsesATreeInTheOldSnakeCase) {
  auto file = ParseQueueConfigYaml(R"(
policy: capacity
reclaim_timeout: 90s
queues:
  - name: research
    capacity: 40
    max_capacity: 60
    user_limit: 50
    queues:
      - {name: vision, capacity: 50}
      - {name: nlp, capacity: 50, weight: 2}
  - name: prod
    capacity: 60
    min_share: {memory_mb: 1024, vcores: 1.5, gpus: 8}
)");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->policy, "capacity");
  EXPECT_EQ(file->queues.reclaim_timeout, absl::Seconds(90));
  const core::QueueConfig& research = file->queues.root.children[0];
  EXPECT_EQ(research.name, "research");
  EXPECT_EQ(research.max_capacity_percent, 60);
  EXPECT_EQ(research.user_limit_percent, 50);
  EXPECT_EQ(research.children[1].weight, 2);
  const core::QueueConfig& prod = file->queues.root.children[1];
  EXPECT_EQ(prod.min_share.vcores_milli, 1500);
  EXPECT_EQ(prod.min_share.gpus, 8);
}

// Found by fuzz/ (queue_config): each of these cast a double beyond int64
// (undefined behaviour) or let .nan through every check.
TEST(QueueConfigYamlTest, NumbersOutOfRangeOrNotFiniteAreRefused) {
  // Old snake_case keys are read as the camelCase ones they stand for.
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - {name: a, min_share: {memory_mb: 1e300}}\n", "q.yaml")
                .status()
                .message(),
            "q.yaml:2: queue root.a: minShare: memory: '1e300' is not a memory quantity like 1024 (MiB), 512Mi "
            "or 4Gi");
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - {name: a, minShare: {cpu: 1e300}}\n", "q.yaml")
                .status()
                .message(),
            "q.yaml:2: queue root.a: minShare: cpu: '1e300' is not a CPU quantity like 2, 1.5 or 500m");
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - {name: a, minShare: {gpus: 1e12}}\n", "q.yaml")
                .status()
                .message(),
            "q.yaml:2: queue root.a: minShare: gpus: 1000000000000 is out of range");
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - {name: a, capacity: .nan}\n", "q.yaml")
                .status()
                .message(),
            "q.yaml:2: queue root.a: capacity: expected a finite number, got \".nan\"");
}

TEST(QueueConfigYamlTest, ErrorsNameLineQueueAndKey) {
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - name: a\n    max_capacity: lots\n", "q.yaml")
                .status()
                .message(),
            "q.yaml:3: queue root.a: maxCapacity: expected a number, got \"lots\"");
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - name: a\n    capacty: 5\n", "q.yaml")
                .status()
                .message(),
            "q.yaml:3: queue root.a: unknown key \"capacty\"; known keys: name, capacity, "
            "maxCapacity, userLimit, weight, minShare, queues, aclSubmitJobs, aclAdministerJobs, aclProduction, "
            "maxTime, defaultTime");
  EXPECT_EQ(ParseQueueConfigYaml("queues:\n  - name: a\n    capacity: 70\n  - name: b\n"
                                 "    capacity: 40\n",
                                 "q.yaml")
                .status()
                .message(),
            "q.yaml: queue root: children's capacity_percent add up to 110, more than 100");
  EXPECT_EQ(ParseQueueConfigYaml("reclaimTimeout: soon\nqueues: []\n", "q.yaml").status().message(),
            "q.yaml:1: reclaimTimeout: expected a duration like 5m or 300s, got \"soon\"");
  EXPECT_EQ(ParseQueueConfigYaml("queues: [\n", "q.yaml").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadQueueConfigFile("/nonexistent/q.yaml").status().message(),
            "/nonexistent/q.yaml: cannot open the queue config file");
}

}  // namespace
}  // namespace trainyard::api
