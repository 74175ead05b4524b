// httpd::HttpServer without the server's authentication: a bare port is on
// loopback, routes are counted, and a bad address names the flag. (The
// limits are tested through the server's endpoint, server/http/.)
#include "httpd/http_server.h"

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace trainyard::httpd {
namespace {

using ::testing::HasSubstr;

TEST(HttpdTest, ABarePortIsOnLoopbackAndItsRoutesAreCounted) {
  auto s = HttpServer::Bind({.listen = "0"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(absl::StartsWith((*s)->address(), "127.0.0.1:")) << (*s)->address();
  (*s)->Handle("GET", "/metrics", "/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("up 1\n", "text/plain");
  });
  (*s)->Serve();
  httplib::Client client("http://" + (*s)->address());
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "up 1\n");
  auto missing = client.Get("/nowhere");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // A request is counted once its answer is written (the engine's logger):
  // the client may read the answer first, so the count is waited for.
  auto counted = [&] {
    for (const HttpRequestCount& c : (*s)->RequestCounts()) {
      if (c.route == "/metrics" && c.code == 200 && c.count == 1) return true;
    }
    return false;
  };
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!counted() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_TRUE(counted());
  (*s)->Stop();
}

TEST(HttpdTest, ABadAddressNamesTheFlag) {
  EXPECT_THAT(HttpServer::Bind({.listen = "127.0.0.1:99999"}).status().message(),
              HasSubstr("http-listen: '127.0.0.1:99999' is not host:port"));
  EXPECT_THAT(HttpServer::Bind({.listen = "no.such.host.invalid:80"}).status().message(),
              HasSubstr("http-listen: cannot resolve 'no.such.host.invalid'"));
}

}  // namespace
}  // namespace trainyard::httpd
