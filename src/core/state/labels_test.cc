// Node labels and selectors: parsing, matching and errors.
#include "core/state/labels.h"

#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

Labels L(const char* text) { return ParseLabels(text).value(); }

TEST(LabelsTest, SetExpressionsMatch) {
  LabelSelector s = LabelSelector::Parse("gpu_model in (V100M16, V100M32), zone!=b").value();
  EXPECT_TRUE(s.Matches(L("gpu_model=V100M32,zone=a")));
  EXPECT_FALSE(s.Matches(L("gpu_model=P100,zone=a")));
  EXPECT_FALSE(s.Matches(L("gpu_model=V100M16,zone=b")));
  EXPECT_FALSE(s.Matches(L("zone=a")));
  EXPECT_EQ(s.ToString(), "gpu_model in (V100M16, V100M32); zone notin (b)");
}

TEST(LabelsTest, ExistenceAndEquality) {
  LabelSelector s = LabelSelector::Parse("infiniband; !spot; rack==r1").value();
  EXPECT_TRUE(s.Matches(L("infiniband=yes,rack=r1")));
  EXPECT_FALSE(s.Matches(L("infiniband=yes,rack=r1,spot=1")));
  EXPECT_FALSE(s.Matches(L("rack=r1")));
  EXPECT_TRUE(LabelSelector::Parse("").value().Matches(L("")));
}

TEST(LabelsTest, ErrorsQuoteThePart) {
  EXPECT_EQ(LabelSelector::Parse("gpu_model in (V100").status().message(),
            "label selector \"gpu_model in (V100\": missing ')'");
  EXPECT_EQ(LabelSelector::Parse("gpu_model within (a)").status().message(),
            "label selector \"gpu_model within (a)\": expected \"key in (v1, v2)\" or \"key "
            "notin (v1, v2)\"");
  EXPECT_EQ(LabelSelector::Parse("k in (a, )").status().message(),
            "label selector \"k in (a, )\": empty value in the set");
  EXPECT_EQ(ParseLabels("zone").status().message(), "labels: \"zone\" is not key=value");
  EXPECT_EQ(ParseLabels("a=1,a=2").status().message(), "labels: key \"a\" is given twice");
}

}  // namespace
}  // namespace trainyard::core
