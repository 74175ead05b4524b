// ViewPublisher alone: what goes out to the ViewStore, and what is built
// again, for the changes the control state's handlers report.
#include "server/control/view_publisher.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "server/control/job_rt.h"

namespace trainyard::server {
namespace {

class ViewPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok());
    scheduler_ = std::move(*sched);
    for (const char* name : {"n1", "n2"}) {
      auto node = std::make_unique<NodeRt>();
      node->info.set_name(name);
      node->session = 1;
      node->last_heartbeat = now_;
      nodes_.Add(name, std::move(node));
    }
  }
  JobRt& AddJob(const std::string& name, uint64_t id) {
    auto job = std::make_unique<JobRt>();
    job->rec.set_name(name);
    job->rec.set_id(id);
    job->rec.set_state(v1::JOB_SUCCEEDED);
    job->rec.set_end_time_ms(absl::ToUnixMillis(now_));
    JobRt& out = *job;
    jobs_[name] = std::move(job);
    return out;
  }
  ViewStore::NodesPtr Publish(absl::Time at) {
    publisher_.PublishNodes(&views_, at);
    return views_.Nodes();
  }

  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  ServerConfig config_;
  JobMap jobs_;
  NodeTable nodes_;
  std::unique_ptr<core::Scheduler> scheduler_;
  JobCounts counts_{0, 0};
  ViewPublisher publisher_{config_, jobs_, nodes_, scheduler_, counts_};
  ViewStore views_;
};

TEST_F(ViewPublisherTest, ANodesViewIsBuiltAgainOnlyWhenWhatItShowsChanged) {
  ViewStore::NodesPtr first = Publish(now_);
  ASSERT_EQ(first->size(), 2u);
  EXPECT_FALSE(publisher_.NodeViewsChanged()) << "all went out";

  // Touched, but nothing it shows moved: the same view is shared.
  publisher_.TouchOwnView(*nodes_.Find("n1"));
  EXPECT_TRUE(publisher_.NodeViewsChanged());
  ViewStore::NodesPtr same = Publish(now_);
  EXPECT_EQ((*same)[0].view.get(), (*first)[0].view.get()) << "its signature did not move";

  // A change of n2's own: n2 is built again, n1 is not.
  NodeRt& n2 = *nodes_.Find("n2");
  n2.cordoned = true;
  n2.admin_reason = "maintenance";
  publisher_.TouchOwnView(n2);
  ViewStore::NodesPtr after = Publish(now_);
  EXPECT_EQ((*after)[0].view.get(), (*first)[0].view.get()) << "n1's view is shared, not rebuilt";
  ASSERT_NE((*after)[1].view.get(), (*first)[1].view.get());
  EXPECT_TRUE((*after)[1].view->cordoned());
  EXPECT_EQ((*after)[1].view->info().state(), v1::NODE_CORDONED);

  // A change that nobody reported is not seen until every node is checked.
  nodes_.Find("n1")->draining = true;
  EXPECT_EQ((*Publish(now_))[0].view.get(), (*first)[0].view.get());
  publisher_.NodesChanged();
  EXPECT_EQ((*Publish(now_))[0].view->info().state(), v1::NODE_DRAINING);
}

TEST_F(ViewPublisherTest, AMovedJobChecksTheNodesItsTasksAreOnAndEveryNodeASecondLater) {
  ViewStore::NodesPtr first = Publish(now_);
  JobRt& job = AddJob("train", 1);
  job.rec.add_tasks()->set_node("n1");
  // Both nodes change; only the job's node is said to.
  nodes_.Find("n1")->cordoned = true;
  nodes_.Find("n2")->cordoned = true;
  publisher_.JobMoved("train");
  ViewStore::NodesPtr soon = Publish(now_ + absl::Milliseconds(100));
  EXPECT_TRUE((*soon)[0].view->cordoned()) << "n1, where the job's task is, is checked at once";
  EXPECT_EQ((*soon)[1].view.get(), (*first)[1].view.get()) << "n2 is not checked yet";
  ViewStore::NodesPtr later = Publish(now_ + absl::Seconds(1));
  EXPECT_TRUE((*later)[1].view->cordoned()) << "every node is checked a second after a job moved";
}

