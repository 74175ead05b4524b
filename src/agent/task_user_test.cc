// The task user map's parser and the resolution of cluster users to local
// accounts, against a fixed list of accounts.
#include "agent/task_user.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "agent/test_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;

class FixedAccounts : public AccountDirectory {
 public:
  std::optional<TaskAccount> ByName(const std::string& name) const override {
    for (const TaskAccount& a : accounts_) {
      if (a.name == name) return a;
    }
    return std::nullopt;
  }
  std::optional<TaskAccount> ByUid(uid_t uid) const override {
    for (const TaskAccount& a : accounts_) {
      if (a.uid == uid) return a;
    }
    return std::nullopt;
  }

 private:
  std::vector<TaskAccount> accounts_ = {
      {.name = "root", .uid = 0, .gid = 0, .home = "/root"},
      {.name = "alice", .uid = 1001, .gid = 1001, .groups = {1001, 27}, .home = "/home/alice"},
      {.name = "nobody", .uid = 65534, .gid = 65534, .groups = {65534}, .home = "/nonexistent"},
      {.name = "postgres", .uid = 106, .gid = 114, .home = "/var/lib/postgresql"},
      {.name = "admin", .uid = 1002, .gid = 1002, .groups = {1002, 0}, .home = "/home/admin"},
  };
};

TEST(TaskUserMapTest, ParsesUsersEveryoneCommentsAndQuotes) {
  absl::StatusOr<TaskUserMap> map = TaskUserMap::Parse(
      "# who runs as whom\n"
      "alice: alice\n"
      "\"bob smith\": nobody   # a quoted name\n"
      "\n"
      "carol: 65533\n"
      "\"*\": nobody\n",
      "users.map");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->LocalAccountFor("alice"), "alice");
  EXPECT_EQ(map->LocalAccountFor("bob smith"), "nobody");
  EXPECT_EQ(map->LocalAccountFor("carol"), "65533");
  EXPECT_EQ(map->LocalAccountFor("dave"), "nobody");
}

TEST(TaskUserMapTest, WithoutEveryoneAUserIsTheirOwnAccount) {
  absl::StatusOr<TaskUserMap> map = TaskUserMap::Parse("alice: nobody\n", "users.map");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->LocalAccountFor("dave"), "dave");
  EXPECT_EQ(TaskUserMap().LocalAccountFor("erin"), "erin");
}

TEST(TaskUserMapTest, ErrorsNameTheFileTheLineAndTheReason) {
  EXPECT_THAT(TaskUserMap::Parse("alice: a\nbob nobody\n", "m").status().message(),
              HasSubstr("m line 2: 'bob nobody' is not `cluster-user: local-account`"));
  EXPECT_THAT(TaskUserMap::Parse(": nobody\n", "m").status().message(),
              HasSubstr("m line 1: the cluster user is empty"));
  EXPECT_THAT(TaskUserMap::Parse("alice:\n", "m").status().message(),
              HasSubstr("m line 1: the local account of 'alice' is empty"));
  EXPECT_THAT(TaskUserMap::Parse("alice: a\nalice: b\n", "m").status().message(),
              HasSubstr("m line 2: 'alice' is mapped twice"));
  EXPECT_THAT(TaskUserMap::Parse("'*': a\n\"*\": b\n", "m").status().message(),
              HasSubstr("m line 2: '*' is mapped twice"));
  EXPECT_THAT(TaskUserMap::Load("/nonexistent/users.map").status().message(),
              HasSubstr("--task-user-map /nonexistent/users.map: cannot be read"));
}

TaskUsers Switching(const std::string& map_text, bool allow_root, const AccountDirectory* accounts) {
  return TaskUsers({.map = *TaskUserMap::Parse(map_text, "m"),
                    .allow_root = allow_root,
                    .switch_users = true,
                    .accounts = accounts});
}

TEST(TaskUsersTest, ResolvesNamesAndBareUids) {
  FixedAccounts accounts;
  TaskUsers users = Switching("bob: nobody\ncarol: 65533\nnum: 1001\n", false, &accounts);
  absl::StatusOr<TaskAccount> alice = users.Resolve("alice");  // her own name
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->uid, 1001u);
  EXPECT_EQ(alice->groups, (std::vector<uint32_t>{1001, 27}));
  EXPECT_EQ(users.Resolve("bob")->uid, 65534u);
  // A uid with no account: its own number as group, no other groups, no home.
  absl::StatusOr<TaskAccount> carol = users.Resolve("carol");
  ASSERT_TRUE(carol.ok()) << carol.status();
  EXPECT_EQ(carol->uid, 65533u);
  EXPECT_EQ(carol->gid, 65533u);
  EXPECT_TRUE(carol->groups.empty());
  EXPECT_TRUE(users.WorkdirRoots(*carol).empty());
  EXPECT_EQ(users.Resolve("num")->name, "alice");  // a uid with an account is that account
}

