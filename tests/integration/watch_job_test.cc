// WatchJob and `submit --wait`: a job's states come as they change, the
// stream ends with the job, and one user's watches stop at their cap while
// another user's are still served.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "tests/integration/grpc_client.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

struct WatchJobWatch {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::JobView>> reader;
};

std::unique_ptr<WatchJobWatch> OpenWatch(v1::Trainyard::Stub& stub, const std::string& token, const std::string& job) {
  auto w = std::make_unique<WatchJobWatch>();
  w->ctx.AddMetadata("authorization", "Bearer " + token);
  v1::WatchJobRequest req;
  req.set_job(job);
  w->reader = stub.WatchJob(&w->ctx, req);
  return w;
}

TEST(WatchJobTest, StatesComeAsTheyChangeAndTheStreamEndsWithTheJob) {
  Cluster c({.nodes = 1});
  std::string go = c.dir() + "/go";
  std::string job = c.Submit(absl::StrCat("name: watched\nreplicas:\n  worker:\n    command: [sh, -c, '",
                                          WaitForFile(go), "']\n"));
  auto stub = v1::Trainyard::NewStub(grpc::CreateChannel(c.address(), ClientCredentials()));
  std::unique_ptr<WatchJobWatch> w = OpenWatch(*stub, AdminToken(), job);
  std::vector<v1::JobState> states;
  std::vector<std::string> sent;  // state and reason
  v1::JobView v;
  while (w->reader->Read(&v)) {
    states.push_back(v.state());
    sent.push_back(absl::StrCat(v.state(), " ", v.reason()));
    if (v.state() == v1::JOB_RUNNING) WriteFile(go, "");  // it ends once it was seen running
  }
  grpc::Status st = w->reader->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back(), v1::JOB_SUCCEEDED);
  EXPECT_NE(std::find(states.begin(), states.end(), v1::JOB_RUNNING), states.end());
  for (size_t i = 1; i < sent.size(); ++i) EXPECT_NE(sent[i], sent[i - 1]) << "a view is sent once it changed";

  // A job that does not exist is NOT_FOUND at once; a stranger is refused.
  std::unique_ptr<WatchJobWatch> none = OpenWatch(*stub, AdminToken(), "no-such-job");
  EXPECT_FALSE(none->reader->Read(&v));
  EXPECT_EQ(none->reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  std::unique_ptr<WatchJobWatch> stranger = OpenWatch(*stub, "ty_forged", job);
  EXPECT_FALSE(stranger->reader->Read(&v));
  EXPECT_EQ(stranger->reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // `submit --wait` follows the same stream and says each state.
  WriteFile(c.dir() + "/waited.yaml", "name: waited\nreplicas:\n  worker:\n    command: [sh, -c, 'exit 3']\n");
  CommandResult waited = c.Cli({"submit", c.dir() + "/waited.yaml", "--wait"});
  EXPECT_NE(waited.exit_code, 0);
  EXPECT_THAT(waited.out, HasSubstr("waited: FAILED"));
}

TEST(WatchJobTest, OneUsersWatchesStopAtTheirCapAndAnotherUsersAreServed) {
  Cluster c({.nodes = 1});
  std::string alice = c.UserToken("alice"), bob = c.UserToken("bob");
  ASSERT_FALSE(alice.empty());
  ASSERT_FALSE(bob.empty());
  std::string go = c.dir() + "/go";
  std::string spec = absl::StrCat("name: long\nreplicas:\n  worker:\n    command: [sh, -c, '", WaitForFile(go), "']\n");
  WriteFile(c.dir() + "/long.yaml", spec);
  ASSERT_EQ(c.CliAs(alice, {"submit", c.dir() + "/long.yaml"}).exit_code, 0);
  auto stub = v1::Trainyard::NewStub(grpc::CreateChannel(c.address(), ClientCredentials()));
  constexpr int kPerUser = 32;  // ClientService's bound
  std::vector<std::unique_ptr<WatchJobWatch>> watches;
  v1::JobView v;
  for (int i = 0; i < kPerUser; ++i) {
    watches.push_back(OpenWatch(*stub, alice, "long"));
    ASSERT_TRUE(watches.back()->reader->Read(&v)) << i;  // the first view: the watch is open
  }
  std::unique_ptr<WatchJobWatch> over = OpenWatch(*stub, alice, "long");
  EXPECT_FALSE(over->reader->Read(&v));
  grpc::Status refused = over->reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("per user"));
  std::unique_ptr<WatchJobWatch> bobs = OpenWatch(*stub, bob, "long");
  EXPECT_TRUE(bobs->reader->Read(&v)) << "another user's watch is served";
  // Alice's watches all end with the job.
  WriteFile(go, "");
  for (auto& w : watches) {
    while (w->reader->Read(&v)) {
    }
    EXPECT_TRUE(w->reader->Finish().ok());
    EXPECT_EQ(v.state(), v1::JOB_SUCCEEDED);
  }
  bobs->ctx.TryCancel();
  while (bobs->reader->Read(&v)) {
  }
  bobs->reader->Finish();
}

}  // namespace
}  // namespace trainyard::testing
