// Tokens, the client config file, the rules of access and jobs' credentials,
// as a user of each meets them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/access.h"
#include "security/client_config.h"
#include "security/crypto.h"
#include "security/files.h"
#include "security/login.h"
#include "security/server_security.h"
#include "security/tokens.h"

namespace trainyard::security {
namespace {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-sec-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  int Mode(const std::string& path) {
    struct stat st {};
    stat(path.c_str(), &st);
    return st.st_mode & 0777;
  }
  std::string dir_;
};

using TokensTest = TempDirTest;

TEST_F(TokensTest, AnIssuedTokenAuthenticatesItsUserAndOnlyItsHashIsStored) {
  TokenStore store(TokenFilePath(dir_));
  absl::StatusOr<std::string> alice = store.Issue("alice", /*admin=*/false);
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->rfind("ty_", 0), 0u);
  absl::StatusOr<Principal> who = store.Authenticate("Bearer " + *alice);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->user, "alice");
  EXPECT_FALSE(who->admin);
  EXPECT_FALSE(who->anonymous);
  std::string file = ReadWholeFile(TokenFilePath(dir_)).value();
  EXPECT_EQ(file.find(*alice), std::string::npos);
  EXPECT_EQ(Mode(TokenFilePath(dir_)), 0600);
}

TEST_F(TokensTest, MissingOrWrongTokensAreUnauthenticatedWithWhatToDo) {
  TokenStore store(TokenFilePath(dir_));
  ASSERT_TRUE(store.Issue("root", true).ok());
  absl::StatusOr<Principal> none = store.Authenticate("");
  EXPECT_TRUE(absl::IsUnauthenticated(none.status()));
  EXPECT_NE(none.status().message().find("trainyard token create"), std::string::npos) << none.status();
  absl::StatusOr<Principal> wrong = store.Authenticate("Bearer ty_0000");
  EXPECT_TRUE(absl::IsUnauthenticated(wrong.status()));
  EXPECT_NE(wrong.status().message().find("not valid on this server"), std::string::npos) << wrong.status();
  EXPECT_TRUE(absl::IsUnauthenticated(store.Authenticate("Basic abc").status()));
}

TEST_F(TokensTest, ATokenAddedByAnotherProcessWorksWithoutARestart) {
  TokenStore server(TokenFilePath(dir_));
  EXPECT_EQ(server.size(), 0u);
  absl::StatusOr<std::string> t = IssueToken(TokenFilePath(dir_), "bob", true);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<Principal> who = server.Authenticate("bearer " + *t);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_TRUE(who->admin);
}

// A read of the token file that fails (no descriptor left, say) keeps the
// tokens known and is tried again: it does not lock every user out until
// the file next changes.
TEST_F(TokensTest, AFailedReadKeepsTheTokensAndIsTriedAgain) {
  std::string path = TokenFilePath(dir_);
  absl::StatusOr<std::string> t = IssueToken(path, "bob", false);
  ASSERT_TRUE(t.ok());
  TokenStore server(path);
  ASSERT_TRUE(server.Authenticate("Bearer " + *t).ok());
  // The file changes into something that cannot be read as one.
  std::string kept = path + ".kept";
  std::filesystem::rename(path, kept);
  std::filesystem::create_directory(path);
  EXPECT_TRUE(server.Authenticate("Bearer " + *t).ok()) << "kept through the failed read";
  std::filesystem::remove(path);
  std::filesystem::rename(kept, path);
  EXPECT_TRUE(server.Authenticate("Bearer " + *t).ok());
}

TEST_F(TokensTest, BadUserNamesAreRefusedNamingTheRule) {
  absl::StatusOr<std::string> t = IssueToken(TokenFilePath(dir_), "a b", false);
  EXPECT_TRUE(absl::IsInvalidArgument(t.status()));
  EXPECT_NE(t.status().message().find("not a user name"), std::string::npos) << t.status();
  EXPECT_FALSE(IssueToken(TokenFilePath(dir_), "*", false).ok());
}

using ClientConfigTest = TempDirTest;

TEST_F(ClientConfigTest, WrittenPrivateAndReadBack) {
  std::string path = dir_ + "/sub/client.yaml";
  ASSERT_TRUE(WriteClientConfig(path, {.server = "127.0.0.1:7450", .token = "ty_abc"}).ok());
  EXPECT_EQ(Mode(path), 0600);
  EXPECT_EQ(Mode(dir_ + "/sub"), 0700);
  absl::StatusOr<ClientConfig> c = LoadClientConfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "127.0.0.1:7450");
  EXPECT_EQ(c->token, "ty_abc");
}

