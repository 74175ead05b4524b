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

TEST(ImageRefTest, ARegistrysImageIsItsReferenceAndItsHost) {
  absl::StatusOr<ImageRef> r = ParseImageRef("docker://127.0.0.1:5000/team/train:v1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, ImageSource::kRegistry);
  EXPECT_EQ(r->path, "127.0.0.1:5000/team/train:v1");
  EXPECT_EQ(RegistryHost(r->path), "127.0.0.1:5000");
  EXPECT_TRUE(ParseImageRef("docker://pytorch/pytorch@sha256:" + std::string(64, 'a')).ok());
  EXPECT_FALSE(ParseImageRef("docker://pytorch/pytorch@sha256:0123abcd").ok()) << "a digest is 64 hex digits";
  EXPECT_FALSE(ParseImageRef("docker://a@sha256:" + std::string(64, 'a') + "@x").ok());
  EXPECT_EQ(RegistryHost("MyReg/x"), "myreg") << "an upper-case first part is a host to Docker";
  EXPECT_EQ(RegistryHost("python:3.11"), "docker.io");
  EXPECT_EQ(RegistryHost("pytorch/pytorch:2.1"), "docker.io");
  EXPECT_EQ(RegistryHost("ghcr.io/org/img"), "ghcr.io");
  EXPECT_EQ(RegistryHost("localhost/img"), "localhost");
}

TEST(ImageRefTest, RefusesWhatIsNotAnImageNamingWhy) {
  EXPECT_THAT(ParseImageRef("python:3.11").status().message(),
              HasSubstr("is not oci:PATH[:TAG], oci-archive:PATH[:TAG] or docker://"));
  for (const char* bad : {"docker://", "docker://-x", "docker://a b", "docker:///x", "docker://a//b", "docker://a/../b"}) {
    EXPECT_THAT(ParseImageRef(bad).status().message(), HasSubstr("is not docker://[HOST/]NAME")) << bad;
  }
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
