// The accounting routes' queries: what they take, and a 400's message
// naming the parameter for what they do not.
#include "server/http/accounting_routes.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;
using Params = std::multimap<std::string, std::string>;

TEST(AccountingRoutesTest, AHistoryQueryBecomesItsRequest) {
  absl::StatusOr<v1::HistoryRequest> q = ParseHistoryQuery(
      {{"user", "ann"}, {"state", "failed,KILLED"}, {"since", "1000"}, {"until", "2000"}, {"order", "newest"},
       {"limit", "10"}, {"cursor", "1500.7"}, {"name", "sweep"}});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->user(), "ann");
  EXPECT_THAT(q->states(), ::testing::ElementsAre(v1::JOB_FAILED, v1::JOB_KILLED));
  EXPECT_EQ(q->since_unix_ms(), 1000);
  EXPECT_EQ(q->until_unix_ms(), 2000);
  EXPECT_TRUE(q->newest_first());
  EXPECT_EQ(q->page_size(), 10);
  EXPECT_EQ(q->page_token(), "1500.7");
  EXPECT_EQ(q->name(), "sweep");
  EXPECT_EQ(ParseHistoryQuery({})->page_size(), 500) << "the default page";
}

TEST(AccountingRoutesTest, BadParametersAreNamed) {
  struct Case {
    Params params;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{{"state", "running"}}, "state: 'running' is not one of SUCCEEDED"},
           {{{"since", "yesterday"}}, "since: 'yesterday' is not a time in Unix ms"},
           {{{"until", "-5"}}, "until: '-5' is not a time in Unix ms"},
           {{{"limit", "0"}}, "limit: '0' is not a whole number in 1..5000"},
           {{{"order", "up"}}, "order: 'up' is not oldest or newest"},
           {{{"sort", "x"}}, "sort: not a parameter of /api/v1/accounting/jobs"},
       }) {
    EXPECT_THAT(ParseHistoryQuery(c.params).status().message(), HasSubstr(c.message));
  }
  EXPECT_THAT(ParseUsageQuery({{"by", "node"}}).status().message(), HasSubstr("by: 'node' is not user or queue"));
  EXPECT_THAT(ParseUsageQuery({{"limit", "5"}}).status().message(),
              HasSubstr("limit: not a parameter of /api/v1/accounting/usage"));
  absl::StatusOr<v1::UsageRequest> u = ParseUsageQuery({{"by", "queue"}, {"since", "5"}, {"queue", "prod"}});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->group_by(), "queue");
  EXPECT_EQ(u->queue(), "prod");
}

}  // namespace
}  // namespace trainyard::server::http