TEST_F(ClientConfigTest, ACaFileIsKeptAndARelativeOneIsTakenFromTheFilesDirectory) {
  std::string path = dir_ + "/sub/client.yaml";
  ASSERT_TRUE(WriteClientConfig(path, {.server = "h:1", .token = "t", .ca_file = "/etc/trainyard/ca.crt"}).ok());
  EXPECT_EQ(LoadClientConfig(path)->ca_file, "/etc/trainyard/ca.crt");
  std::ofstream(dir_ + "/rel.yaml") << "server: h:1\ncaFile: certs/ca.crt\n";
  EXPECT_EQ(LoadClientConfig(dir_ + "/rel.yaml")->ca_file, dir_ + "/certs/ca.crt");
  ASSERT_TRUE(WriteClientConfig(path, {.server = "h:1", .token = "t"}).ok());
  EXPECT_EQ(ReadWholeFile(path)->find("caFile"), std::string::npos);  // a plaintext server's config says none
}

TEST_F(ClientConfigTest, UnknownKeysAndAMissingEnvFileAreNamed) {
  std::ofstream(dir_ + "/bad.yaml") << "server: x\ntokn: y\n";
  absl::StatusOr<ClientConfig> c = LoadClientConfig(dir_ + "/bad.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("bad.yaml:2: unknown key \"tokn\""), std::string::npos) << c.status();
  setenv("TRAINYARD_CONFIG", (dir_ + "/none.yaml").c_str(), 1);
  absl::StatusOr<ClientConfig> found = FindClientConfig();
  unsetenv("TRAINYARD_CONFIG");
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("TRAINYARD_CONFIG names"), std::string::npos) << found.status();
}

// A config found in the working directory names the server a token goes
// to: one another account wrote, or others may change, is refused.
TEST_F(ClientConfigTest, AConfigAnotherAccountCouldWriteIsNotTaken) {
  std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  std::filesystem::create_directory(".trainyard");
  ASSERT_TRUE(WriteClientConfig(".trainyard/client.yaml", {.server = "127.0.0.1:7450", .token = "t"}).ok());
  absl::StatusOr<ClientConfig> own = FindClientConfig();
  EXPECT_TRUE(own.ok() && own->server == "127.0.0.1:7450") << own.status();
  chmod(".trainyard/client.yaml", 0666);
  absl::StatusOr<ClientConfig> open = FindClientConfig();
  chmod(".trainyard/client.yaml", 0600);
  bool chowned = geteuid() == 0 && chown(".trainyard/client.yaml", 65534, 65534) == 0;
  absl::StatusOr<ClientConfig> foreign = FindClientConfig();
  std::filesystem::current_path(before);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("others may change it (mode 0666)"), std::string::npos) << open.status();
  if (chowned) {
    ASSERT_FALSE(foreign.ok());
    EXPECT_NE(foreign.status().message().find("belongs to uid 65534"), std::string::npos) << foreign.status();
  }
}

Principal User(const std::string& name, bool admin = false) {
  return Principal{.user = name, .admin = admin, .anonymous = false};
}

TEST(AccessPolicyTest, TheJobIsTheCallersWhateverTheSpecSays) {
  AccessPolicy policy({}, "default");
  v1::JobSpec spec;
  ASSERT_TRUE(policy.AdmitSubmission(User("alice"), &spec).ok());
  EXPECT_EQ(spec.user(), "alice");
  spec.set_user("root-admin");
  absl::Status st = policy.AdmitSubmission(User("alice"), &spec);
  EXPECT_TRUE(absl::IsPermissionDenied(st));
  EXPECT_EQ(st.message().rfind("user: the spec says 'root-admin' but you are 'alice'", 0), 0u) << st;
  EXPECT_TRUE(policy.AdmitSubmission(User("ops", true), &spec).ok());  // an admin submits on behalf
}

