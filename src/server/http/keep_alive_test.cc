// HttpServer with browsers: a kept-alive idle connection (a dashboard tab
// holds several and polls on them) must not keep a new connection waiting
// for a worker thread until its keep-alive time ends.
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "server/http/http_server.h"

namespace trainyard::server::http {
namespace {

TEST(HttpKeepAliveTest, AnIdleKeptAliveConnectionGivesItsThreadToAWaitingOne) {
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

}  // namespace
}  // namespace trainyard::server::http
