// GPU health: Xid lines as the driver writes them, the table's actions, and
// a follower of a growing file of such lines (the simulated GPUs' event
// file, a recorded stream).
#include "agent/gpu_health.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;

TEST(ParseXidLineTest, ReadsTheDriversLineInItsForms) {
  // As dmesg prints it.
  std::optional<XidEvent> e =
      ParseXidLine("[1234.5678] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->pci, "0000:3b:00");
  EXPECT_EQ(e->xid, 79);
  EXPECT_EQ(e->text, "Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.");
  // As /dev/kmsg gives a record, and as syslog keeps it.
  e = ParseXidLine("4,1702,123456789,-;NVRM: Xid (PCI:0000:0A:00): 48, pid=1234, name=python, DBE (0x1)");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->pci, "0000:0a:00");
  EXPECT_EQ(e->xid, 48);
  e = ParseXidLine("Dec  6 05:00:01 host kernel: NVRM: Xid (PCI:0001:c1:00.0): 63, Row Remapper: New row marked");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->pci, "0001:c1:00");
  EXPECT_EQ(e->xid, 63);
  // Not Xid lines, or not well formed ones.
  EXPECT_FALSE(ParseXidLine("NVRM: loading NVIDIA UNIX x86_64 Kernel Module").has_value());
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:0000:3b:00): , pid=1").has_value());
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:zz:3b:00): 79, x").has_value());
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:0000:3b:00 79").has_value());
  EXPECT_FALSE(ParseXidLine("").has_value());
}

TEST(PciKeyTest, TheKernelsAndNvmlsFormsAreOneKey) {
  EXPECT_EQ(PciKey("PCI:0000:3b:00"), "0000:3b:00");
  EXPECT_EQ(PciKey("00000000:3B:00.0"), "0000:3b:00");
  EXPECT_EQ(PciKey("3b:00.0"), "0000:3b:00");
  EXPECT_EQ(PciKey("3b"), "");
  EXPECT_EQ(PciKey("1:0000:3b:00"), "");
  EXPECT_EQ(PciKey("0000:3b:100"), "");
  EXPECT_EQ(PciKey("not:an:address"), "");
}

TEST(RuleOfXidTest, HardwareFaultsExcludeOrDrainAndTheApplicationsOwnAreLeft) {
  EXPECT_EQ(RuleOfXid(13).action, v1::GPU_FAULT_IGNORE);   // graphics engine exception
  EXPECT_EQ(RuleOfXid(31).action, v1::GPU_FAULT_IGNORE);   // the program's own page fault
  EXPECT_EQ(RuleOfXid(48).action, v1::GPU_FAULT_EXCLUDE_GPU);
  EXPECT_EQ(RuleOfXid(95).action, v1::GPU_FAULT_EXCLUDE_GPU);
  EXPECT_EQ(RuleOfXid(79).action, v1::GPU_FAULT_DRAIN_NODE);
  EXPECT_EQ(RuleOfXid(12345).action, v1::GPU_FAULT_IGNORE);
  EXPECT_STREQ(RuleOfXid(12345).what, "not in the table");
}

class GpuHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpu-health-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/gpu-events";
    Append("NVRM: Xid (PCI:0000:01:00): 48, written before the agent started\n");
    for (int i = 0; i < 4; ++i) {
      gpus_.push_back({.index = i, .pci_bus_id = absl::StrFormat("%08X:%02X:00.0", 0, i + 1)});
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Append(const std::string& text) {
    std::ofstream out(path_, std::ios::app);
    out << text;
  }

  std::string dir_, path_;
  std::vector<GpuInfo> gpus_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(GpuHealthTest, FollowsTheFileFromItsEndAndKeepsTheWorstFaultPerGpu) {
  absl::StatusOr<std::unique_ptr<GpuHealth>> h = GpuHealth::Open(path_, gpus_);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_FALSE((*h)->Poll(now_)) << "what was there before is not read again";
  EXPECT_TRUE((*h)->Faults().empty());

  // The application's own error, another machine's GPU, and a half line.
  Append("NVRM: Xid (PCI:0000:02:00): 13, Graphics Exception\n");
  Append("NVRM: Xid (PCI:0000:42:00): 48, DBE\n");
  Append("NVRM: Xid (PCI:0000:03:00): 9");
  EXPECT_FALSE((*h)->Poll(now_));
  EXPECT_TRUE((*h)->Faults().empty());

  Append("5, Uncontained ECC error\n");  // the half line ends: GPU 2 (bus 03)
  EXPECT_TRUE((*h)->Poll(now_));
  std::vector<v1::GpuFault> f = (*h)->Faults();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].gpu(), 2);
  EXPECT_EQ(f[0].xid(), 95);
  EXPECT_EQ(f[0].action(), v1::GPU_FAULT_EXCLUDE_GPU);
  EXPECT_THAT(f[0].message(), HasSubstr("uncontained ECC error"));
  EXPECT_EQ(f[0].time_unix_ms(), absl::ToUnixMillis(now_));

  // A worse fault of the same GPU replaces it; a milder one does not.
  Append("NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n");
  EXPECT_TRUE((*h)->Poll(now_));
  Append("NVRM: Xid (PCI:0000:03:00): 48, DBE\n");
  EXPECT_FALSE((*h)->Poll(now_));
  // Another GPU's fault comes beside it, in GPU order.
  Append("NVRM: Xid (PCI:0000:01:00): 74, NVLink\n");
  EXPECT_TRUE((*h)->Poll(now_));
  f = (*h)->Faults();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].gpu(), 0);
  EXPECT_EQ(f[0].xid(), 74);
  EXPECT_EQ(f[1].gpu(), 2);
  EXPECT_EQ(f[1].xid(), 79);
  EXPECT_EQ(f[1].action(), v1::GPU_FAULT_DRAIN_NODE);

  // Truncated (rotated): read again from its start.
  { std::ofstream trunc(path_, std::ios::trunc); }
  Append("NVRM: Xid (PCI:0000:04:00): 64, row remapping failure\n");
  EXPECT_TRUE((*h)->Poll(now_));
  EXPECT_EQ((*h)->Faults().size(), 3u);

  // Rotated (renamed away, a new file at the path): the new one is read
  // from its start. Bytes that are not printable ASCII arrive as '?'.
  std::filesystem::rename(path_, path_ + ".1");
  Append("NVRM: Xid (PCI:0000:02:00): 48, DBE \xff\x01 name=\xc3\n");
  EXPECT_TRUE((*h)->Poll(now_));
  f = (*h)->Faults();
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[1].gpu(), 1);
  EXPECT_THAT(f[1].message(), HasSubstr("DBE ?? name=?"));
}

// A character device is read as the kernel's log, one record per read
// ("PRI,SEQ,TIME,FLAGS;MESSAGE"): a terminal in canonical mode gives one
// line per read as /dev/kmsg gives one record, without writing to the
// host's own kernel log.
TEST_F(GpuHealthTest, ACharacterDeviceIsReadRecordByRecordAsTheKernelsLog) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  std::string slave = ptsname(master);
  absl::StatusOr<std::unique_ptr<GpuHealth>> h = GpuHealth::Open(slave, gpus_);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_FALSE((*h)->Poll(now_)) << "nothing written yet: the read does not block";
  std::string records =
      "6,1701,4242000,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n"
      "4,1702,4242001,-;NVRM: Xid (PCI:0000:02:00): 79, pid=1, GPU has fallen off the bus.\n";
  ASSERT_EQ(write(master, records.data(), records.size()), static_cast<ssize_t>(records.size()));
  bool changed = false;
  for (int i = 0; i < 200 && !changed; ++i) {  // the terminal hands the lines on at once, mostly
    changed = (*h)->Poll(now_);
    if (!changed) usleep(10'000);
  }
  ASSERT_TRUE(changed);
  std::vector<v1::GpuFault> f = (*h)->Faults();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].gpu(), 1);
  EXPECT_EQ(f[0].action(), v1::GPU_FAULT_DRAIN_NODE);
  EXPECT_THAT(f[0].message(), HasSubstr("Xid (PCI:0000:02:00): 79")) << "the record's prefix is not kept";
  EXPECT_THAT(f[0].message(), ::testing::Not(HasSubstr("4,1702")));
  h->reset();
  close(master);
}