TEST(AccessPolicyTest, QueueAclsAndProductionPriority) {
  api::QueueAcls acls;
  acls["prod"].submit_jobs = {"alice", "bob"};
  acls["prod"].production = {"alice"};
  acls["prod"].administer_jobs = {"carol"};
  AccessPolicy policy(acls, "prod");
  v1::JobSpec spec;
  spec.set_priority(v1::PRIORITY_PRODUCTION);
  EXPECT_TRUE(policy.AdmitSubmission(User("alice"), &spec).ok());
  spec.clear_user();
  absl::Status bob = policy.AdmitSubmission(User("bob"), &spec);
  EXPECT_TRUE(absl::IsPermissionDenied(bob));
  EXPECT_EQ(bob.message().rfind("priority: 'bob' may not submit production work to queue 'prod'", 0), 0u) << bob;
  spec.clear_user();
  spec.set_priority(v1::PRIORITY_ITERATION);
  absl::Status eve = policy.AdmitSubmission(User("eve"), &spec);
  EXPECT_EQ(eve.message().rfind("queue: 'eve' may not submit to queue 'prod'", 0), 0u) << eve;
  // The default queue's ACL: everyone submits, production for admins only.
  v1::JobSpec other;
  other.set_queue("elsewhere");
  other.set_priority(v1::PRIORITY_PRODUCTION);
  EXPECT_TRUE(absl::IsPermissionDenied(policy.AdmitSubmission(User("eve"), &other)));
  EXPECT_TRUE(policy.AdmitSubmission(User("root", true), &other).ok());
}

TEST(AccessPolicyTest, OwnersQueueAdministratorsAndAdminsActOnAJob) {
  api::QueueAcls acls;
  acls["prod"].administer_jobs = {"carol"};
  AccessPolicy policy(acls, "default");
  JobOwner job{.user = "alice", .queue = "prod"};
  EXPECT_TRUE(policy.MayActOnJob(User("alice"), "j", job, "kill").ok());
  EXPECT_TRUE(policy.MayActOnJob(User("carol"), "j", job, "kill").ok());
  EXPECT_TRUE(policy.MayActOnJob(User("root", true), "j", job, "kill").ok());
  absl::Status eve = policy.MayActOnJob(User("eve"), "j", job, "kill");
  EXPECT_TRUE(absl::IsPermissionDenied(eve));
  EXPECT_EQ(eve.message().rfind("you ('eve') may not kill job j: it belongs to 'alice'", 0), 0u) << eve;
  EXPECT_TRUE(absl::IsPermissionDenied(AccessPolicy::MayAdminister(User("eve"), "cordon nodes")));
}

using ServerSecurityTest = TempDirTest;

TEST_F(ServerSecurityTest, JobCredentialsAreTheJobsOwnAndTheSecretIsKept) {
  auto sec = ServerSecurity::Open({.data_dir = dir_});
  ASSERT_TRUE(sec.ok()) << sec.status();
  std::string cred = (*sec)->JobCredentialOf(7);
  EXPECT_TRUE((*sec)->IsJobCredential(7, cred));
  EXPECT_FALSE((*sec)->IsJobCredential(8, cred));
  EXPECT_FALSE((*sec)->IsJobCredential(7, ""));
  EXPECT_EQ(Mode(dir_ + "/job-secret"), 0600);
  auto again = ServerSecurity::Open({.data_dir = dir_});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->IsJobCredential(7, cred));  // the same after a restart
  // What a worker or the CLI computes from the secret's file is what the server checks.
  std::string secret = *LoadOrCreateSecret(dir_ + "/job-secret");
  EXPECT_EQ(cred, JobCredential(secret, 7));
  EXPECT_EQ((*sec)->JobWorkerSecretOf(7), JobWorkerSecret(secret, 7));
  EXPECT_NE((*sec)->JobWorkerSecretOf(7), cred);
}

