#include "common/logging.h"

#include "gtest/gtest.h"

namespace trainyard {
namespace {

TEST(LoggingTest, ParsesKnownLevelsAndRejectsOthers) {
  LogLevel level;
  ASSERT_TRUE(ParseLogLevel("warning", &level));
  EXPECT_EQ(level, LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("loud", &level));
}

TEST(LoggingTest, LevelFiltersLowerMessages) {
  SetLogLevel(LogLevel::kWarning);
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  SetLogLevel(LogLevel::kInfo);
  EXPECT_TRUE(LogEnabled(LogLevel::kInfo));
}

}  // namespace
}  // namespace trainyard
