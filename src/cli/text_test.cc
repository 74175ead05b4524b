// What the CLI prints of strings users and programs chose: escaped control
// characters, counts with their noun, times and elapsed durations.
#include "cli/text.h"

#include "gtest/gtest.h"

namespace trainyard::cli {
namespace {

TEST(TextTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(Printable("alice"), "alice");
  EXPECT_EQ(Printable("bob\n2026-01-01 job ok"), "bob\\n2026-01-01 job ok");
  EXPECT_EQ(Printable("\x1b[2Jroot"), "\\x1b[2Jroot");
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Printable("tab\there\r\x7f"), "tab\\there\\r\\x7f");
  EXPECT_EQ(Printable("\xc2\x9b" "31m"), "\\u009b31m") << "a C1 control (CSI) in UTF-8";
  EXPECT_EQ(Printable("gpu ■ ü 東京"), "gpu ■ ü 東京") << "other UTF-8 is kept";
}

TEST(TextTest, CountsTakeTheirNounInTheRightNumber) {
  EXPECT_EQ(Count(1, "server task"), "1 server task");
  EXPECT_EQ(Count(0, "task"), "0 tasks");
  EXPECT_EQ(Count(3, "task"), "3 tasks");
}

TEST(TextTest, ElapsedIsFromStartToEndOrNow) {
  EXPECT_EQ(ElapsedText(0, 0, 5000), "-");
  EXPECT_EQ(ElapsedText(1000, 6312, 99999), "5.3 s");
  EXPECT_EQ(ElapsedText(1000, 0, 126000), "2 min 5 s");
  EXPECT_EQ(TimeText(0), "-");
  EXPECT_NE(TimeText(1'800'000'000'000), "-");
}

}  // namespace
}  // namespace trainyard::cli
