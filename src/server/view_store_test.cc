// ViewStore's versions: what moves them (and what does not), and waiting
// for them to move.
#include "server/view_store.h"

#include <map>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

ViewStore::JobEntry ViewStoreJob(const std::string& name) {
  auto v = std::make_shared<v1::JobView>();
  v->set_name(name);
  return ViewStore::JobEntry{.view = v};
}

TEST(ViewStoreTest, JobsMoveTheJobsVersionOnly) {
  ViewStore views;
  ViewStore::Versions before = views.CurrentVersions();
  views.PutJob("a", ViewStoreJob("a"));
  views.PutJob("a", ViewStoreJob("a"));
  ViewStore::Versions after = views.CurrentVersions();
  EXPECT_EQ(after.jobs, before.jobs + 2);
  EXPECT_EQ(after.nodes, before.nodes);
  EXPECT_EQ(after.queues, before.queues);
  views.RemoveJob("a");
  EXPECT_EQ(views.CurrentVersions().jobs, before.jobs + 3);
  views.RemoveJob("a");  // gone already: nothing changed
  EXPECT_EQ(views.CurrentVersions().jobs, before.jobs + 3);
}

ViewStore::JobEntry ViewStoreJob(const std::string& name, uint64_t id, v1::JobState state) {
  auto v = std::make_shared<v1::JobView>();
  v->set_name(name);
  v->set_id(id);
  v->set_state(state);
  return ViewStore::JobEntry{.view = v};
}

std::vector<std::string> ViewStoreNames(const std::vector<std::shared_ptr<const v1::JobView>>& jobs) {
  std::vector<std::string> out;
  for (const auto& j : jobs) out.push_back(j->name());
  return out;
}

TEST(ViewStoreTest, LiveJobsAreThoseNotFinishedInIdOrderAsTheyChange) {
  using V = std::vector<std::string>;
  ViewStore views;
  views.PutJob("c", ViewStoreJob("c", 3, v1::JOB_RUNNING));
  views.PutJob("a", ViewStoreJob("a", 1, v1::JOB_QUEUED));
  views.PutJob("b", ViewStoreJob("b", 2, v1::JOB_SUCCEEDED));
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"a", "c"}));
  EXPECT_EQ(ViewStoreNames(views.Jobs(true)), (V{"a", "b", "c"}));
  views.PutJob("a", ViewStoreJob("a", 1, v1::JOB_RUNNING));  // still live: once
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"a", "c"}));
  EXPECT_EQ(views.Jobs(false)[0]->state(), v1::JOB_RUNNING);
  views.PutJob("c", ViewStoreJob("c", 3, v1::JOB_KILLED));  // ended
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"a"}));
  views.RemoveJob("a");
  EXPECT_TRUE(views.Jobs(false).empty());
  // A name given again to a new job (another id) after the old one ended.
  views.PutJob("c", ViewStoreJob("c", 9, v1::JOB_QUEUED));
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"c"}));
  EXPECT_EQ(views.Jobs(false)[0]->id(), 9u);
  EXPECT_EQ(ViewStoreNames(views.Jobs(true)), (V{"b", "c"}));
}

// Two names whose views carry one id (a store that should not hold such):
// the later put is the one listed; neither job's later puts or removal may
// touch the other's place.
TEST(ViewStoreTest, TwoJobsOfOneIdTakeTheLiveListFromEachOther) {
  using V = std::vector<std::string>;
  ViewStore views;
  views.PutJob("a", ViewStoreJob("a", 5, v1::JOB_RUNNING));
  views.PutJob("b", ViewStoreJob("b", 5, v1::JOB_RUNNING));
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"b"}));
  views.PutJob("b", ViewStoreJob("b", 5, v1::JOB_SUCCEEDED));
  EXPECT_TRUE(views.Jobs(false).empty());
  views.PutJob("a", ViewStoreJob("a", 5, v1::JOB_RUNNING));
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"a"}));
  views.PutJob("b", ViewStoreJob("b", 5, v1::JOB_QUEUED));  // b again, live
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"b"}));
  views.RemoveJob("a");  // a's place was taken: b stays listed
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"b"}));
  views.PutJob("a", ViewStoreJob("a", 5, v1::JOB_KILLED));
  EXPECT_EQ(ViewStoreNames(views.Jobs(false)), (V{"b"}));
  views.RemoveJob("b");
  EXPECT_TRUE(views.Jobs(false).empty());
  EXPECT_EQ(ViewStoreNames(views.Jobs(true)), (V{"a"}));
}