TEST(TaskUsersTest, AnUnknownUserFailsNamingIt) {
  FixedAccounts accounts;
  TaskUsers users = Switching("", false, &accounts);
  EXPECT_THAT(users.Resolve("mallory").status().message(),
              HasSubstr("user 'mallory': no local account 'mallory' on this node"));
  EXPECT_THAT(users.Resolve("mallory").status().message(),
              HasSubstr("map the user to one with a line `mallory: ACCOUNT` in the agent's --task-user-map"));
  EXPECT_TRUE(absl::IsInvalidArgument(users.Resolve("mallory").status()));
}

TEST(TaskUsersTest, RootOnlyWhenAllowed) {
  FixedAccounts accounts;
  for (const char* map : {"\"*\": root\n", "\"*\": 0\n", ""}) {
    TaskUsers refused = Switching(map, false, &accounts);
    EXPECT_THAT(refused.Resolve("root").status().message(), HasSubstr("--allow-root-tasks")) << map;
    TaskUsers allowed = Switching(map, true, &accounts);
    ASSERT_TRUE(allowed.Resolve("root").ok()) << map;
    EXPECT_EQ(allowed.Resolve("root")->uid, 0u);
  }
}

// What a cluster user cannot get by its name alone: a service account, a
// uid it spells as its name, an account in the root group.
TEST(TaskUsersTest, SystemAccountsAndBareUidsOnlyWhenTheMapNamesThem) {
  FixedAccounts accounts;
  TaskUsers by_name = Switching("", false, &accounts);
  EXPECT_THAT(by_name.Resolve("postgres").status().message(),
              HasSubstr("local account 'postgres' is a system account (uid 106 < 1000)"));
  EXPECT_THAT(by_name.Resolve("1001").status().message(), HasSubstr("no local account '1001'"));
  EXPECT_THAT(by_name.Resolve("admin").status().message(), HasSubstr("uid 0 or group 0"));
  TaskUsers mapped = Switching("db: postgres\nnum: 1001\n", false, &accounts);
  EXPECT_EQ(mapped.Resolve("db")->uid, 106u) << "the admin's map may name any account";
  EXPECT_EQ(mapped.Resolve("num")->uid, 1001u);
}

TEST(TaskUsersTest, WorkdirRootsAreTheHomeUnlessGiven) {
  FixedAccounts accounts;
  TaskUsers by_home = Switching("", false, &accounts);
  EXPECT_EQ(by_home.WorkdirRoots(*accounts.ByName("alice")), (std::vector<std::string>{"/home/alice"}));
  EXPECT_TRUE(by_home.WorkdirRoots({.uid = 5, .home = "/"}).empty());  // "/" would allow everything
  TaskUsers given({.workdir_roots = {"/data", "/scratch"}, .switch_users = true, .accounts = &accounts});
  EXPECT_EQ(given.WorkdirRoots(*accounts.ByName("alice")), (std::vector<std::string>{"/data", "/scratch"}));
}

TEST(TaskUsersTest, WithoutSwitchingTasksRunAsTheAgent) {
  FixedAccounts accounts;
  TaskUsers users({.switch_users = false, .accounts = &accounts});
  EXPECT_FALSE(users.switching());
  absl::StatusOr<TaskAccount> account = users.Resolve("anyone");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account->uid, geteuid());
}

