// A deposed leader's note, against a real etcd member: the file it leaves,
// the count it puts in etcd when it starts again, and what the leader reads.
#include "server/depositions.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/time/clock.h"
#include "store/etcd_client.h"
#include "tests/etcd/etcd_test_cluster.h"

namespace trainyard::server {
namespace {

// A data dir of the test's own, removed at its end.
struct TempDir {
  std::string path;
  TempDir() : path(::testing::TempDir() + "deposedXXXXXX") { EXPECT_NE(mkdtemp(path.data()), nullptr); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(DepositionsTest, ANotedDepositionIsCountedInEtcdAtTheNextStartAndReadByReason) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(etcd.connect_options());
  ASSERT_TRUE(client.ok()) << client.status();
  TempDir temp;
  const std::string& dir = temp.path;

  // Nothing noted: nothing to report, nothing counted.
  ASSERT_TRUE(ReportDeposition(client->get(), "/t/", dir).ok());
  absl::StatusOr<std::vector<DepositionCount>> read = ReadDepositions(client->get(), "/t/");
  ASSERT_TRUE(read.ok()) << read.status();
  std::vector<std::string> reasons;
  for (const DepositionCount& d : *read) {
    reasons.push_back(d.reason);
    EXPECT_EQ(d.count, 0) << d.reason;
  }
  EXPECT_EQ(reasons, (std::vector<std::string>{"fenced", "write_unknown", "lease_lost", "paused"}));

  // The note is the server's alone, one line per field even for a reason
  // that spans lines.
  int64_t before = absl::ToUnixMillis(absl::Now());
  NoteDeposition(dir, Deposition::kFenced, "10.0.0.1:7450", "a write was refused\nby the fence");
  struct stat st {};
  ASSERT_EQ(stat((dir + "/deposed").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  ASSERT_TRUE(ReportDeposition(client->get(), "/t/", dir).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/deposed")) << "a counted note stays to be counted again";
  NoteDeposition(dir, Deposition::kPaused, "10.0.0.2:7450", "its lease may have ended");
  ASSERT_TRUE(ReportDeposition(client->get(), "/t/", dir).ok());
  NoteDeposition(dir, Deposition::kFenced, "10.0.0.3:7450", "refused again");
  ASSERT_TRUE(ReportDeposition(client->get(), "/t/", dir).ok());

  read = ReadDepositions(client->get(), "/t/");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 4u);
  const DepositionCount& fenced = (*read)[0];
  EXPECT_EQ(fenced.reason, "fenced");
  EXPECT_EQ(fenced.count, 2);
  EXPECT_EQ(fenced.last_server, "10.0.0.3:7450");
  EXPECT_EQ(fenced.last_why, "refused again");
  EXPECT_GE(fenced.last_unix_ms, before);
  EXPECT_EQ((*read)[1].count, 0);
  EXPECT_EQ((*read)[2].count, 0);
  EXPECT_EQ((*read)[3].reason, "paused");
  EXPECT_EQ((*read)[3].count, 1);
  EXPECT_EQ((*read)[3].last_server, "10.0.0.2:7450");
  // Another cluster's prefix counts nothing of these.
  absl::StatusOr<std::vector<DepositionCount>> other = ReadDepositions(client->get(), "/other/");
  ASSERT_TRUE(other.ok());
  for (const DepositionCount& d : *other) EXPECT_EQ(d.count, 0) << d.reason;
}

TEST(DepositionsTest, NotesEtcdDoesNotTakeAreKeptUntilItDoesAndAStrangeFileIsDropped) {
  TempDir temp;
  const std::string& dir = temp.path;
  EtcdConnectOptions nowhere;
  nowhere.endpoints = {"127.0.0.1:1"};
  nowhere.call_timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(nowhere);
  ASSERT_TRUE(client.ok()) << client.status();
  NoteDeposition(dir, Deposition::kLeaseLost, "10.0.0.1:7450", "no renewal within the TTL");
  absl::Status st = ReportDeposition(client->get(), "/t/", dir);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("1 deposition(s) noted in " + dir + "/deposed are not in etcd yet"),
            std::string::npos)
      << st;
  // A second deposition before etcd answers does not replace the first.
  NoteDeposition(dir, Deposition::kWriteUnknown, "10.0.0.1:7450", "etcd did not answer");
  st = ReportDeposition(client->get(), "/t/", dir);
  EXPECT_NE(st.message().find("2 deposition(s)"), std::string::npos) << st;

  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> reachable = EtcdClient::Connect(etcd.connect_options());
  ASSERT_TRUE(reachable.ok()) << reachable.status();
  ASSERT_TRUE(ReportDeposition(reachable->get(), "/t/", dir).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/deposed"));
  absl::StatusOr<std::vector<DepositionCount>> read = ReadDepositions(reachable->get(), "/t/");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[1].reason, "write_unknown");
  EXPECT_EQ((*read)[1].count, 1);
  EXPECT_EQ((*read)[2].reason, "lease_lost");
  EXPECT_EQ((*read)[2].count, 1);

  // A file that is not a note (and a link) is dropped, not put in etcd.
  std::ofstream(dir + "/deposed") << "not a note\n";
  EXPECT_TRUE(ReportDeposition(reachable->get(), "/t/", dir).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/deposed"));
  std::filesystem::create_symlink("/etc/passwd", dir + "/deposed");
  EXPECT_TRUE(ReportDeposition(reachable->get(), "/t/", dir).ok());
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir + "/deposed")));
  read = ReadDepositions(reachable->get(), "/t/");
  ASSERT_TRUE(read.ok());
  int64_t all = 0;
  for (const DepositionCount& d : *read) all += d.count;
  EXPECT_EQ(all, 2);
}

}  // namespace
}  // namespace trainyard::server
