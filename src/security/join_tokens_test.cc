// Join tokens and the certificate a joining node gets: once, for its node,
// before it expires; the CA's pin.
#include "security/join_tokens.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "security/certs.h"
#include "security/files.h"

namespace trainyard::security {
namespace {

class JoinTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-join-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    path_ = JoinTokenFilePath(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
  absl::Time now_ = absl::FromUnixSeconds(1800000000);
};

TEST_F(JoinTokensTest, ATokenJoinsItsNodeOnceAndOnlyItsHashIsKept) {
  absl::StatusOr<std::string> t = IssueJoinToken(path_, "node-9", absl::Hours(1), now_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rfind("tyj_", 0), 0u);
  EXPECT_EQ(ReadWholeFile(path_)->find(*t), std::string::npos);
  struct stat st {};
  stat(path_.c_str(), &st);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  absl::Status other = RedeemJoinToken(path_, *t, "node-1", now_);
  EXPECT_TRUE(absl::IsPermissionDenied(other));
  EXPECT_NE(other.message().find("for node 'node-9'"), std::string::npos) << other;
  EXPECT_TRUE(RedeemJoinToken(path_, *t, "node-9", now_ + absl::Minutes(5)).ok());
  absl::Status again = RedeemJoinToken(path_, *t, "node-9", now_ + absl::Minutes(6));
  EXPECT_TRUE(absl::IsPermissionDenied(again));
  EXPECT_NE(again.message().find("used already"), std::string::npos) << again;
}

TEST_F(JoinTokensTest, AnExpiredOrUnknownTokenIsRefused) {
  absl::StatusOr<std::string> t = IssueJoinToken(path_, "node-9", absl::Minutes(10), now_);
  ASSERT_TRUE(t.ok());
  absl::Status late = RedeemJoinToken(path_, *t, "node-9", now_ + absl::Minutes(10));
  EXPECT_TRUE(absl::IsPermissionDenied(late));
  EXPECT_NE(late.message().find("expired"), std::string::npos) << late;
  absl::Status unknown = RedeemJoinToken(path_, "tyj_00", "node-9", now_);
  EXPECT_NE(unknown.message().find("not valid on this server"), std::string::npos) << unknown;
  EXPECT_TRUE(absl::IsInvalidArgument(IssueJoinToken(path_, "a b", absl::Hours(1), now_).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(IssueJoinToken(path_, "n", absl::ZeroDuration(), now_).status()));
}

// A check says what a redeem would, and leaves the token usable.
TEST_F(JoinTokensTest, ACheckDoesNotUseTheTokenUp) {
  absl::StatusOr<std::string> t = IssueJoinToken(path_, "node-9", absl::Minutes(10), now_);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(CheckJoinToken(path_, *t, "node-9", now_).ok());
  EXPECT_TRUE(CheckJoinToken(path_, *t, "node-9", now_).ok());
  EXPECT_NE(CheckJoinToken(path_, *t, "node-1", now_).message().find("for node 'node-9'"), std::string::npos);
  EXPECT_NE(CheckJoinToken(path_, "tyj_00", "node-9", now_).message().find("not valid"), std::string::npos);
  EXPECT_TRUE(absl::IsPermissionDenied(CheckJoinToken(path_, *t, "node-9", now_ + absl::Minutes(10))));
  ASSERT_TRUE(RedeemJoinToken(path_, *t, "node-9", now_).ok());
  EXPECT_NE(CheckJoinToken(path_, *t, "node-9", now_).message().find("used already"), std::string::npos);
}

TEST_F(JoinTokensTest, ARequestIsSignedForTheNodeTheTokenNamesWhateverItAsks) {
  ASSERT_TRUE(InitCertDir(dir_ + "/certs", {}).ok());
  KeyPair ca = LoadCa(dir_ + "/certs").value();
  absl::StatusOr<KeyAndRequest> kr = MakeKeyAndRequest("node-9");
  ASSERT_TRUE(kr.ok()) << kr.status();
  absl::StatusOr<std::string> cert = SignNodeRequest(ca, kr->csr_pem, "node-9");
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_EQ(NodeNameOfPeerCert(*cert), "node-9");
  // The request's own name counts for nothing: the token's node is signed.
  absl::StatusOr<std::string> renamed = SignNodeRequest(ca, kr->csr_pem, "node-3");
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ(CertCommonName(*renamed), "node-3");
  EXPECT_TRUE(absl::IsInvalidArgument(SignNodeRequest(ca, "not a request", "node-9").status()));
  // The pin: SHA-256 of the CA's DER, the same for the same certificate.
  std::string pin = CertPin(ca.cert_pem);
  EXPECT_EQ(pin.rfind("sha256:", 0), 0u);
  EXPECT_EQ(pin.size(), 7u + 64u);
  EXPECT_EQ(CertPin(ReadWholeFile(CaCertPath(dir_ + "/certs")).value()), pin);
  EXPECT_NE(CertPin(ReadWholeFile(ServerCertPath(dir_ + "/certs")).value()), pin);
}

}  // namespace
}  // namespace trainyard::security
