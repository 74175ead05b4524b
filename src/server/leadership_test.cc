// Leadership against a real etcd member: a standby learns who leads and the
// HTTP URL the leader publishes, takes over when the leader steps down, and
// a leader whose election key is gone can publish nothing.
#include "server/leadership.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/wait_until.h"
#include "tests/etcd/etcd_test_cluster.h"

namespace trainyard::server {
namespace {

LeadershipOptions Options(const std::string& identity) {
  LeadershipOptions o;
  o.key = "/t/leader";
  o.standby_prefix = "/t/leader-standby/";
  o.terms_key = "/t/leader-terms";
  o.http_key = "/t/leader-http";
  o.identity = identity;
  o.ttl = absl::Seconds(2);
  return o;
}

struct LeadershipSeen {
  absl::Mutex mu;
  std::string leader, url;
  bool Is(const std::string& l, const std::string& u) {
    absl::MutexLock lock(&mu);
    return leader == l && url == u;
  }
};

TEST(LeadershipTest, AStandbySeesTheLeaderAndTheHttpUrlItPublishesThenTakesOver) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> a_client = EtcdClient::Connect(etcd.connect_options());
  absl::StatusOr<std::unique_ptr<EtcdClient>> b_client = EtcdClient::Connect(etcd.connect_options());
  ASSERT_TRUE(a_client.ok() && b_client.ok());
  absl::StatusOr<std::unique_ptr<Leadership>> a = Leadership::Campaign(a_client->get(), Options("10.0.0.1:7450"));
  ASSERT_TRUE(a.ok()) << a.status();

  LeadershipSeen seen;
  LeadershipOptions b_options = Options("10.0.0.2:7450");
  b_options.on_standby = [&seen](const std::string& leader, const std::string& url) {
    absl::MutexLock lock(&seen.mu);
    seen.leader = leader;
    seen.url = url;
  };
  std::atomic<bool> stop{false};
  absl::StatusOr<std::unique_ptr<Leadership>> b = absl::UnknownError("not yet");
  std::thread campaign([&] { b = Leadership::Campaign(b_client->get(), b_options, &stop); });

  // The leader is known before it publishes a URL, then with it.
  EXPECT_TRUE(WaitUntil([&] { return seen.Is("10.0.0.1:7450", ""); }, absl::Seconds(30)));
  EXPECT_TRUE((*a)->PublishHttpUrl("https://10.0.0.1:7451").ok());  // no ASSERT: the campaign thread must be joined
  EXPECT_TRUE(WaitUntil([&] { return seen.Is("10.0.0.1:7450", "https://10.0.0.1:7451"); }, absl::Seconds(30)));

  // The leader steps down (its lease revoked): the URL goes with it, and
  // the standby leads.
  a->reset();
  campaign.join();
  ASSERT_TRUE(b.ok()) << b.status();
  etcdserverpb::RangeRequest url;
  url.set_key("/t/leader-http");
  absl::StatusOr<etcdserverpb::RangeResponse> read = (*b_client)->Range(url);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kvs_size(), 0) << "the old leader's URL outlived its lease";
  EXPECT_TRUE((*b)->PublishHttpUrl("https://10.0.0.2:7451").ok());
}

TEST(LeadershipTest, ALeaderWhoseElectionKeyIsGonePublishesNoUrl) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(etcd.connect_options());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::unique_ptr<Leadership>> a = Leadership::Campaign(client->get(), Options("10.0.0.1:7450"));
  ASSERT_TRUE(a.ok()) << a.status();
  // As when another server took the key over: the fence no longer holds.
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key("/t/leader");
  ASSERT_TRUE((*client)->Txn(del).ok());
  absl::Status published = (*a)->PublishHttpUrl("https://10.0.0.1:7451");
  EXPECT_EQ(published.code(), absl::StatusCode::kFailedPrecondition) << published;
  etcdserverpb::RangeRequest url;
  url.set_key("/t/leader-http");
  absl::StatusOr<etcdserverpb::RangeResponse> read = (*client)->Range(url);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kvs_size(), 0);
}

}  // namespace
}  // namespace trainyard::server