TEST_F(ViewPublisherTest, JobsMovedOnMoreThanHalfTheNodesCheckEveryNode) {
  Publish(now_);
  for (const char* name : {"n3", "n4"}) {
    auto node = std::make_unique<NodeRt>();
    node->info.set_name(name);
    nodes_.Add(name, std::move(node));
  }
  publisher_.NodesChanged();
  ViewStore::NodesPtr first = Publish(now_);
  ASSERT_EQ(first->size(), 4u);
  for (int i = 1; i <= 3; ++i) AddJob("j" + std::to_string(i), i).rec.add_tasks()->set_node("n1");
  for (const char* name : {"n1", "n2", "n3", "n4"}) nodes_.Find(name)->draining = true;
  publisher_.JobMoved("j1");
  publisher_.JobMoved("j2");
  EXPECT_EQ((*Publish(now_))[3].view.get(), (*first)[3].view.get()) << "two of four: only their nodes";
  publisher_.JobMoved("j1");
  publisher_.JobMoved("j2");
  publisher_.JobMoved("j3");  // three of four: more than half
  ViewStore::NodesPtr all = Publish(now_);
  for (size_t i = 0; i < all->size(); ++i) EXPECT_EQ((*all)[i].view->info().state(), v1::NODE_DRAINING) << i;
}

TEST_F(ViewPublisherTest, HeartbeatTimesAloneGoOutOnceASecondAndBuildNoView) {
  ViewStore::NodesPtr first = Publish(now_);
  nodes_.Find("n1")->last_heartbeat = now_ + absl::Milliseconds(100);
  publisher_.HeartbeatsMoved();
  EXPECT_EQ(Publish(now_ + absl::Milliseconds(100)).get(), first.get()) << "within the second: nothing goes out";
  ViewStore::NodesPtr later = Publish(now_ + absl::Seconds(1));
  ASSERT_NE(later.get(), first.get());
  EXPECT_EQ((*later)[0].Full().last_heartbeat_unix_ms(), absl::ToUnixMillis(now_ + absl::Milliseconds(100)));
  EXPECT_EQ((*later)[0].view.get(), (*first)[0].view.get()) << "the time is published beside the view";
  EXPECT_EQ(Publish(now_ + absl::Seconds(3)).get(), later.get()) << "nothing moved since";
}

TEST_F(ViewPublisherTest, TheQueueViewIsDueOnceAfterAChange) {
  EXPECT_TRUE(publisher_.PublishNodes(&views_, now_)) << "due at the start";
  EXPECT_FALSE(publisher_.PublishNodes(&views_, now_));
  publisher_.QueuesChanged();
  EXPECT_TRUE(publisher_.NodeViewsChanged());
  EXPECT_TRUE(publisher_.PublishNodes(&views_, now_));
  EXPECT_FALSE(publisher_.PublishNodes(&views_, now_));
}

TEST_F(ViewPublisherTest, AChangedJobGoesOutOnceAndADeletedOneComesDownWithItsAccountKept) {
  AddJob("train", 7);
  publisher_.JobChanged("train");
  publisher_.JobChanged("train");
  EXPECT_TRUE(publisher_.JobViewsChanged());
  publisher_.PublishJobs(&views_);
  EXPECT_FALSE(publisher_.JobViewsChanged());
  std::optional<ViewStore::JobEntry> entry = views_.Job("train");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->view->id(), 7u);
  EXPECT_EQ(entry->view->state(), v1::JOB_SUCCEEDED);

  // Deleted after a change that did not go out yet: its view comes down and
  // is not put again; its account stays in the book.
  publisher_.JobChanged("train");
  v1::JobAccount account;
  account.set_id(7);
  account.set_name("train#7");
  account.set_end_time_unix_ms(absl::ToUnixMillis(now_));
  publisher_.JobDeleted("train", account);
  publisher_.PublishJobs(&views_);
  EXPECT_FALSE(views_.Job("train").has_value());
  v1::HistoryRequest history;
  absl::StatusOr<v1::HistoryResponse> kept = views_.accounts().History(history, now_);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->jobs_size(), 1) << "one account per job id";
  EXPECT_EQ(kept->jobs(0).name(), "train#7") << "the deleted job's account, as the deletion left it";
}

TEST_F(ViewPublisherTest, RecoveredJobsGoOutAFewAtATime) {
  for (int i = 1; i <= 5; ++i) {
    AddJob("j" + std::to_string(i), i);
    publisher_.Recovered("j" + std::to_string(i));
  }
  EXPECT_EQ(publisher_.PublishRecovered(&views_, 2), 3u);
  EXPECT_EQ(publisher_.PublishRecovered(&views_, 2), 1u);
  EXPECT_EQ(publisher_.PublishRecovered(&views_, 2), 0u);
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(views_.Job("j" + std::to_string(i)).has_value()) << i;
}

}  // namespace
}  // namespace trainyard::server