// What /metrics' trainyard_jobs and trainyard_tasks show: every job kept,
// finished ones included, until it is deleted.
TEST(ViewStoreTest, CountsFollowPutsAndLeaveWithADeletedJob) {
  ViewStore views;
  auto with_task = [](ViewStore::JobEntry e, v1::TaskState s) {
    auto v = std::make_shared<v1::JobView>(*e.view);
    v->add_tasks()->set_state(s);
    e.view = v;
    return e;
  };
  views.PutJob("a", with_task(ViewStoreJob("a", 1, v1::JOB_RUNNING), v1::TASK_RUNNING));
  views.PutJob("b", with_task(ViewStoreJob("b", 2, v1::JOB_RUNNING), v1::TASK_RUNNING));
  views.PutJob("a", with_task(ViewStoreJob("a", 1, v1::JOB_SUCCEEDED), v1::TASK_SUCCEEDED));
  ViewStore::Counts c = views.StateCounts();
  EXPECT_EQ((c.jobs[{"", v1::JOB_RUNNING}]), 1);
  EXPECT_EQ((c.jobs[{"", v1::JOB_SUCCEEDED}]), 1);
  EXPECT_EQ(c.tasks[v1::TASK_RUNNING], 1);
  EXPECT_EQ(c.tasks[v1::TASK_SUCCEEDED], 1);
  views.RemoveJob("a");
  c = views.StateCounts();
  EXPECT_EQ((c.jobs[{"", v1::JOB_SUCCEEDED}]), 0) << "a deleted job is not counted";
  EXPECT_EQ((c.jobs[{"", v1::JOB_RUNNING}]), 1);
  EXPECT_EQ(c.tasks[v1::TASK_SUCCEEDED], 0);
  EXPECT_EQ(c.tasks[v1::TASK_RUNNING], 1);
}

TEST(ViewStoreTest, AJobThatChangesQueueIsCountedInItsNewQueueAndStatesSeenStayListed) {
  using Key = std::pair<std::string, v1::JobState>;
  ViewStore views;
  auto in_queue = [](ViewStore::JobEntry e, const std::string& queue) {
    auto v = std::make_shared<v1::JobView>(*e.view);
    v->set_queue(queue);
    e.view = v;
    return e;
  };
  views.PutJob("a", in_queue(ViewStoreJob("a", 1, v1::JOB_QUEUED), "research"));
  views.PutJob("a", in_queue(ViewStoreJob("a", 1, v1::JOB_RUNNING), "research"));
  views.PutJob("a", in_queue(ViewStoreJob("a", 1, v1::JOB_RUNNING), "prod"));
  ViewStore::Counts c = views.StateCounts();
  // What /metrics lists: every (queue, state) counted once, at 0 when none is left.
  std::map<Key, int64_t> want = {{{"prod", v1::JOB_RUNNING}, 1},
                                 {{"research", v1::JOB_QUEUED}, 0},
                                 {{"research", v1::JOB_RUNNING}, 0}};
  EXPECT_EQ(c.jobs, want);
  views.RemoveJob("a");
  want[{"prod", v1::JOB_RUNNING}] = 0;
  EXPECT_EQ(views.StateCounts().jobs, want);
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
  std::thread put([&] { views.PutJob("a", ViewStoreJob("a")); });
  ViewStore::Versions now = views.AwaitChange(seen, absl::Now() + absl::Seconds(30));
  put.join();
  EXPECT_EQ(now.jobs, seen.jobs + 1);
}

}  // namespace
}  // namespace trainyard::server
