// AccountBook: finished jobs' accounts in pages by end time, filtered,
// summed per user or queue, kept for the retention period and up to the
// most jobs; bad requests are refused naming the field.
#include "server/account_book.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

v1::JobAccount Account(uint64_t id, const std::string& user, const std::string& queue, absl::Duration ago,
                       v1::JobState state = v1::JOB_SUCCEEDED, double gpu_hours = 1.0) {
  v1::JobAccount a;
  a.set_id(id);
  a.set_name("job-" + std::to_string(id));
  a.set_user(user);
  a.set_queue(queue);
  a.set_state(state);
  a.set_end_time_unix_ms(absl::ToUnixMillis(kNow - ago));
  a.set_start_time_unix_ms(a.end_time_unix_ms() - 1000);
  a.set_wait_ms(2000 * static_cast<int64_t>(id));
  a.set_elapsed_ms(1000);
  a.set_gpu_hours(gpu_hours);
  return a;
}

std::vector<uint64_t> Ids(const v1::HistoryResponse& r) {
  std::vector<uint64_t> ids;
  for (const auto& a : r.jobs()) ids.push_back(a.id());
  return ids;
}

TEST(AccountBookTest, PagesFollowEndTimesAndTogetherHoldEveryMatchingJobOnce) {
  AccountBook book;
  for (uint64_t id = 1; id <= 7; ++id) book.Put(Account(id, id % 2 ? "ann" : "bob", "q", absl::Minutes(10 - id)));
  book.Put(Account(3, "ann", "q", absl::Minutes(1)));  // republished: its stopping tasks ended later
  v1::HistoryRequest req;
  req.set_page_size(3);
  std::vector<uint64_t> seen;
  int pages = 0;
  do {
    absl::StatusOr<v1::HistoryResponse> page = book.History(req, kNow);
    ASSERT_TRUE(page.ok()) << page.status();
    for (uint64_t id : Ids(*page)) seen.push_back(id);
    req.set_page_token(page->next_page_token());
    ++pages;
  } while (!req.page_token().empty());
  EXPECT_THAT(seen, ::testing::ElementsAre(1, 2, 4, 5, 6, 7, 3)) << "oldest end first, job 3 once, at its new end";
  EXPECT_EQ(pages, 3);

  v1::HistoryRequest ann;
  ann.set_user("ann");
  ann.add_states(v1::JOB_SUCCEEDED);
  ann.set_since_unix_ms(absl::ToUnixMillis(kNow - absl::Minutes(6)));
  EXPECT_THAT(Ids(*book.History(ann, kNow)), ::testing::ElementsAre(5, 7, 3));
  ann.set_until_unix_ms(absl::ToUnixMillis(kNow - absl::Minutes(3)));
  EXPECT_THAT(Ids(*book.History(ann, kNow)), ::testing::ElementsAre(5)) << "until is not included";
}

TEST(AccountBookTest, UsageSumsPerUserOrQueueMostGpuHoursFirst) {
  AccountBook book;
  book.Put(Account(1, "ann", "research", absl::Hours(1), v1::JOB_SUCCEEDED, 2.0));
  book.Put(Account(2, "bob", "research", absl::Hours(2), v1::JOB_FAILED, 5.0));
  book.Put(Account(3, "ann", "prod", absl::Hours(3), v1::JOB_KILLED, 4.0));
  book.Put(Account(4, "ann", "prod", absl::Hours(50), v1::JOB_SUCCEEDED, 100.0));  // before the period
  v1::UsageRequest req;
  req.set_since_unix_ms(absl::ToUnixMillis(kNow - absl::Hours(24)));
  absl::StatusOr<v1::UsageResponse> by_user = book.Usage(req, kNow);
  ASSERT_TRUE(by_user.ok()) << by_user.status();
  ASSERT_EQ(by_user->rows_size(), 2);
  EXPECT_EQ(by_user->rows(0).key(), "ann");
  EXPECT_DOUBLE_EQ(by_user->rows(0).gpu_hours(), 6.0);
  EXPECT_EQ(by_user->rows(0).jobs(), 2);
  EXPECT_EQ(by_user->rows(0).succeeded(), 1);
  EXPECT_EQ(by_user->rows(0).killed(), 1);
  EXPECT_DOUBLE_EQ(by_user->rows(0).mean_wait_s(), (2.0 + 6.0) / 2);
  EXPECT_EQ(by_user->rows(1).key(), "bob");
  EXPECT_EQ(by_user->rows(1).failed(), 1);
  EXPECT_DOUBLE_EQ(by_user->total().gpu_hours(), 11.0);
  EXPECT_EQ(by_user->total().jobs(), 3);

  req.set_group_by("queue");
  absl::StatusOr<v1::UsageResponse> by_queue = book.Usage(req, kNow);
  ASSERT_TRUE(by_queue.ok());
  ASSERT_EQ(by_queue->rows_size(), 2);
  EXPECT_EQ(by_queue->rows(0).key(), "research");
  EXPECT_DOUBLE_EQ(by_queue->rows(0).gpu_hours(), 7.0);
}

