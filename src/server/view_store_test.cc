// ViewStore's versions: what moves them (and what does not), and waiting
// for them to move.
#include "server/view_store.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

ViewStore::JobEntry Job(const std::string& name) {
  auto v = std::make_shared<v1::JobView>();
  v->set_name(name);
  return ViewStore::JobEntry{.view = v};
}

TEST(ViewStoreTest, JobsMoveTheJobsVersionOnly) {
  ViewStore views;
  ViewStore::Versions before = views.CurrentVersions();
  views.PutJob("a", Job("a"));
  views.PutJob("a", Job("a"));
  ViewStore::Versions after = views.CurrentVersions();
  EXPECT_EQ(after.jobs, before.jobs + 2);
  EXPECT_EQ(after.nodes, before.nodes);
  EXPECT_EQ(after.queues, before.queues);
  views.RemoveJob("a");
  EXPECT_EQ(views.CurrentVersions().jobs, before.jobs + 3);
  views.RemoveJob("a");  // gone already: nothing changed
  EXPECT_EQ(views.CurrentVersions().jobs, before.jobs + 3);
}

TEST(ViewStoreTest, NodesMoveOnlyWhenAViewChangesNotWithHeartbeats) {
  ViewStore views;
  auto view = std::make_shared<const v1::NodeView>();
  views.PutNodes(std::make_shared<const std::vector<ViewStore::NodeEntry>>(
      std::vector<ViewStore::NodeEntry>{{.view = view, .last_heartbeat_unix_ms = 1}}));
  int64_t first = views.CurrentVersions().nodes;
  EXPECT_EQ(first, 1);
  // The same view with a new heartbeat time and free disk: no change.
  views.PutNodes(std::make_shared<const std::vector<ViewStore::NodeEntry>>(
      std::vector<ViewStore::NodeEntry>{{.view = view, .last_heartbeat_unix_ms = 2, .data_free_mb = 10}}));
  EXPECT_EQ(views.CurrentVersions().nodes, first);
  views.PutNodes(std::make_shared<const std::vector<ViewStore::NodeEntry>>(
      std::vector<ViewStore::NodeEntry>{{.view = std::make_shared<const v1::NodeView>()}}));
  EXPECT_EQ(views.CurrentVersions().nodes, first + 1);
  views.PutQueues(std::make_shared<const v1::ListQueuesResponse>());
  EXPECT_EQ(views.CurrentVersions().queues, 1);
}

TEST(ViewStoreTest, AwaitChangeReturnsOnAChangeOrAtItsDeadline) {
  ViewStore views;
  ViewStore::Versions seen = views.CurrentVersions();
  EXPECT_EQ(views.AwaitChange(seen, absl::Now() + absl::Milliseconds(20)), seen);  // nothing moved
  std::thread put([&] { views.PutJob("a", Job("a")); });
  ViewStore::Versions now = views.AwaitChange(seen, absl::Now() + absl::Seconds(30));
  put.join();
  EXPECT_EQ(now.jobs, seen.jobs + 1);
}

}  // namespace
}  // namespace trainyard::server