// The watch tells of a fault as soon as it is written, not at the next
// look: its fallback here is an hour, so only the source's own wake-up
// (inotify on the file; a terminal standing in for /dev/kmsg) can bring it.
// Lines that change nothing (another node's GPU) are read and not told.
TEST_F(GpuHealthTest, TheWatchTellsOfANewFaultAsItIsWritten) {
  if (int probe = inotify_init1(IN_CLOEXEC); probe >= 0) {
    close(probe);
  } else {
    GTEST_SKIP() << "no inotify here: the watch falls back to its timeout";
  }
  RealClock clock;
  absl::StatusOr<std::unique_ptr<GpuHealth>> h = GpuHealth::Open(path_, gpus_);
  ASSERT_TRUE(h.ok()) << h.status();
  std::atomic<int> told{0};
  {
    GpuHealthWatch watch(h->get(), &clock, [&] { ++told; }, absl::Hours(1));
    Append("NVRM: Xid (PCI:0000:42:00): 48, another node's GPU\n");
    Append("NVRM: Xid (PCI:0000:03:00): 48, DBE\n");
    EXPECT_TRUE(WaitUntil([&] { return told.load() == 1; }, absl::Seconds(30)));
    std::vector<v1::GpuFault> f = (*h)->Faults();
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].gpu(), 2);
    // The same fault again is no news.
    Append("NVRM: Xid (PCI:0000:03:00): 48, DBE again\n");
    EXPECT_TRUE(WaitUntil([&] { return !(*h)->Poll(now_) && (*h)->Faults()[0].message().find("again") !=
                                                                  std::string::npos; },
                          absl::Seconds(30)));
    // Rotated (renamed away, a new file at the path): once a look has
    // found the new file, its writes wake the watch too.
    std::filesystem::rename(path_, path_ + ".1");
    Append("");
    (*h)->Poll(now_);
    Append("NVRM: Xid (PCI:0000:04:00): 48, DBE\n");
    EXPECT_TRUE(WaitUntil([&] { return told.load() == 2; }, absl::Seconds(30)));
  }  // stops at once, its fallback an hour away
  EXPECT_EQ(told.load(), 2);

  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  absl::StatusOr<std::unique_ptr<GpuHealth>> kmsg = GpuHealth::Open(ptsname(master), gpus_);
  ASSERT_TRUE(kmsg.ok()) << kmsg.status();
  {
    GpuHealthWatch watch(kmsg->get(), &clock, [&] { ++told; }, absl::Hours(1));
    std::string record = "4,1702,4242001,-;NVRM: Xid (PCI:0000:04:00): 79, pid=1, GPU has fallen off the bus.\n";
    ASSERT_EQ(write(master, record.data(), record.size()), static_cast<ssize_t>(record.size()));
    EXPECT_TRUE(WaitUntil([&] { return told.load() == 3; }, absl::Seconds(30)));
    ASSERT_EQ((*kmsg)->Faults().size(), 1u);
    EXPECT_EQ((*kmsg)->Faults()[0].action(), v1::GPU_FAULT_DRAIN_NODE);
  }
  kmsg->reset();
  close(master);
}

TEST_F(GpuHealthTest, APathThatCannotBeReadIsNamed) {
  absl::StatusOr<std::unique_ptr<GpuHealth>> h = GpuHealth::Open(dir_ + "/missing", gpus_);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("--gpu-events " + dir_ + "/missing"));
  h = GpuHealth::Open(dir_, gpus_);  // a directory
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("neither"));
}

}  // namespace
}  // namespace trainyard::agent