// What the agent reads or mounts as root for a task: only what the task's
// account could reach by the mode bits.
TEST(CheckReadableByTest, APathIsReadableWhenEveryDirAboveLetsTheAccountSearch) {
  if (geteuid() != 0) GTEST_SKIP() << "files of another owner need root";
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  std::string open = dir.path() + "/open", closed = dir.path() + "/closed", group = dir.path() + "/group";
  for (const std::string& d : {open, closed, group}) ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
  std::ofstream(open + "/f") << "x";
  std::ofstream(closed + "/f") << "x";
  std::ofstream(group + "/f") << "x";
  chmod((open + "/f").c_str(), 0644);
  chmod((closed + "/f").c_str(), 0644);
  chmod(closed.c_str(), 0700);
  ASSERT_EQ(chown(group.c_str(), 0, 4321), 0);
  chmod(group.c_str(), 0750);
  chmod((group + "/f").c_str(), 0640);
  ASSERT_EQ(chown((group + "/f").c_str(), 0, 4321), 0);
  TaskAccount nobody{.name = "nobody", .uid = 65534, .gid = 65534};
  EXPECT_EQ(CheckReadableBy(open + "/f", nobody).value_or(""), open + "/f");
  EXPECT_TRUE(CheckReadableBy(open, nobody).ok());
  absl::Status st = CheckReadableBy(closed + "/f", nobody).status();
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_EQ(st.message(), "nobody may not search " + closed);
  EXPECT_EQ(CheckReadableBy(closed, nobody).status().message(), "nobody may not read " + closed);
  EXPECT_FALSE(CheckReadableBy(group + "/f", nobody).ok());
  TaskAccount member{.uid = 5000, .gid = 5000, .groups = {4321}};
  EXPECT_TRUE(CheckReadableBy(group + "/f", member).ok()) << "through a supplementary group";
  // A link is judged where it leads.
  ASSERT_EQ(symlink((closed + "/f").c_str(), (open + "/link").c_str()), 0);
  EXPECT_EQ(CheckReadableBy(open + "/link", nobody).status().message(), "nobody may not search " + closed);
  EXPECT_TRUE(absl::IsNotFound(CheckReadableBy(open + "/none", nobody).status()));
  EXPECT_TRUE(CheckReadableBy(closed + "/f", TaskAccount{.uid = 0}).ok());
}

// What the account could rename and re-point after the check is refused:
// a path under a directory it may write, but for a sticky one's entry of
// another owner (as /tmp/DIR of root).
TEST(CheckReadableByTest, APathUnderADirectoryTheAccountMayChangeIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "files of another owner need root";
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  TaskAccount nobody{.name = "nobody", .uid = 65534, .gid = 65534};
  std::string mine = dir.path() + "/mine", shared = dir.path() + "/shared";
  ASSERT_EQ(mkdir(mine.c_str(), 0755), 0);
  ASSERT_EQ(chown(mine.c_str(), 65534, 65534), 0);
  ASSERT_EQ(mkdir((mine + "/data").c_str(), 0755), 0);
  EXPECT_EQ(CheckReadableBy(mine + "/data", nobody).status().message(),
            "an account other than root may change " + mine +
                ": what the node mounts or reads as root for nobody must lie under directories only root can change");
  EXPECT_TRUE(CheckReadableBy(mine, nobody).ok()) << "its own directory under one it cannot change";
  ASSERT_EQ(mkdir(shared.c_str(), 01777), 0);
  chmod(shared.c_str(), 01777);
  ASSERT_EQ(mkdir((shared + "/roots").c_str(), 0755), 0);
  EXPECT_TRUE(CheckReadableBy(shared + "/roots", nobody).ok()) << "a sticky dir guards root's entry";
  ASSERT_EQ(mkdir((shared + "/nobodys").c_str(), 0755), 0);
  ASSERT_EQ(chown((shared + "/nobodys").c_str(), 65534, 65534), 0);
  ASSERT_EQ(mkdir((shared + "/nobodys/x").c_str(), 0755), 0);
  EXPECT_FALSE(CheckReadableBy(shared + "/nobodys/x", nobody).ok()) << "but not the account's own entry";
  ASSERT_EQ(mkdir((shared + "/others").c_str(), 0755), 0);
  ASSERT_EQ(chown((shared + "/others").c_str(), 4444, 4444), 0);
  ASSERT_EQ(mkdir((shared + "/others/x").c_str(), 0755), 0);
  EXPECT_FALSE(CheckReadableBy(shared + "/others/x", nobody).ok()) << "nor another account's";
  std::string group = dir.path() + "/group-writable";
  ASSERT_EQ(mkdir(group.c_str(), 0775), 0);
  chmod(group.c_str(), 0775);
  ASSERT_EQ(mkdir((group + "/x").c_str(), 0755), 0);
  EXPECT_FALSE(CheckReadableBy(group + "/x", nobody).ok()) << "nor under a directory its group may write";
  std::string odd = dir.path() + "/\xff";
  ASSERT_EQ(mkdir(odd.c_str(), 0755), 0);
  EXPECT_THAT(CheckReadableBy(odd, nobody).status().message(), HasSubstr("not UTF-8"));
}

}  // namespace
}  // namespace trainyard::agent