TEST(AccountBookTest, KeepsTheRetentionPeriodAndTheMostJobs) {
  AccountBook book;
  book.SetLimits({.retention = absl::Hours(24), .max_jobs = 3});
  book.Put(Account(1, "ann", "q", absl::Hours(30)));
  book.Put(Account(2, "ann", "q", absl::Hours(5)));
  book.Put(Account(3, "ann", "q", absl::Hours(4)));
  EXPECT_THAT(Ids(*book.History({}, kNow)), ::testing::ElementsAre(2, 3)) << "job 1 ended before the retention";
  book.Put(Account(4, "ann", "q", absl::Hours(3)));
  book.Put(Account(5, "ann", "q", absl::Hours(2)));
  absl::StatusOr<v1::HistoryResponse> h = book.History({}, kNow);
  EXPECT_THAT(Ids(*h), ::testing::ElementsAre(3, 4, 5)) << "the first ended leave past max_jobs";
  EXPECT_EQ(h->oldest_kept_unix_ms(), absl::ToUnixMillis(kNow - absl::Hours(4)));
  EXPECT_EQ(book.size(), 3u);
}

TEST(AccountBookTest, NewestFirstPagesStepDownThroughEqualEndTimesAndATokenNeverReachesBeforeSince) {
  AccountBook book;
  // Three jobs that ended in the same millisecond, between two others.
  book.Put(Account(1, "ann", "q", absl::Minutes(3)));
  for (uint64_t id = 2; id <= 4; ++id) book.Put(Account(id, "ann", "q", absl::Minutes(2)));
  book.Put(Account(5, "ann", "q", absl::Minutes(1)));
  for (bool newest : {false, true}) {
    v1::HistoryRequest req;
    req.set_page_size(2);
    req.set_newest_first(newest);
    std::vector<uint64_t> seen;
    do {
      absl::StatusOr<v1::HistoryResponse> page = book.History(req, kNow);
      ASSERT_TRUE(page.ok()) << page.status();
      for (uint64_t id : Ids(*page)) seen.push_back(id);
      req.set_page_token(page->next_page_token());
    } while (!req.page_token().empty());
    if (newest) {
      EXPECT_THAT(seen, ::testing::ElementsAre(5, 4, 3, 2, 1));
    } else {
      EXPECT_THAT(seen, ::testing::ElementsAre(1, 2, 3, 4, 5));
    }
  }
  // A token from before the period (the client moved since): the period holds.
  v1::HistoryRequest later;
  later.set_since_unix_ms(absl::ToUnixMillis(kNow - absl::Minutes(2)));
  later.set_page_token(absl::StrCat(absl::ToUnixMillis(kNow - absl::Minutes(3)), ".1"));
  EXPECT_THAT(Ids(*book.History(later, kNow)), ::testing::ElementsAre(2, 3, 4, 5));
}

TEST(AccountBookTest, AWalkPastManyChunksSeesEveryAccountOnceInOrder) {
  AccountBook book;
  // 5,000 accounts (more than two of the walk's chunks), ten to each end time.
  std::vector<v1::JobAccount> all;
  for (uint64_t id = 1; id <= 5000; ++id) {
    all.push_back(Account(id, id % 2 ? "ann" : "bob", "q", absl::Seconds(10000 - static_cast<int64_t>(id) / 10)));
  }
  book.PutMany(std::move(all));
  for (bool newest : {false, true}) {
    v1::HistoryRequest req;
    req.set_page_size(3000);
    req.set_newest_first(newest);
    req.set_user("bob");
    std::vector<uint64_t> seen;
    do {
      absl::StatusOr<v1::HistoryResponse> page = book.History(req, kNow);
      ASSERT_TRUE(page.ok()) << page.status();
      for (uint64_t id : Ids(*page)) seen.push_back(id);
      req.set_page_token(page->next_page_token());
    } while (!req.page_token().empty());
    ASSERT_EQ(seen.size(), 2500u);
    std::vector<uint64_t> want;
    for (uint64_t id = 2; id <= 5000; id += 2) want.push_back(id);
    if (newest) std::reverse(want.begin(), want.end());
    // Within one end time ids ascend (newest first: descend), as the key orders them.
    EXPECT_EQ(seen, want) << (newest ? "newest first" : "oldest first");
  }
  absl::StatusOr<v1::UsageResponse> u = book.Usage({}, kNow);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->total().jobs(), 5000);
}

TEST(AccountBookTest, RefusesBadRequestsNamingTheField) {
  AccountBook book;
  v1::HistoryRequest running;
  running.add_states(v1::JOB_RUNNING);
  EXPECT_THAT(book.History(running, kNow).status().message(), HasSubstr("states: RUNNING is not a finished state"));
  v1::HistoryRequest token;
  token.set_page_token("x");
  EXPECT_THAT(book.History(token, kNow).status().message(), HasSubstr("page_token: 'x'"));
  v1::HistoryRequest page;
  page.set_page_size(-1);
  EXPECT_THAT(book.History(page, kNow).status().message(), HasSubstr("page_size"));
  v1::UsageRequest backwards;
  backwards.set_since_unix_ms(2000);
  backwards.set_until_unix_ms(1000);
  EXPECT_THAT(book.Usage(backwards, kNow).status().message(), HasSubstr("until_unix_ms: 1000 is not after"));
  v1::UsageRequest by;
  by.set_group_by("node");
  EXPECT_THAT(book.Usage(by, kNow).status().message(), HasSubstr("group_by: 'node' is not user or queue"));
}

}  // namespace
}  // namespace trainyard::server
