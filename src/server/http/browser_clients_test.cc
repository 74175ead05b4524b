// HttpServer with browsers: a kept-alive idle connection (a dashboard tab
// holds several and polls on them) must not keep a new connection waiting
// for a worker thread until its keep-alive time ends; and what a browser
// accepts (brotli first) must not make a large answer take seconds.
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "server/http/http_server.h"

namespace trainyard::server::http {
namespace {

TEST(HttpBrowserClientTest, AnIdleKeptAliveConnectionGivesItsThreadToAWaitingOne) {
  HttpOptions opt;
  opt.threads = 1;
  opt.keep_alive = absl::Seconds(30);
  auto s = HttpServer::Bind(opt);
  ASSERT_TRUE(s.ok()) << s.status();
  (*s)->Handle("GET", "/ping", "/ping", [](const httplib::Request&, httplib::Response& res, const Principal&) {
    res.set_content("pong", "text/plain");
  });
  (*s)->Serve();
  const std::string url = "http://" + (*s)->address();
  httplib::Client idle(url);
  idle.set_keep_alive(true);
  auto first = idle.Get("/ping");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200);
  // `idle` keeps its connection open and the only thread waits on it.
  httplib::Client other(url);
  other.set_read_timeout(5, 0);
  absl::Time start = absl::Now();
  auto r = other.Get("/ping");
  ASSERT_TRUE(r) << "a second connection waited past 5 s behind an idle one";
  EXPECT_EQ(r->body, "pong");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // The idle client still gets answers: on a new connection.
  auto again = idle.Get("/ping");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->body, "pong");
}

TEST(HttpBrowserClientTest, ABrowserThatAcceptsBrotliGetsGzip) {
  auto s = HttpServer::Bind({});
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string big(1 << 20, 'x');
  (*s)->Handle("GET", "/big", "/big", [&big](const httplib::Request&, httplib::Response& res, const Principal&) {
    res.set_content(big, "application/json");
  });
  (*s)->Serve();
  httplib::Client c("http://" + (*s)->address());
  c.set_decompress(false);
  for (const std::string accept : {"gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8", "BR, gzip"}) {
    auto r = c.Get("/big", {{"Accept-Encoding", accept}});
    ASSERT_TRUE(r) << accept;
    EXPECT_EQ(r->get_header_value("Content-Encoding"), "gzip") << accept;
    EXPECT_LT(r->body.size(), big.size() / 10) << accept;
  }
  auto plain = c.Get("/big", {{"Accept-Encoding", "br"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->get_header_value("Content-Encoding"), "");
  EXPECT_EQ(plain->body.size(), big.size());
}

}  // namespace
}  // namespace trainyard::server::http
