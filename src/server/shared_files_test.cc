// The data dir's files two servers of one store hold alike: what one leader
// made (its jobs' secret, tokens it issued, join tokens) is what the next
// adopts, and a token is handed out only once the store holds it.
#include "server/shared_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/crypto.h"
#include "security/files.h"
#include "security/join_tokens.h"
#include "security/tokens.h"
#include "store/memory_state_store.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

const std::string kSealKey = SharedFiles::SealKeyFromCaKey("the cluster CA's key");

class SharedFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-shared-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    a_ = dir_ + "/a";
    b_ = dir_ + "/b";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string Read(const std::string& path) { return security::ReadWholeFile(path).value_or("(none)"); }
  static int Mode(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
  }
  int64_t Commits() { return store_.Stats().batches_committed; }

  std::string dir_, a_, b_;
  MemoryStateStore store_;
};

TEST_F(SharedFilesTest, TheNextLeaderAdoptsTheFirstLeadersSecretAndTokensInPlaceOfItsOwn) {
  std::string secret_a = security::LoadOrCreateSecret(a_ + "/job-secret").value();
  std::string token = security::IssueToken(security::TokenFilePath(a_), "alice", /*admin=*/false).value();
  std::string join = security::IssueJoinToken(security::JoinTokenFilePath(a_), "node-9", absl::Hours(1),
                                              absl::FromUnixSeconds(1800000000))
                         .value();
  SharedFiles first(&store_, a_, kSealKey);
  ASSERT_TRUE(first.Adopt().ok());  // the store holds nothing yet: a's files stay
  EXPECT_EQ(Read(a_ + "/job-secret"), secret_a + "\n");
  ASSERT_TRUE(first.PublishAll().ok());
  for (std::string name : {SharedFiles::kTokens, SharedFiles::kJoinTokens}) {
    EXPECT_EQ(store_.GetMeta(SharedFiles::MetaKey(name)).value_or("(none)"), Read(a_ + "/" + name)) << name;
  }
  // The jobs' secret is in the store only sealed.
  std::string sealed = store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kJobSecret)).value_or("");
  EXPECT_TRUE(security::IsSealed(sealed)) << sealed;
  EXPECT_EQ(sealed.find(secret_a), std::string::npos);

  // b made a secret of its own before it ever led; it takes the cluster's.
  std::string secret_b = security::LoadOrCreateSecret(b_ + "/job-secret").value();
  ASSERT_NE(secret_a, secret_b);
  SharedFiles next(&store_, b_, kSealKey);
  ASSERT_TRUE(next.Adopt().ok());
  for (const std::string& name : SharedFiles::Names()) EXPECT_EQ(Read(b_ + "/" + name), Read(a_ + "/" + name)) << name;
  EXPECT_EQ(security::LoadOrCreateSecret(b_ + "/job-secret").value(), secret_a);
  EXPECT_EQ(Mode(b_ + "/job-secret"), 0600);
  EXPECT_EQ(Mode(b_ + "/tokens"), 0600);
  security::TokenStore tokens(security::TokenFilePath(b_));
  absl::StatusOr<security::Principal> alice = tokens.Authenticate("Bearer " + token);
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->user, "alice");
  EXPECT_TRUE(security::CheckJoinToken(security::JoinTokenFilePath(b_), join, "node-9",
                                       absl::FromUnixSeconds(1800000060))
                  .ok());
}

TEST_F(SharedFilesTest, AFileThatDidNotChangeIsNotWrittenAgainAndAMissingOneLeavesTheStoresCopy) {
  security::LoadOrCreateSecret(a_ + "/job-secret").value();
  SharedFiles shared(&store_, a_, kSealKey);
  ASSERT_TRUE(shared.PublishAll().ok());
  int64_t after_first = Commits();
  EXPECT_EQ(after_first, 1);  // the secret; no tokens file, no join tokens yet
  ASSERT_TRUE(shared.PublishAll().ok());
  EXPECT_EQ(Commits(), after_first);
  std::filesystem::remove(a_ + "/job-secret");
  ASSERT_TRUE(shared.Publish(SharedFiles::kJobSecret).ok());
  EXPECT_TRUE(store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kJobSecret)).ok());
}