TEST_F(ServerSecurityTest, AServiceGrantOpensAsMadeUntilItExpiresAndNotOnceChanged) {
  auto sec = ServerSecurity::Open({.data_dir = dir_});
  ASSERT_TRUE(sec.ok()) << sec.status();
  ServiceGrant g{.job = "train-1", .job_id = 42, .role = "board", .index = 3, .user = "alice.o'neil",
                 .admin = false, .expires_unix_s = 1000};
  std::string text = (*sec)->ServiceGrantText(g);
  // Fit for a URL's path as it is.
  EXPECT_EQ(text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."),
            std::string::npos) << text;
  absl::StatusOr<ServiceGrant> open = (*sec)->OpenServiceGrant(text, 999);
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->job, "train-1");
  EXPECT_EQ(open->job_id, 42u);
  EXPECT_EQ(open->role, "board");
  EXPECT_EQ(open->index, 3);
  EXPECT_EQ(open->user, "alice.o'neil");
  EXPECT_FALSE(open->admin);
  // Another server's (another secret), expired, or any byte changed: refused.
  std::string other_dir = dir_ + "/other";
  ASSERT_EQ(mkdir(other_dir.c_str(), 0700), 0);
  auto other = ServerSecurity::Open({.data_dir = other_dir});
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(absl::IsPermissionDenied((*other)->OpenServiceGrant(text, 999).status()));
  absl::Status expired = (*sec)->OpenServiceGrant(text, 1000).status();
  EXPECT_TRUE(absl::IsPermissionDenied(expired));
  EXPECT_THAT(std::string(expired.message()), ::testing::HasSubstr("expired"));
  // The same grant saying admin, with the MAC of the one made.
  std::string forged = text;
  size_t at = forged.find(".1000.0.");
  ASSERT_NE(at, std::string::npos);
  forged.replace(at, 8, ".1000.1.");
  EXPECT_TRUE(absl::IsPermissionDenied((*sec)->OpenServiceGrant(forged, 999).status()));
  std::string changed = text;
  changed[0] = changed[0] == '4' ? '5' : '4';
  EXPECT_TRUE(absl::IsPermissionDenied((*sec)->OpenServiceGrant(changed, 999).status()));
  EXPECT_TRUE(absl::IsPermissionDenied((*sec)->OpenServiceGrant("", 999).status()));
  EXPECT_TRUE(absl::IsPermissionDenied((*sec)->OpenServiceGrant("a.b", 999).status()));
}

TEST_F(ServerSecurityTest, AnAccountNamedLikeATokensUserGetsNoLoginToken) {
  auto sec = ServerSecurity::Open({.data_dir = dir_});
  ASSERT_TRUE(sec.ok()) << sec.status();
  ASSERT_TRUE((*sec)->tokens().Issue("admin", /*admin=*/true).ok());
  absl::StatusOr<std::string> admin = (*sec)->LoginTokenOf("admin", false);
  EXPECT_TRUE(absl::IsFailedPrecondition(admin.status())) << admin.status();
  absl::StatusOr<std::string> bob = (*sec)->LoginTokenOf("bob", false);
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_EQ((*sec)->Authenticate("Bearer " + *bob)->user, "bob");
  // Once the cluster issues tokens for bob, the account's login token stops.
  ASSERT_TRUE((*sec)->tokens().Issue("bob", false).ok());
  EXPECT_TRUE(absl::IsUnauthenticated((*sec)->Authenticate("Bearer " + *bob).status()));
}

// A job's user credential (userCredential: true) speaks for the job's user
// while the job lives, never as an admin, and cannot be made for another job.
TEST_F(ServerSecurityTest, AJobsUserCredentialIsItsUsersWhileTheJobLives) {
  auto sec = ServerSecurity::Open({.data_dir = dir_});
  ASSERT_TRUE(sec.ok()) << sec.status();
  std::map<uint64_t, std::string> live = {{7, "alice"}};
  (*sec)->SetLiveJobUser([&live](uint64_t id) -> std::optional<std::string> {
    auto it = live.find(id);
    if (it == live.end()) return std::nullopt;
    return it->second;
  });
  std::string token = (*sec)->JobUserTokenOf(7);
  ASSERT_EQ(token.rfind("tyu_7_", 0), 0u) << token;
  absl::StatusOr<Principal> p = (*sec)->Authenticate("Bearer " + token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->user, "alice");
  EXPECT_FALSE(p->admin);
  EXPECT_FALSE(p->anonymous);
  EXPECT_NE(token.substr(6), (*sec)->JobCredentialOf(7));  // not the master's credential
  // Another job's id under this job's MAC, a MAC changed, a malformed one.
  live[8] = "bob";
  std::string mac = token.substr(6);
  // The MAC's last digit changed (to another: it is random, and may be 0).
  std::string changed = token.substr(0, token.size() - 1) + (token.back() == '0' ? "1" : "0");
  for (const std::string& forged : {"tyu_8_" + mac, changed, std::string("tyu_7"),
                                    std::string("tyu_x_") + mac, "tyu_+7_" + mac, "tyu_07_" + mac}) {
    EXPECT_TRUE(absl::IsUnauthenticated((*sec)->Authenticate("Bearer " + forged).status())) << forged;
  }
  // The job ended.
  live.erase(7);
  absl::StatusOr<Principal> ended = (*sec)->Authenticate("Bearer " + token);
  EXPECT_TRUE(absl::IsUnauthenticated(ended.status()));
  EXPECT_THAT(std::string(ended.status().message()), ::testing::HasSubstr("ended with the job"));
}

