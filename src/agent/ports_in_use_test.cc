// Ports in use from recorded /proc/net files (testdata/proc, in the kernel's
// format: hex "ADDR:PORT" local addresses, a header line) and from this
// machine's live tables.
#include "agent/ports_in_use.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TestDataPath;

TEST(PortsInUseTest, ReadsRecordedTcpUdpAndV6Tables) {
  absl::StatusOr<core::PortRanges> ports = ReadPortsInUse(TestDataPath("proc"));
  ASSERT_TRUE(ports.ok()) << ports.status();
  // tcp: LISTEN 2024, 8080; TIME_WAIT 36996; ESTABLISHED 37012. tcp6: 22,
  // 27706. udp: 68, 53. udp6: 5353.
  EXPECT_EQ(ports->ToString(), "22,53,68,2024,5353,8080,27706,36996,37012");
}

TEST(PortsInUseTest, ParsesOneTableAndSkipsUnboundSockets) {
  std::string text =
      "  sl  local_address rem_address   st tx_queue rx_queue\n"
      "   0: 00000000:1F90 00000000:0000 0A 00000000:00000000\n"
      "   1: 00000000:0000 00000000:0000 07 00000000:00000000\n";
  EXPECT_THAT(ParseProcNetPorts(text).value(), ElementsAre(8080u));
}

TEST(PortsInUseTest, MalformedLineIsNamed) {
  std::string text = "header\n   0: 00000000:ZZZZ 00000000:0000 0A\n";
  EXPECT_THAT(ParseProcNetPorts(text).status().message(),
              HasSubstr("line 2 \"0: 00000000:ZZZZ 00000000:0000 0A\": local port is not a hex number"));
  EXPECT_THAT(ParseProcNetPorts("header\nshort line\n").status().message(), HasSubstr("at least 4 fields"));
}

TEST(PortsInUseTest, MissingFilesCountAsEmpty) {
  testing::TempDir dir;
  absl::StatusOr<core::PortRanges> ports = ReadPortsInUse(dir.path());
  ASSERT_TRUE(ports.ok());
  EXPECT_TRUE(ports->Empty());
}

TEST(PortsInUseTest, ServingRangeLeavesOutPrivilegedAndEphemeralPorts) {
  EXPECT_EQ(ReadEphemeralPortRange(TestDataPath("proc"))->ToString(), "32768-60999");
  EXPECT_EQ(core::DefaultServingPorts(*ReadEphemeralPortRange(TestDataPath("proc"))).ToString(),
            "1024-32767,61000-65535");
  testing::TempDir empty;
  EXPECT_EQ(core::DefaultServingPorts(core::PortRanges()).ToString(), "1024-65535");
  EXPECT_THAT(ReadEphemeralPortRange(empty.path()).status().message(), HasSubstr("does not exist"));
}

TEST(PortsInUseTest, LiveBoundSocketShowsUp) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
    int fd = socket(AF_INET, type, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (type == SOCK_STREAM) {
      ASSERT_EQ(listen(fd, 1), 0);
    }
    socklen_t len = sizeof(addr);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    uint32_t port = ntohs(addr.sin_port);
    absl::StatusOr<core::PortRanges> ports = ReadPortsInUse();
    close(fd);
    ASSERT_TRUE(ports.ok()) << ports.status();
    EXPECT_TRUE(ports->Contains(port)) << "port " << port << " (type " << type << ")";
  }
}

}  // namespace
}  // namespace trainyard::agent
