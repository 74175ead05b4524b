// NodeJoin as a stranger would call it: a bad token is refused before the
// CA's key is read, a request that cannot be signed does not use a token
// up, and one address's refusals are rate-limited, counted and logged in
// summary.
#include "server/join_service.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/certs.h"
#include "security/files.h"
#include "security/join_tokens.h"
#include "server/join_guard.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

constexpr char kPeer[] = "ipv4:10.1.2.3:40000";

class JoinServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-joinsvc-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    certs_ = dir_ + "/certs";
    now_ = absl::FromUnixSeconds(1800000000);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Token(const std::string& node) {
    return security::IssueJoinToken(security::JoinTokenFilePath(dir_), node, absl::Hours(1), now_).value();
  }
  v1::JoinNodeRequest Request(const std::string& node, const std::string& token) {
    v1::JoinNodeRequest req;
    req.set_node(node);
    req.set_token(token);
    req.set_csr_pem(security::MakeKeyAndRequest(node).value().csr_pem);
    return req;
  }

  std::string dir_, certs_;
  absl::Time now_;
};

// The server's cert dir holds no CA at all: a stranger's bad token is
// still answered for what it is, never with the CA's trouble, and counted.
TEST_F(JoinServiceTest, ABadTokenIsRefusedWithoutTheCaKeyBeingRead) {
  JoinService service(dir_ + "/no-certs-here", dir_, nullptr);
  Token("node-9");
  JoinCounts before = JoinGuard::Totals();
  v1::JoinNodeResponse resp;
  absl::Status bad = service.Join(Request("node-9", "tyj_" + std::string(64, '0')), kPeer, now_, &resp);
  EXPECT_TRUE(absl::IsPermissionDenied(bad)) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("the join token is not valid on this server"));
  absl::Status other = service.Join(Request("node-1", Token("node-2")), kPeer, now_, &resp);
  EXPECT_TRUE(absl::IsPermissionDenied(other)) << other;
  EXPECT_THAT(other.message(), HasSubstr("for node 'node-2', not 'node-1'"));
  EXPECT_TRUE(resp.cert_pem().empty());
  EXPECT_EQ(JoinGuard::Totals().refused_token - before.refused_token, 2);
}

// With several servers the token file goes to their shared store before
// a join is answered: a join the store did not take gets no certificate.
TEST_F(JoinServiceTest, AJoinIsAnsweredOnlyOnceTheUsedTokenIsHandedOn) {
  ASSERT_TRUE(security::InitCertDir(certs_, {}).ok());
  JoinService service(certs_, dir_, nullptr);
  std::string file_at_hook;
  absl::Status answer = absl::UnavailableError("etcd: no answer");
  service.SetOnChange([&] {
    file_at_hook = security::ReadWholeFile(security::JoinTokenFilePath(dir_)).value_or("");
    return answer;
  });
  v1::JoinNodeResponse resp;
  absl::Status refused = service.Join(Request("node-9", Token("node-9")), kPeer, now_, &resp);
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_TRUE(resp.cert_pem().empty()) << "no certificate when the used token was not handed on";
  EXPECT_THAT(file_at_hook, HasSubstr(" 1\n")) << "the hook sees the token used: " << file_at_hook;
  answer = absl::OkStatus();
  absl::Status joined = service.Join(Request("node-8", Token("node-8")), kPeer, now_, &resp);
  EXPECT_TRUE(joined.ok()) << joined;
  EXPECT_FALSE(resp.cert_pem().empty());
}