TEST_F(ServerSecurityTest, TheFirstStartMakesAnAdminClientConfigOnce) {
  auto sec = ServerSecurity::Open({.data_dir = dir_});
  ASSERT_TRUE(sec.ok());
  absl::StatusOr<std::string> path = (*sec)->BootstrapAdmin("127.0.0.1:7450");
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<ClientConfig> c = LoadClientConfig(*path);
  ASSERT_TRUE(c.ok());
  absl::StatusOr<Principal> who = (*sec)->Authenticate("Bearer " + c->token);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_TRUE(who->admin);
  EXPECT_EQ(*(*sec)->BootstrapAdmin("127.0.0.1:7450"), "");
}

}  // namespace
// RFC 4231's test cases 1 (a short key) and 6 (a key longer than a block).
TEST(HmacTest, AKeyedMacIsTheOneShotMacAndTheRfcsVectors) {
  const std::string short_key(20, '\x0b');
  const std::string long_key(131, '\xaa');
  const std::string long_data = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(HmacSha256Hex(short_key, "Hi There"), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HmacSha256Key(short_key).Hex("Hi There"), HmacSha256Hex(short_key, "Hi There"));
  EXPECT_EQ(HmacSha256Key(long_key).Hex(long_data), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  HmacSha256Key key("job secret");
  for (const std::string& data : std::vector<std::string>{"", "trainyard job 7", std::string(200, 'x')}) {
    EXPECT_EQ(key.Hex(data), HmacSha256Hex("job secret", data)) << data;
    EXPECT_EQ(key.Hex(data), key.Hex(data)) << "the key's states are unchanged by a MAC";
  }
}

TEST(SealTest, ASealedValueOpensOnlyUnderItsKeyAndUnchanged) {
  absl::StatusOr<std::string> sealed = Seal("key one", "s3cret value");
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_TRUE(IsSealed(*sealed));
  EXPECT_EQ(sealed->find("s3cret"), std::string::npos);
  EXPECT_NE(*Seal("key one", "s3cret value"), *sealed) << "a fresh nonce each time";
  absl::StatusOr<std::string> opened = Open("key one", *sealed);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, "s3cret value");
  EXPECT_EQ(*Open("key one", *Seal("key one", "")), "");
  EXPECT_FALSE(Open("key two", *sealed).ok());
  std::string changed = *sealed;
  changed[changed.size() / 2] = changed[changed.size() / 2] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(Open("key one", changed).ok());
  EXPECT_FALSE(Open("key one", "plain text").ok());
  EXPECT_FALSE(Open("key one", "sealed:v1:!!!").ok());
  EXPECT_FALSE(Open("key one", "sealed:v1:").ok());
}

TEST(LoginTokenTest, ALoginTokenSpeaksForItsAccountOnlyUnderItsSecret) {
  std::string token = LoginToken("secret", "ann_b", /*admin=*/false);
  absl::StatusOr<Principal> p = AuthenticateLoginToken("secret", token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->user, "ann_b");
  EXPECT_FALSE(p->admin);
  EXPECT_FALSE(p->anonymous);
  EXPECT_TRUE(AuthenticateLoginToken("secret", LoginToken("secret", "root", true))->admin);
  EXPECT_FALSE(AuthenticateLoginToken("other secret", token).ok());
  std::string promoted = token;
  promoted[4] = 'a';  // the kind: u -> a
  EXPECT_FALSE(AuthenticateLoginToken("secret", promoted).ok());
  std::string renamed = "tyl_u_bob" + token.substr(std::string("tyl_u_ann_b").size());
  EXPECT_FALSE(AuthenticateLoginToken("secret", renamed).ok());
  EXPECT_FALSE(AuthenticateLoginToken("secret", "tyl_u__" + std::string(64, '0')).ok());
  EXPECT_FALSE(AuthenticateLoginToken("secret", "tyl_").ok());
}

}  // namespace trainyard::security
