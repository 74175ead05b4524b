// The roles and membership of an elastic job, from its record alone.
#include "server/control/elastic_roles.h"

#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

// A PyTorch job: 4 workers (minCount 2), 1 ps, a master; `placed` of the
// workers and the ps placed.
v1::JobRecord Elastic(int placed) {
  v1::JobRecord rec;
  rec.mutable_spec()->set_framework(v1::FRAMEWORK_PYTORCH);
  v1::ReplicaSpec* jm = rec.mutable_spec()->add_replicas();
  jm->set_role("jobmaster");
  jm->set_count(1);
  v1::ReplicaSpec* w = rec.mutable_spec()->add_replicas();
  w->set_role("worker");
  w->set_count(4);
  w->set_min_count(2);
  v1::ReplicaSpec* ps = rec.mutable_spec()->add_replicas();
  ps->set_role("ps");
  ps->set_count(1);
  auto add = [&](const std::string& role, int index, bool on_node) {
    v1::TaskRecord* t = rec.add_tasks();
    t->set_role(role);
    t->set_index(index);
    t->set_worker_id(-1);
    if (on_node) t->set_node("n1");
  };
  add("jobmaster", 0, true);
  for (int i = 0; i < 4; ++i) add("worker", i, i >= 4 - placed);  // the last `placed` are placed
  add("ps", 0, true);
  return rec;
}

TEST(ElasticRolesTest, WhatEachRoleSaysAndHolds) {
  v1::JobRecord rec = Elastic(3);
  Roles roles = FactsOf(rec);
  EXPECT_TRUE(roles["worker"].worker);
  EXPECT_EQ(roles["worker"].placed, 3);
  EXPECT_EQ(roles["worker"].min_count, 2);
  EXPECT_EQ(roles["ps"].placed, 1);
  EXPECT_EQ(ElasticSize(roles), std::make_pair(3, 4));  // the ps is not elastic
  EXPECT_EQ(PlacedWorkers(rec), 3);
}

TEST(ElasticRolesTest, ANewMembershipNumbersThePlacedWorkersFirstThenTheOthersAndNeverTheMaster) {
  v1::JobRecord rec = Elastic(2);
  rec.set_membership_epoch(4);
  std::string text = NextMembership(&rec);
  EXPECT_EQ(rec.membership_epoch(), 5);
  EXPECT_EQ(text, "membership epoch 5: 2 of 4 elastic tasks placed (worker 2 of 4 (minCount 2))");
  // tasks: jobmaster, worker 0..3 (2 and 3 placed), ps (placed)
  EXPECT_EQ(rec.tasks(0).worker_id(), -1);  // the master
  EXPECT_EQ(rec.tasks(3).worker_id(), 0);   // worker 2, placed
  EXPECT_EQ(rec.tasks(4).worker_id(), 1);   // worker 3, placed
  EXPECT_EQ(rec.tasks(5).worker_id(), 2);   // the ps, placed
  EXPECT_EQ(rec.tasks(1).worker_id(), 3);   // worker 0, not placed
  EXPECT_EQ(rec.tasks(2).worker_id(), 4);   // worker 1, not placed
}

}  // namespace
}  // namespace trainyard::server
