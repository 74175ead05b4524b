#include "agent/image_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;
using testing::TempDir;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Real processes, counted by their program.
class CountingRunner : public CommandRunner {
 public:
  explicit CountingRunner(std::atomic<int>* unpacks) : real_(NewSubprocessRunner()), unpacks_(unpacks) {}
  absl::StatusOr<std::string> Run(const std::vector<std::string>& argv) override {
    if (std::find(argv.begin(), argv.end(), "unpack") != argv.end()) ++*unpacks_;
    return real_->Run(argv);
  }

 private:
  CommandRunnerPtr real_;
  std::atomic<int>* unpacks_;
};

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    layout_ = dir_.path() + "/layout";
    std::string make = absl::StrCat(TRAINYARD_SOURCE_DIR, "/tests/images/make-test-image '", layout_, "' v1 'first'",
                                    " && ", TRAINYARD_SOURCE_DIR, "/tests/images/make-test-image '", layout_,
                                    "' v2 'second' >/dev/null");
    ASSERT_EQ(system(make.c_str()), 0) << make;
  }

  TempDir dir_;
  std::string layout_;
  std::atomic<int> unpacks_{0};
};

TEST_F(ImageStoreTest, ATagIsUnpackedOnceAndReadWithItsConfig) {
  ImageStore store(dir_.path() + "/images", std::make_unique<CountingRunner>(&unpacks_));
  absl::StatusOr<PreparedImage> image = store.Prepare("oci:" + layout_ + ":v1");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->ref, "oci:" + layout_ + ":v1");
  EXPECT_THAT(image->digest, ::testing::StartsWith("sha256:"));
  EXPECT_EQ(Read(image->rootfs + "/image-marker"), "first\n");
  EXPECT_EQ(image->rootfs, absl::StrCat(dir_.path(), "/images/sha256-", image->digest.substr(7), "/rootfs"));
  EXPECT_THAT(image->env, ElementsAre("PATH=/bin", "IMAGE_VAR=from-the-image"));
  EXPECT_THAT(image->cmd, ElementsAre("sh", "-c", "echo default command in $PWD"));
  EXPECT_TRUE(image->entrypoint.empty());
  EXPECT_EQ(image->working_dir, "/srv");
  EXPECT_EQ(unpacks_, 1);

  // Again, and from many threads at once: the same root, no unpack.
  std::vector<std::thread> threads;
  std::atomic<int> same{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] { same += store.Prepare("oci:" + layout_ + ":v1").value().rootfs == image->rootfs; });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(same, 4);
  EXPECT_EQ(unpacks_, 1);

  // Another tag is another image.
  absl::StatusOr<PreparedImage> second = store.Prepare("oci:" + layout_ + ":v2");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->digest, image->digest);
  EXPECT_EQ(Read(second->rootfs + "/image-marker"), "second\n");
  EXPECT_EQ(unpacks_, 2);
  std::vector<CachedImage> cached = store.List();
  ASSERT_EQ(cached.size(), 2u);
  EXPECT_EQ(cached[0].digest, second->digest) << "newest use first";
  EXPECT_THAT(cached[1].refs, ElementsAre("oci:" + layout_ + ":v1"));
  // Only root reaches the unpacked images (a layer's device node or setuid
  // file is no one else's to use).
  struct stat st;
  ASSERT_EQ(stat((dir_.path() + "/images").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(ImageStoreTest, AnArchiveIsExtractedOnceAndRunsAsItsLayout) {
  std::string tar = dir_.path() + "/image.tar";
  ASSERT_EQ(system(absl::StrCat("tar -cf '", tar, "' -C '", layout_, "' .").c_str()), 0);
  ImageStore store(dir_.path() + "/images", std::make_unique<CountingRunner>(&unpacks_));
  absl::StatusOr<PreparedImage> image = store.Prepare("oci-archive:" + tar + ":v2");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(Read(image->rootfs + "/image-marker"), "second\n");
  // The layout's own v2 is the same image: no second unpack.
  EXPECT_EQ(store.Prepare("oci:" + layout_ + ":v2").value().rootfs, image->rootfs);
  EXPECT_EQ(unpacks_, 1);
}

TEST_F(ImageStoreTest, AWrongImageIsTheTasksFaultNamingWhatIsWrong) {
  ImageStore store(dir_.path() + "/images");
  absl::Status st = store.Prepare("oci:" + layout_ + ":v3").status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("tag 'v3' is not in the image layout " + layout_ + " (its tags: v1, v2)"));
  st = store.Prepare("oci:" + dir_.path() + "/none").status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("none/index.json cannot be read"));
  st = store.Prepare("oci-archive:" + dir_.path() + "/none.tar").status();
  EXPECT_THAT(st.message(), HasSubstr("image archive " + dir_.path() + "/none.tar cannot be read"));
  std::ofstream(dir_.path() + "/junk.tar") << "not a tar";
  st = store.Prepare("oci-archive:" + dir_.path() + "/junk.tar").status();
  EXPECT_THAT(st.message(), HasSubstr("cannot be extracted"));
  std::ofstream(layout_ + "/index.json") << "{\"manifests\": [{\"mediaType\": "
                                           "\"application/vnd.oci.image.index.v1+json\", \"digest\": \"sha256:00\", "
                                           "\"annotations\": {\"org.opencontainers.image.ref.name\": \"multi\"}}]}";
  st = store.Prepare("oci:" + layout_ + ":multi").status();
  EXPECT_THAT(st.message(), HasSubstr("not an image manifest (for a multi-platform image, copy one platform"));
  std::ofstream(layout_ + "/index.json") << "[1, 2]";
  EXPECT_THAT(store.Prepare("oci:" + layout_).status().message(), HasSubstr("is not a JSON object"));
  EXPECT_TRUE(store.List().empty());
}