TEST_F(JoinServiceTest, ARequestThatCannotBeSignedDoesNotUseTheTokenUp) {
  ASSERT_TRUE(security::InitCertDir(certs_, {}).ok());
  JoinService service(certs_, dir_, nullptr);
  std::string token = Token("node-9");
  JoinCounts before = JoinGuard::Totals();
  v1::JoinNodeRequest garbled = Request("node-9", token);
  garbled.set_csr_pem("not a request");
  v1::JoinNodeResponse resp;
  absl::Status refused = service.Join(garbled, kPeer, now_, &resp);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("csr_pem"));
  v1::JoinNodeRequest long_token = Request("node-9", std::string(4096, 'x'));
  EXPECT_THAT(service.Join(long_token, kPeer, now_, &resp).message(), HasSubstr("token: longer than 128 bytes"));
  EXPECT_EQ(JoinGuard::Totals().refused_request - before.refused_request, 2);

  absl::Status joined = service.Join(Request("node-9", token), kPeer, now_, &resp);
  ASSERT_TRUE(joined.ok()) << joined;
  EXPECT_EQ(security::CertCommonName(resp.cert_pem()), "node-9");
  EXPECT_EQ(JoinGuard::Totals().joined - before.joined, 1);
  absl::Status again = service.Join(Request("node-9", token), kPeer, now_, &resp);
  EXPECT_THAT(again.message(), HasSubstr("used already"));
}

// One address that keeps guessing is answered "too many" before its token
// is even read, whatever it sends; another address is not held up by it,
// and the first may try again once its bucket has refilled.
TEST_F(JoinServiceTest, AnAddressThatKeepsGuessingIsSlowedAndCounted) {
  ASSERT_TRUE(security::InitCertDir(certs_, {}).ok());
  JoinService service(certs_, dir_, nullptr, {.burst = 3, .refill_per_second = 0.5});
  std::string token = Token("node-9");
  JoinCounts before = JoinGuard::Totals();
  v1::JoinNodeResponse resp;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::IsPermissionDenied(service.Join(Request("node-9", "tyj_guess"), kPeer, now_, &resp)));
  }
  // Another connection of the same host: the same bucket, even with the right token.
  absl::Status slowed = service.Join(Request("node-9", token), "ipv4:10.1.2.3:40001", now_, &resp);
  EXPECT_TRUE(absl::IsResourceExhausted(slowed)) << slowed;
  EXPECT_THAT(slowed.message(), HasSubstr("too many refused joins from this address"));
  EXPECT_EQ(JoinGuard::Totals().refused_rate - before.refused_rate, 1);
  EXPECT_EQ(JoinGuard::Totals().refused_token - before.refused_token, 3);
  // The token was not read, so not used: its own node joins from elsewhere.
  EXPECT_TRUE(service.Join(Request("node-9", token), "ipv6:[fd00::9]:5000", now_, &resp).ok());
  absl::Status later = service.Join(Request("node-9", "tyj_guess"), kPeer, now_ + absl::Seconds(2), &resp);
  EXPECT_TRUE(absl::IsPermissionDenied(later)) << later;
}

TEST(JoinGuardTest, RefusalsAreLoggedAtMostOncePerIntervalWithTheirCount) {
  JoinGuard guard({.burst = 100, .log_interval = absl::Seconds(10)});
  absl::Time t = absl::FromUnixSeconds(1800000000);
  std::string first = guard.Refused(kPeer, JoinGuard::Refusal::kToken, "why 1", t);
  EXPECT_THAT(first, HasSubstr("refused a join from " + std::string(kPeer) + ": why 1"));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(guard.Refused(kPeer, JoinGuard::Refusal::kToken, "why", t + absl::Seconds(i % 10)), "");
  }
  std::string next = guard.Refused("ipv4:10.9.9.9:1", JoinGuard::Refusal::kRequest, "why 52", t + absl::Seconds(12));
  EXPECT_THAT(next, HasSubstr("refused 51 join(s) in the last 12s; the latest from ipv4:10.9.9.9:1: why 52"));
}

// The table of addresses stays bounded; the spent address is the one kept.
TEST(JoinGuardTest, ManyAddressesDoNotResetASpentOne) {
  JoinGuard guard({.burst = 1, .refill_per_second = 0.001, .max_peers = 4});
  absl::Time t = absl::FromUnixSeconds(1800000000);
  guard.Refused(kPeer, JoinGuard::Refusal::kToken, "x", t);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(guard.Admit(absl::StrCat("ipv4:10.0.0.", i, ":1"), t).ok());
  }
  EXPECT_TRUE(absl::IsResourceExhausted(guard.Admit(kPeer, t)));
}

}  // namespace
}  // namespace trainyard::server
