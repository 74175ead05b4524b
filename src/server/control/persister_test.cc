// Persister alone: one write at a time, a failed write's records marked
// again, and its raw writes (purges, metadata) handed back for their owners
// to ask again.
#include "server/control/persister.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class PersisterTest : public ::testing::Test {
 protected:
  std::optional<Persister::Write> Take() {
    return p_.Take([](const std::string& name, WriteBatch* b) {
                     v1::JobRecord rec;
                     rec.set_name(name);
                     b->UpdateJob(rec);
                   },
                   [](const std::string& name, WriteBatch* b) { b->DeleteNode(name); });
  }
  Persister p_;
};

TEST_F(PersisterTest, OneWriteAtATimeAndAFailedOnesRecordsAreMarkedAgain) {
  EXPECT_FALSE(Take().has_value());  // nothing waits
  p_.MarkJob("a");
  std::optional<Persister::Write> w = Take();
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->seq, 1u);
  EXPECT_THAT(w->jobs, ElementsAre("a"));
  p_.MarkJob("b");
  EXPECT_FALSE(Take().has_value());  // one in flight
  EXPECT_TRUE(p_.in_flight());
  Persister::RawWrites raw = p_.Done(w->seq, w->jobs, w->nodes, absl::UnavailableError("etcd"), false);
  EXPECT_THAT(raw.purges, IsEmpty());
  std::optional<Persister::Write> again = Take();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->seq, 2u);
  EXPECT_THAT(again->jobs, ElementsAre("a", "b"));
}

TEST_F(PersisterTest, AFailedWriteHandsBackItsPurgesAndMetadataKeysASucceededOneNone) {
  p_.batch().PurgeJob(7);
  p_.batch().PutMeta("next_job_id_floor", "9");
  p_.MarkJob("a");
  std::optional<Persister::Write> w = Take();
  ASSERT_TRUE(w.has_value());
  Persister::RawWrites raw = p_.Done(w->seq, w->jobs, w->nodes, absl::UnavailableError("etcd"), /*stopping=*/true);
  EXPECT_THAT(raw.purges, ElementsAre(7u));
  EXPECT_THAT(raw.meta_keys, ElementsAre("next_job_id_floor"));
  EXPECT_FALSE(p_.pending()) << "a write failed while stopping is not marked again";

  p_.batch().PurgeJob(8);
  w = Take();
  ASSERT_TRUE(w.has_value());
  raw = p_.Done(w->seq, w->jobs, w->nodes, absl::OkStatus(), false);
  EXPECT_THAT(raw.purges, IsEmpty());
  EXPECT_THAT(raw.meta_keys, IsEmpty());
}

}  // namespace
}  // namespace trainyard::server