TEST_F(SharedFilesTest, AnIssuedTokenIsInTheStoreBeforeItIsHandedOutAndAnAdminsEditFollows) {
  std::filesystem::create_directories(a_);
  SharedFiles shared(&store_, a_, kSealKey);
  security::TokenStore tokens(security::TokenFilePath(a_));
  int calls = 0;
  tokens.SetOnChange([&] {
    ++calls;
    tokens.size();  // the hook runs without the store's lock: this does not deadlock
    return shared.Publish(SharedFiles::kTokens);
  });
  absl::StatusOr<std::string> token = tokens.Issue("bob", /*admin=*/true);
  ASSERT_TRUE(token.ok()) << token.status();
  std::string held = store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kTokens)).value_or("");
  EXPECT_THAT(held, HasSubstr(" bob admin"));

  // An admin removes the line on the leader: the next read of the file
  // carries the removal to the store, so no later leader accepts it.
  ASSERT_TRUE(security::WritePrivateFile(security::TokenFilePath(a_), "# emptied\n").ok());
  EXPECT_FALSE(tokens.Authenticate("Bearer " + *token).ok());
  EXPECT_EQ(store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kTokens)).value_or(""), "# emptied\n");
  EXPECT_GE(calls, 2);
}

TEST_F(SharedFilesTest, AnEditTheStoreDidNotTakeIsHandedOnAgainUntilItIsTaken) {
  std::filesystem::create_directories(a_);
  security::TokenStore tokens(security::TokenFilePath(a_));
  std::atomic<bool> store_down{true};
  std::atomic<int> calls{0};
  tokens.SetOnChange([&] {
    ++calls;
    return store_down ? absl::UnavailableError("etcd: no answer") : absl::OkStatus();
  });
  ASSERT_TRUE(security::WritePrivateFile(security::TokenFilePath(a_), "# edited\n").ok());
  EXPECT_EQ(tokens.size(), 0u);
  EXPECT_EQ(calls, 1);
  // Tried again by a later read (a second on), not left until the file changes.
  EXPECT_TRUE(WaitUntil([&] { return tokens.size() == 0 && calls >= 2; }, absl::Seconds(30)));
  store_down = false;
  EXPECT_TRUE(WaitUntil([&] {
    int before = calls;
    tokens.size();
    return calls == before && !store_down;  // a read that called nothing: it was taken
  }, absl::Seconds(30)));
  int taken = calls;
  tokens.size();
  tokens.size();
  EXPECT_EQ(calls, taken) << "taken: not called again until the file changes";
}

TEST_F(SharedFilesTest, AServerOfAnotherCaNeitherTakesNorReplacesTheClustersSecret) {
  std::string secret_a = security::LoadOrCreateSecret(a_ + "/job-secret").value();
  ASSERT_TRUE(SharedFiles(&store_, a_, kSealKey).PublishAll().ok());
  std::string held = store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kJobSecret)).value();
  std::string secret_b = security::LoadOrCreateSecret(b_ + "/job-secret").value();

  SharedFiles other(&store_, b_, SharedFiles::SealKeyFromCaKey("another CA's key"));
  absl::Status adopted = other.Adopt();
  EXPECT_TRUE(absl::IsFailedPrecondition(adopted)) << adopted;
  EXPECT_THAT(adopted.message(), HasSubstr("same --tls-dir"));
  EXPECT_FALSE(other.PublishAll().ok());
  EXPECT_EQ(store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kJobSecret)).value(), held);
  EXPECT_EQ(security::LoadOrCreateSecret(b_ + "/job-secret").value(), secret_b);

  // Nor does one without a CA key (plaintext, or a --tls-dir without it).
  SharedFiles plain(&store_, b_, "");
  absl::Status plain_adopted = plain.Adopt();
  EXPECT_TRUE(absl::IsFailedPrecondition(plain_adopted)) << plain_adopted;
  EXPECT_THAT(plain_adopted.message(), HasSubstr("no CA key"));
  EXPECT_EQ(store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kJobSecret)).value(), held);
  EXPECT_EQ(security::LoadOrCreateSecret(b_ + "/job-secret").value(), secret_b);
  EXPECT_NE(secret_a, secret_b);
}

TEST_F(SharedFilesTest, WithoutACaKeyAClusterWhoseStoreHoldsNoSecretKeepsEachServersOwn) {
  std::string secret_a = security::LoadOrCreateSecret(a_ + "/job-secret").value();
  SharedFiles plain(&store_, a_, "");
  ASSERT_TRUE(plain.Adopt().ok());
  ASSERT_TRUE(plain.PublishAll().ok());
  EXPECT_FALSE(store_.GetMeta(SharedFiles::MetaKey(SharedFiles::kJobSecret)).ok());
  EXPECT_EQ(security::LoadOrCreateSecret(a_ + "/job-secret").value(), secret_a);
}

TEST_F(SharedFilesTest, ATokenTheStoreCouldNotKeepIsNotHandedOut) {
  std::filesystem::create_directories(a_);
  security::TokenStore tokens(security::TokenFilePath(a_));
  tokens.SetOnChange([] { return absl::UnavailableError("tokens: not kept in the store"); });
  absl::StatusOr<std::string> token = tokens.Issue("carol", /*admin=*/false);
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.status().message(), HasSubstr("not kept in the store"));
}

}  // namespace
}  // namespace trainyard::server
