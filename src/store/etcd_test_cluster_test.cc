#include "tests/etcd/etcd_test_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace trainyard::store_test {
namespace {

TEST(EtcdTestClusterTest, AMemberAnswersAndIsGoneAfterwards) {
  pid_t pid = -1;
  {
    EtcdTestCluster cluster;
    ASSERT_TRUE(cluster.status().ok()) << cluster.status();
    pid = cluster.pid(0);
    EXPECT_EQ(kill(pid, 0), 0);
  }
  EXPECT_NE(kill(pid, 0), 0) << "etcd " << pid << " still runs after the cluster was destroyed";
}

}  // namespace
}  // namespace trainyard::store_test
