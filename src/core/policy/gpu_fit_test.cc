// Hot-path GPU choice: best fit by topology level, exact masks.
#include "core/policy/gpu_fit.h"

#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

GpuTopology Eight() {
  return GpuTopology::FromSpec("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7").value();
}
GpuSet S(const char* text) { return GpuSet::Parse(text).value(); }

TEST(GpuFitTest, OneGpuGoesToTheFullestSwitchThatFits) {
  GpuFit fit;
  // Switch 0-1 has one free GPU: best fit keeps the whole pairs intact.
  ASSERT_TRUE(FitGpus(Eight(), S("1-7"), 1, 0, Tightness::kNode, &fit));
  EXPECT_EQ(fit.gpus.ToString(), "1");
  EXPECT_EQ(fit.tightness, Tightness::kSwitch);
}

TEST(GpuFitTest, FourGpusStayUnderOneSocket) {
  GpuFit fit;
  ASSERT_TRUE(FitGpus(Eight(), S("1-7"), 4, 0, Tightness::kNode, &fit));
  EXPECT_EQ(fit.gpus.ToString(), "4-7");
  EXPECT_EQ(fit.tightness, Tightness::kSocket);
  // Spread over sockets only when no socket has four.
  ASSERT_TRUE(FitGpus(Eight(), S("2-3,6-7"), 4, 0, Tightness::kNode, &fit));
  EXPECT_EQ(fit.tightness, Tightness::kNode);
  EXPECT_FALSE(FitGpus(Eight(), S("2-3,6-7"), 4, 0, Tightness::kSocket, &fit));
}

TEST(GpuFitTest, MasksAreExact) {
  GpuFit fit;
  EXPECT_TRUE(FitGpus(Eight(), S("0-7"), 2, S("2-3").bits(), Tightness::kNode, &fit));
  EXPECT_EQ(fit.gpus.ToString(), "2-3");
  EXPECT_FALSE(FitGpus(Eight(), S("0-2"), 2, S("2-3").bits(), Tightness::kNode, &fit));
}

}  // namespace
}  // namespace trainyard::core