// A layer's device node (a disk, 0666) and setuid file are nobody's to use.
TEST_F(ImageStoreTest, ALayersDevicesAreRemovedAndItsSetuidBitsTakenOff) {
  if (geteuid() != 0) GTEST_SKIP() << "a layer with a device node is made by root";
  std::string bundle = dir_.path() + "/bundle";
  std::string make = absl::StrCat("umoci unpack --image '", layout_, ":v1' '", bundle, "' >/dev/null && mknod '", bundle,
                                  "/rootfs/disk' b 7 0 && chmod 0666 '", bundle, "/rootfs/disk' && chmod 4755 '", bundle,
                                  "/rootfs/bin/busybox' && umoci repack --image '", layout_, ":v3' '", bundle,
                                  "' >/dev/null && chmod -R a+rX '", layout_, "'");
  ASSERT_EQ(system(make.c_str()), 0) << make;
  ImageStore store(dir_.path() + "/images");
  absl::StatusOr<PreparedImage> image = store.Prepare("oci:" + layout_ + ":v3");
  ASSERT_TRUE(image.ok()) << image.status();
  struct stat st;
  EXPECT_NE(lstat((image->rootfs + "/disk").c_str(), &st), 0) << "the device node is gone";
  ASSERT_EQ(stat((image->rootfs + "/bin/busybox").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

// The digests are what is read: a manifest or config that is not its
// digest, a link or a FIFO in their place, a value of the wrong type.
TEST_F(ImageStoreTest, WhatIsReadMustBeItsDigestAndARegularFile) {
  ImageStore store(dir_.path() + "/images");
  std::string index = Read(layout_ + "/index.json");
  size_t at = index.find("sha256:");
  ASSERT_NE(at, std::string::npos);
  std::string digest = index.substr(at, 71);
  std::string blob = layout_ + "/blobs/sha256/" + digest.substr(7);
  std::string manifest = Read(blob);
  // Another manifest under this digest: refused, not unpacked.
  ASSERT_EQ(unlink(blob.c_str()), 0);
  std::ofstream(blob) << manifest << " ";
  EXPECT_THAT(store.Prepare("oci:" + layout_ + ":v1").status().message(), HasSubstr("is not " + digest));
  // A link to it.
  ASSERT_EQ(unlink(blob.c_str()), 0);
  std::ofstream(dir_.path() + "/elsewhere") << manifest;
  ASSERT_EQ(symlink((dir_.path() + "/elsewhere").c_str(), blob.c_str()), 0);
  EXPECT_THAT(store.Prepare("oci:" + layout_ + ":v1").status().message(), HasSubstr("cannot be read"));
  // A FIFO: refused at once, never read.
  ASSERT_EQ(unlink(blob.c_str()), 0);
  ASSERT_EQ(mkfifo(blob.c_str(), 0644), 0);
  EXPECT_THAT(store.Prepare("oci:" + layout_ + ":v1").status().message(), HasSubstr("is not a regular file"));
  // An index whose values are of other types.
  std::ofstream(layout_ + "/index.json", std::ios::trunc)
      << R"({"manifests": [{"mediaType": 1, "digest": null, "annotations": {"org.opencontainers.image.ref.name": "v1"}}]})";
  EXPECT_THAT(store.Prepare("oci:" + layout_ + ":v1").status().message(), HasSubstr("descriptor without a media type"));
  EXPECT_TRUE(store.List().empty());
}

// For a task's account, each blob must be one it could read itself: a
// cached image is not had by naming its digests.
TEST_F(ImageStoreTest, ForAnAccountEveryBlobMustBeOneItMayRead) {
  if (geteuid() != 0) GTEST_SKIP() << "files of another owner need root";
  chmod(dir_.path().c_str(), 0755);
  TaskAccount nobody{.name = "nobody", .uid = 65534, .gid = 65534};
  ImageStore store(dir_.path() + "/images");
  ASSERT_TRUE(store.Prepare("oci:" + layout_ + ":v1", &nobody).ok());
  PreparedImage image = ReadImageLayout(layout_, "v1").value();
  ASSERT_FALSE(image.layers.empty());
  std::string layer = layout_ + "/blobs/sha256/" + image.layers[0].substr(7);
  chmod(layer.c_str(), 0600);
  EXPECT_THAT(store.Prepare("oci:" + layout_ + ":v1", &nobody).status().message(),
              HasSubstr("nobody may not read " + layer));
  EXPECT_TRUE(store.Prepare("oci:" + layout_ + ":v1").ok()) << "the agent's own use";
}

TEST(FindOciRuntimeTest, FindsRuncOrCrunOnTheSystemsPaths) {
  std::string runtime = FindOciRuntime();
  if (access("/usr/sbin/runc", X_OK) == 0 || access("/usr/bin/runc", X_OK) == 0) {
    EXPECT_THAT(runtime, ::testing::EndsWith("/runc"));
  }
  if (!runtime.empty()) {
    EXPECT_EQ(access(runtime.c_str(), X_OK), 0);
  }
}

}  // namespace
}  // namespace trainyard::agent
