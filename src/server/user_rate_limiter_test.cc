#include "server/user_rate_limiter.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

security::Principal User(const std::string& name) { return {.user = name, .admin = false, .anonymous = false}; }

TEST(UserRateLimiterTest, OneUserOverTheLimitIsRefusedAndAnotherIsServed) {
  UserRateLimiter limiter({.submit = 1, .list_jobs = 2, .logs = 1, .create_token = 1, .burst_seconds = 3});
  absl::Time t = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(limiter.Allow(User("alice"), UserRateLimiter::kListJobs, t).ok()) << i;
  absl::Status over = limiter.Allow(User("alice"), UserRateLimiter::kListJobs, t);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("rateLimits.listJobs"));
  EXPECT_EQ(limiter.Refused(UserRateLimiter::kListJobs), 1);
  EXPECT_TRUE(limiter.Allow(User("bob"), UserRateLimiter::kListJobs, t).ok());
  // Another kind of call has a bucket of its own.
  EXPECT_TRUE(limiter.Allow(User("alice"), UserRateLimiter::kSubmit, t).ok());
  // Half a second later one more listing is allowed (2 a second).
  EXPECT_TRUE(limiter.Allow(User("alice"), UserRateLimiter::kListJobs, t + absl::Milliseconds(500)).ok());
  EXPECT_FALSE(limiter.Allow(User("alice"), UserRateLimiter::kListJobs, t + absl::Milliseconds(500)).ok());
}

TEST(UserRateLimiterTest, AdminsAndUnlimitedCallsAreNotCounted) {
  UserRateLimiter limiter({.submit = 0, .list_jobs = 0.001, .logs = 1, .create_token = 1, .burst_seconds = 0});
  absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(limiter.Allow(User("alice"), UserRateLimiter::kListJobs, t).ok());  // a burst of at least one
  EXPECT_FALSE(limiter.Allow(User("alice"), UserRateLimiter::kListJobs, t).ok());
  security::Principal admin{.user = "root", .admin = true, .anonymous = false};
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limiter.Allow(admin, UserRateLimiter::kListJobs, t).ok());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limiter.Allow(User("alice"), UserRateLimiter::kSubmit, t).ok());
  // Tokens are limited for admins too.
  EXPECT_TRUE(limiter.Allow(admin, UserRateLimiter::kCreateToken, t).ok());
  EXPECT_EQ(limiter.Allow(admin, UserRateLimiter::kCreateToken, t).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace trainyard::server
