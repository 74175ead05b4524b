#include "api/image_ref.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;

TEST(ImageRefTest, ReadsALayoutOrAnArchiveWithItsTag) {
  absl::StatusOr<ImageRef> r = ParseImageRef("oci:/srv/images/torch:2.1-cuda12");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, ImageSource::kLayout);
  EXPECT_EQ(r->path, "/srv/images/torch");
  EXPECT_EQ(r->tag, "2.1-cuda12");
  r = ParseImageRef("oci-archive:/srv/a:b/img.tar");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, ImageSource::kArchive);
  EXPECT_EQ(r->path, "/srv/a:b/img.tar") << "a ':' before the last '/' is the path's";
  EXPECT_EQ(r->tag, "latest");
  r = ParseImageRef("oci://srv//images/");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, "/srv/images");
}

TEST(ImageRefTest, RefusesWhatIsNotALocalImageNamingWhy) {
  EXPECT_THAT(ParseImageRef("python:3.11").status().message(), HasSubstr("is not oci:PATH[:TAG] or oci-archive:"));
  EXPECT_THAT(ParseImageRef("docker://python:3.11").status().message(), HasSubstr("skopeo copy"));
  EXPECT_THAT(ParseImageRef("oci:images/torch").status().message(), HasSubstr("must be an absolute path"));
  EXPECT_THAT(ParseImageRef("oci:/srv/../etc:v1").status().message(), HasSubstr("'..'"));
  EXPECT_THAT(ParseImageRef("oci:/srv/x:").status().message(), HasSubstr("tag ''"));
  EXPECT_THAT(ParseImageRef("oci:/srv/x:a b").status().message(), HasSubstr("A-Z a-z 0-9 . _ -"));
  EXPECT_THAT(ParseImageRef(std::string("oci:/srv/x\0y", 12)).status().message(), HasSubstr("NUL"));
}

TEST(ImageRefTest, AVolumeIsTwoAbsolutePathsAndNotTheContainersOwnDirs) {
  v1::Volume v;
  v.set_host_path("/data");
  v.set_path("/mnt/data");
  EXPECT_EQ(VolumeProblem(v), "");
  v.set_host_path("data");
  EXPECT_EQ(VolumeProblem(v), "hostPath: must be an absolute path");
  v.set_host_path("/data");
  for (const char* own : {"/proc", "/proc/1", "/sys/fs", "/dev", "//dev/"}) {
    v.set_path(own);
    EXPECT_THAT(VolumeProblem(v), HasSubstr("is the container's own")) << own;
  }
  v.set_path("/");
  EXPECT_EQ(VolumeProblem(v), "path: / is the container's root");
  v.set_path("/devices");
  EXPECT_EQ(VolumeProblem(v), "");
}

}  // namespace
}  // namespace trainyard::api
