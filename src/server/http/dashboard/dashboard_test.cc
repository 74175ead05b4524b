// The embedded dashboard as a browser fetches it: the page at /, its
// modules with the content types a browser requires (a module script
// served as anything but JavaScript is refused), the revalidating cache,
// and nothing outside the embedded files.
#include "server/http/dashboard/dashboard.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = HttpServer::Bind({});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    AddDashboardRoutes(*server_);
    server_->Serve();
  }
  httplib::Result Get(const std::string& path, const httplib::Headers& headers = {}) {
    httplib::Client c("http://" + server_->address());
    return c.Get(path, headers);
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(DashboardTest, IndexIsTheEmbeddedPage) {
  auto r = Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(r->body, HasSubstr("<title>Trainyard</title>"));
  EXPECT_THAT(r->body, HasSubstr(R"(src="/ui/js/app.js")"));
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'self'"));
}

TEST_F(DashboardTest, EveryFileTheIndexNamesIsServedWithItsType) {
  for (const auto& [path, type] : std::vector<std::pair<std::string, std::string>>{
           {"/ui/js/app.js", "text/javascript; charset=utf-8"},
           {"/ui/js/nodes.js", "text/javascript; charset=utf-8"},
           {"/ui/style.css", "text/css; charset=utf-8"},
           {"/ui/favicon.svg", "image/svg+xml"}}) {
    auto r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), type) << path;
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_FALSE(r->body.empty()) << path;
  }
}

TEST_F(DashboardTest, AnUnchangedFileIsRevalidatedWith304) {
  auto first = Get("/ui/js/app.js");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->get_header_value("Cache-Control"), "no-cache");
  std::string etag = first->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = Get("/ui/js/app.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto other = Get("/ui/js/app.js", {{"If-None-Match", "\"something-else\""}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  // Another file has another tag.
  auto css = Get("/ui/style.css");
  ASSERT_TRUE(css);
  EXPECT_NE(css->get_header_value("ETag"), etag);
}

TEST_F(DashboardTest, OnlyEmbeddedFilesAreServed) {
  for (const std::string path : {"/ui/nope.js", "/ui/../CMakeLists.txt", "/ui/%2e%2e/etc/passwd", "/ui/js"}) {
    auto r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << path;
  }
}

TEST(DashboardAssetsTest, EmbeddedFilesAreSortedForLookup) {
  std::span<const EmbeddedAsset> all = EmbeddedAssets();
  ASSERT_FALSE(all.empty());
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].path, all[i].path);
  ASSERT_NE(FindAsset("index.html"), nullptr);
  EXPECT_EQ(FindAsset("missing.html"), nullptr);
  EXPECT_EQ(ContentTypeOf("a/b.unknown"), "application/octet-stream");
}

}  // namespace
}  // namespace trainyard::server::http
