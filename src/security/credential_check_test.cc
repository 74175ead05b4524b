// CredentialCheck: a stream's token is asked about again every few seconds,
// and once refused stays refused.
#include "security/credential_check.h"

#include "gtest/gtest.h"

namespace trainyard::security {
namespace {

TEST(CredentialCheckTest, AsksAgainEveryIntervalAndARevokedTokenStaysRefused) {
  int asked = 0;
  bool held = true;
  absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  CredentialCheck check(
      [&](absl::string_view authorization) -> absl::StatusOr<Principal> {
        ++asked;
        EXPECT_EQ(authorization, "Bearer ty_x");
        if (!held) return absl::UnauthenticatedError("unknown token");
        return Principal{.user = "ana"};
      },
      "Bearer ty_x", t0, absl::Seconds(5));
  EXPECT_TRUE(check.Valid(t0 + absl::Seconds(1)));
  EXPECT_TRUE(check.Valid(t0 + absl::Seconds(4)));
  EXPECT_EQ(asked, 0);  // checked at the stream's open
  EXPECT_TRUE(check.Valid(t0 + absl::Seconds(5)));
  EXPECT_EQ(asked, 1);
  held = false;  // revoked
  EXPECT_TRUE(check.Valid(t0 + absl::Seconds(9)));  // not asked yet
  EXPECT_FALSE(check.Valid(t0 + absl::Seconds(10)));
  EXPECT_EQ(asked, 2);
  held = true;
  EXPECT_FALSE(check.Valid(t0 + absl::Seconds(60)));  // a stream once refused is done
  EXPECT_EQ(asked, 2);
}

TEST(CredentialCheckTest, AServerWithoutSecurityHasNothingToCheck) {
  CredentialCheck check(nullptr, "", absl::UnixEpoch());
  EXPECT_TRUE(check.Valid(absl::UnixEpoch() + absl::Hours(1)));
}

}  // namespace
}  // namespace trainyard::security
