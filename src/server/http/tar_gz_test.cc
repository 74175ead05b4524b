// TarGzWriter: what a reader of the archive finds (gunzip'd here with
// zlib, the headers read field by field as tar reads them).
#include "server/http/tar_gz.h"

#include <zlib.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

std::string TarGzGunzip(const std::string& gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buf[4096];
  int r = Z_OK;
  while (r == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    r = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  EXPECT_EQ(r, Z_STREAM_END) << "not one whole gzip stream";
  inflateEnd(&z);
  return out;
}

struct Entry {
  std::string name;
  std::string data;
};

// The entries of an uncompressed ustar archive; fails the test on a bad
// checksum or a missing end.
std::vector<Entry> ReadTar(const std::string& tar) {
  std::vector<Entry> out;
  EXPECT_EQ(tar.size() % kTarBlock, 0u);
  size_t at = 0;
  while (at + kTarBlock <= tar.size()) {
    const char* h = tar.data() + at;
    if (std::string(h, kTarBlock) == std::string(kTarBlock, '\0')) {
      EXPECT_EQ(tar.size() - at, 2u * kTarBlock) << "the archive ends with two zero blocks";
      return out;
    }
    EXPECT_EQ(std::string(h + 257, 6), std::string("ustar\0", 6));
    unsigned sum = 0;
    for (int i = 0; i < kTarBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    EXPECT_EQ(std::stoul(std::string(h + 148, 6), nullptr, 8), sum);
    std::string prefix(h + 345, strnlen(h + 345, 155));
    std::string name(h, strnlen(h, 100));
    size_t size = std::stoul(std::string(h + 124, 11), nullptr, 8);
    EXPECT_EQ(h[156], '0');
    at += kTarBlock;
    out.push_back({prefix.empty() ? name : prefix + "/" + name, tar.substr(at, size)});
    at += (size + kTarBlock - 1) / kTarBlock * kTarBlock;
  }
  ADD_FAILURE() << "no end blocks";
  return out;
}

TEST(TarGzTest, EntriesComeBackWithTheirNamesAndBytes) {
  std::string gz;
  int pieces = 0;
  TarGzWriter w([&](const char* d, size_t n) {
    gz.append(d, n);
    ++pieces;
    return true;
  });
  std::string big(200000, 'x');
  for (size_t i = 0; i < big.size(); i += 97) big[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE(w.BeginFile("job-worker-0/attempt-0.log", 6, 1700000000).ok());
  ASSERT_TRUE(w.Write("hello\n").ok());
  ASSERT_TRUE(w.BeginFile("job-worker-0/attempt-1.log", 0, 1700000000).ok());
  ASSERT_TRUE(w.BeginFile("job-ps-0/attempt-0.log", static_cast<int64_t>(big.size()), 1700000000).ok());
  ASSERT_TRUE(w.Write(absl::string_view(big).substr(0, 1000)).ok());
  ASSERT_TRUE(w.Write(absl::string_view(big).substr(1000)).ok());
  ASSERT_TRUE(w.Finish().ok());
  std::vector<Entry> entries = ReadTar(TarGzGunzip(gz));
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "job-worker-0/attempt-0.log");
  EXPECT_EQ(entries[0].data, "hello\n");
  EXPECT_EQ(entries[1].name, "job-worker-0/attempt-1.log");
  EXPECT_EQ(entries[1].data, "");
  EXPECT_EQ(entries[2].data, big);
}

TEST(TarGzTest, LongNamesGoInThePrefixField) {
  std::string gz;
  TarGzWriter w([&](const char* d, size_t n) { return gz.append(d, n), true; });
  std::string dir(120, 'd');
  ASSERT_TRUE(w.BeginFile(dir + "/attempt-0.log", 2, 0).ok());
  ASSERT_TRUE(w.Write("a\n").ok());
  ASSERT_TRUE(w.Finish().ok());
  std::vector<Entry> entries = ReadTar(TarGzGunzip(gz));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, dir + "/attempt-0.log");
  absl::Status st = w.BeginFile(std::string(300, 'n'), 1, 0);
  EXPECT_FALSE(st.ok());
}

TEST(TarGzTest, NamesTooLongAndWrongSizesAreRefused) {
  char h[kTarBlock];
  absl::Status st = TarHeader(std::string(150, 'n'), 1, 0, h);  // no '/' to split at
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("too long"));
  TarGzWriter w([](const char*, size_t) { return true; });
  ASSERT_TRUE(w.BeginFile("a", 2, 0).ok());
  EXPECT_FALSE(w.Write("abc").ok());
  EXPECT_FALSE(w.Finish().ok());  // "a" is not whole
}

TEST(TarGzTest, AReaderThatGoesAwayEndsTheArchive) {
  int offered = 0;
  TarGzWriter w([&offered](const char*, size_t) {
    ++offered;
    return false;
  });
  // zlib hands out the gzip header at its first call, so which call meets
  // the refusal is zlib's business: the first one that does says so.
  absl::Status st = w.BeginFile("a", 3, 0);
  if (st.ok()) st = w.Write("abc");
  if (st.ok()) st = w.Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  EXPECT_EQ(offered, 1);
}

}  // namespace
}  // namespace trainyard::server::http
