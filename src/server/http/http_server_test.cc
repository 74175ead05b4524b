// HttpServer: routes answered in JSON, and the limits that keep strangers
// from holding it: the caps in all and per peer, the head and body
// deadlines, the body cap, and the door that serves a token first.
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "common/wait_until.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<HttpServer> Serve(HttpOptions opt = {}) {
  auto s = HttpServer::Bind(opt);
  EXPECT_TRUE(s.ok()) << s.status();
  (*s)->Handle("GET", "/hello/([^/]+)", "/hello/{who}",
               [](const httplib::Request& req, httplib::Response& res, const Principal&) {
                 res.set_content(absl::StrCat("hello ", std::string(req.matches[1])), "text/plain");
               });
  (*s)->Handle("POST", "/echo", "/echo", [](const httplib::Request& req, httplib::Response& res, const Principal&) {
    res.set_content(req.body, "text/plain");
  });
  (*s)->Serve();
  return std::move(*s);
}

// A connection to `address` from the loopback address `from` (each of
// 127.0.0.0/8 is a peer of its own to the server).
int ConnectFrom(const std::string& address, const std::string& from) {
  size_t colon = address.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)), 0) << from;
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

int Connect(const std::string& address) { return ConnectFrom(address, "127.0.0.1"); }

// Everything the server sends on `fd` until it closes it (or `within` passes).
std::string ReadUntilClosed(int fd, absl::Duration within) {
  timeval tv{static_cast<time_t>(absl::ToInt64Seconds(within)), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

TEST(HttpServerTest, TheCapsComeFromTheOpenFileLimitUnlessSet) {
  HttpConnectionCaps caps = HttpConnectionCapsFor(1024, 0, 0);
  EXPECT_EQ(caps.max_connections, 128);
  EXPECT_EQ(caps.max_connections_per_peer, 16);
  EXPECT_EQ(HttpConnectionCapsFor(1 << 20, 0, 0).max_connections, 4096);
  EXPECT_EQ(HttpConnectionCapsFor(256, 0, 0).max_connections, 64);
  caps = HttpConnectionCapsFor(1024, 500, 1000);
  EXPECT_EQ(caps.max_connections, 500);
  EXPECT_EQ(caps.max_connections_per_peer, 500);  // never above the total
}

TEST(HttpServerTest, RoutesAnswerAndEverythingElseIsAJsonError) {
  auto s = Serve();
  httplib::Client c("http://" + s->address());
  auto r = c.Get("/hello/ana");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello ana");
  r = c.Get("/nowhere");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  nlohmann::json body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body["error"]["code"], 404);
  EXPECT_EQ(body["error"]["message"], "no such resource");
  bool counted = false;
  for (const HttpRequestCount& n : s->RequestCounts()) {
    counted |= n.method == "GET" && n.route == "/hello/{who}" && n.code == 200 && n.count == 1;
  }
  EXPECT_TRUE(counted);
}

TEST(HttpServerTest, ABodyAboveTheCapIsRefusedAndOneWithinIsServed) {
  HttpOptions opt;
  opt.max_body_bytes = 1000;
  auto s = Serve(opt);
  httplib::Client c("http://" + s->address());
  auto r = c.Post("/echo", std::string(999, 'a'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.size(), 999u);
  r = c.Post("/echo", std::string(5000, 'a'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_THAT(r->body, HasSubstr("above the most this server takes"));
}

TEST(HttpServerTest, AHeadThatNeverEndsIsCutOffAtTheHeaderDeadline) {
  HttpOptions opt;
  opt.header_timeout = absl::Milliseconds(300);
  opt.request_timeout = absl::Seconds(120);  // not the one that cuts it off
  auto s = Serve(opt);
  int fd = Connect(s->address());
  const std::string half = "GET /hello/x HTTP/1.1\r\nHost: a\r\n";
  ASSERT_EQ(send(fd, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
  std::string got = ReadUntilClosed(fd, absl::Seconds(60));
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 408"));
  EXPECT_THAT(got, HasSubstr("head did not come whole"));
  EXPECT_THAT(got, ::testing::Not(HasSubstr("hello x")));
  close(fd);
  EXPECT_EQ(s->ConnectionStats().header_timeouts, 1);
}

TEST(HttpServerTest, ABodyThatNeverEndsIsCutOffAtTheBodyDeadline) {
  HttpOptions opt;
  opt.body_timeout = absl::Milliseconds(300);
  opt.request_timeout = absl::Seconds(120);
  auto s = Serve(opt);
  int fd = Connect(s->address());
  const std::string half = "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nonly some";
  ASSERT_EQ(send(fd, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
  std::string got = ReadUntilClosed(fd, absl::Seconds(60));
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 408"));
  EXPECT_THAT(got, HasSubstr("body did not come whole"));
  close(fd);
  EXPECT_EQ(s->ConnectionStats().body_timeouts, 1);
}

// RFC 9112: a request with neither Content-Length nor Transfer-Encoding has
// no body. Before, the server read until the client closed or the request
// deadline passed, then answered 400.
TEST(HttpServerTest, APostWithoutABodyIsAnsweredAsOneWithAnEmptyBody) {
  HttpOptions opt;
  opt.request_timeout = absl::Seconds(120);
  opt.body_timeout = absl::Seconds(120);
  auto s = Serve(opt);
  int fd = Connect(s->address());
  const std::string post = "POST /echo HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, post.data(), post.size(), MSG_NOSIGNAL), static_cast<ssize_t>(post.size()));
  std::string got = ReadUntilClosed(fd, absl::Seconds(60));
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(got, HasSubstr("Content-Length: 0"));
  close(fd);
}

TEST(HttpServerTest, HeadersWithoutEndAreCutOff) {
  HttpOptions opt;
  opt.max_header_bytes = 4096;
  auto s = Serve(opt);
  int fd = Connect(s->address());
  std::string req = "GET /hello/x HTTP/1.1\r\n";
  while (req.size() < 64 * 1024) req += "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
  ssize_t n = send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  (void)n;  // the server may close before it takes all of it
  std::string got = ReadUntilClosed(fd, absl::Seconds(10));
  EXPECT_THAT(got, ::testing::Not(HasSubstr("hello x")));
  close(fd);
  // ...and the server goes on.
  httplib::Client c("http://" + s->address());
  auto r = c.Get("/hello/y");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello y");
}

TEST(HttpServerTest, WhenAllAreTakenTheOldestUnfinishedConnectionMakesRoom) {
  HttpOptions opt;
  opt.threads = 1;
  opt.max_connections = 2;
  opt.max_connections_per_peer = 2;
  opt.header_timeout = absl::Seconds(120);
  auto s = Serve(opt);
  int a = ConnectFrom(s->address(), "127.0.0.2");
  const std::string half = "GET /hello/a HTTP/1.1\r\n";
  ASSERT_GT(send(a, half.data(), half.size(), MSG_NOSIGNAL), 0);
  int b = ConnectFrom(s->address(), "127.0.0.3");
  ASSERT_GT(send(b, half.data(), half.size(), MSG_NOSIGNAL), 0);
  // Both are counted before the third comes (the door takes them in order).
  ASSERT_TRUE([&] {
    for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
      if (s->ConnectionStats().open == 2) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }());
  httplib::Client c("http://" + s->address());
  auto r = c.Get("/hello/z");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello z");
  std::string got = ReadUntilClosed(a, absl::Seconds(30));  // the oldest went
  EXPECT_THAT(got, ::testing::Not(HasSubstr("hello")));
  EXPECT_EQ(s->ConnectionStats().evicted_unfinished, 1);
  close(a);
  close(b);
}

TEST(HttpServerTest, AConnectionAboveItsPeersCapIsAnswered503AtOnce) {
  HttpOptions opt;
  opt.max_connections = 64;
  opt.max_connections_per_peer = 2;
  opt.header_timeout = absl::Seconds(120);
  auto s = Serve(opt);
  int a = ConnectFrom(s->address(), "127.0.0.2");
  int b = ConnectFrom(s->address(), "127.0.0.2");
  int extra = ConnectFrom(s->address(), "127.0.0.2");
  std::string got = ReadUntilClosed(extra, absl::Seconds(30));
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 503"));
  EXPECT_THAT(got, HasSubstr("too many HTTP connections from your address"));
  close(extra);
  EXPECT_EQ(s->ConnectionStats().refused_peer_cap, 1);
  // Another address is served meanwhile.
  httplib::Client c("http://" + s->address());
  auto r = c.Get("/hello/z");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  close(a);
  close(b);
}

TEST(HttpServerTest, StopReturnsWhileAClientHoldsAConnection) {
  auto s = Serve();
  int fd = Connect(s->address());
  const std::string half = "GET /hello/x HTTP/1.1\r\n";
  ASSERT_GT(send(fd, half.data(), half.size(), MSG_NOSIGNAL), 0);
  absl::Time start = absl::Now();
  s->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  close(fd);
}

TEST(HttpServerTest, ASecondServerOnTheSamePortFailsNamingTheAddress) {
  auto s = Serve();
  HttpOptions opt;
  opt.listen = s->address();
  auto second = HttpServer::Bind(opt);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("cannot bind " + s->address()));
  opt.listen = "nonsense";
  EXPECT_THAT(HttpServer::Bind(opt).status().message(), HasSubstr("'nonsense' is not host:port"));
}

// A route that streams "tick\n" until its client goes (or the server
// stops), holding one log-stream slot; 503 when none is free.
void AddTicker(HttpServer& s, std::atomic<int>* open) {
  HttpServer* server = &s;
  s.Handle("GET", "/tick", "/tick", [server, open](const httplib::Request&, httplib::Response& res, const Principal&) {
    std::shared_ptr<void> slot = server->TryStream(HttpServer::StreamKind::kLog);
    if (!slot) return SetJsonError(res, 503, "no stream slot");
    ++*open;
    auto held = std::shared_ptr<void>(slot.get(), [slot, open](void*) { --*open; });
    res.set_chunked_content_provider("text/plain", [held](size_t, httplib::DataSink& sink) {
      if (HttpServer::ClientGone()) return false;
      absl::SleepFor(absl::Milliseconds(20));  // the stream's pace, not a test's wait
      return sink.write("tick\n", 5);
    });
  });
}

// A server with /hello and /tick.
std::unique_ptr<HttpServer> ServeTicker(HttpOptions opt, std::atomic<int>* open) {
  auto s = HttpServer::Bind(opt);
  EXPECT_TRUE(s.ok()) << s.status();
  (*s)->Handle("GET", "/hello/([^/]+)", "/hello/{who}",
               [](const httplib::Request& req, httplib::Response& res, const Principal&) {
                 res.set_content(absl::StrCat("hello ", std::string(req.matches[1])), "text/plain");
               });
  AddTicker(**s, open);
  (*s)->Serve();
  return std::move(*s);
}

TEST(HttpServerTest, StreamsAreBoundedAndAGoneClientFreesItsSlot) {
  HttpOptions opt;
  opt.max_log_streams = 1;
  std::atomic<int> open{0};
  auto s = ServeTicker(opt, &open);
  int fd = Connect(s->address());
  const std::string get = "GET /tick HTTP/1.1\r\nHost: a\r\n\r\n";
  ASSERT_EQ(send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  char buf[256];
  ASSERT_GT(recv(fd, buf, sizeof(buf), 0), 0);  // the answer has begun
  httplib::Client c("http://" + s->address());
  auto second = c.Get("/tick");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 503);
  // Other requests still have their threads.
  auto hello = c.Get("/hello/ana");
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->body, "hello ana");
  close(fd);
  EXPECT_TRUE(WaitUntil([&] { return open.load() == 0; })) << "the stream went on after its client closed";
}

TEST(HttpServerTest, StopEndsOpenStreams) {
  std::atomic<int> open{0};
  auto s = ServeTicker(HttpOptions{}, &open);
  int fd = Connect(s->address());
  const std::string get = "GET /tick HTTP/1.1\r\nHost: a\r\n\r\n";
  ASSERT_EQ(send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  char buf[256];
  ASSERT_GT(recv(fd, buf, sizeof(buf), 0), 0);
  absl::Time start = absl::Now();
  s->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(open.load(), 0);
  close(fd);
}

}  // namespace
}  // namespace trainyard::server::http

namespace trainyard::server::http {
namespace {

// With an authenticator, every /api/ route needs a token: none or a wrong
// one is a 401 JSON error with the authenticator's message; the handler
// gets the principal. Other routes stay public.
TEST(HttpServerTest, ApiRoutesNeedAToken) {
  HttpOptions opt;
  opt.authenticate = [](absl::string_view authorization) -> absl::StatusOr<Principal> {
    if (authorization == "Bearer good") return Principal{.user = "alice", .admin = false, .anonymous = false};
    return absl::UnauthenticatedError("this server requires a token");
  };
  auto s = HttpServer::Bind(opt);
  ASSERT_TRUE(s.ok()) << s.status();
  (*s)->Handle("GET", "/api/v1/whoami", "/api/v1/whoami",
               [](const httplib::Request&, httplib::Response& res, const Principal& who) {
                 res.set_content(who.user, "text/plain");
               });
  (*s)->Handle("GET", "/healthz", "/healthz", [](const httplib::Request&, httplib::Response& res, const Principal&) {
    res.set_content("ok", "text/plain");
  });
  (*s)->Serve();
  httplib::Client client("http://" + (*s)->address());
  auto none = client.Get("/api/v1/whoami");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(nlohmann::json::parse(none->body)["error"]["message"], "this server requires a token");
  auto wrong = client.Get("/api/v1/whoami", {{"Authorization", "Bearer bad"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto good = client.Get("/api/v1/whoami", {{"Authorization", "Bearer good"}});
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
  EXPECT_EQ(good->body, "alice");
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace trainyard::server::http

namespace trainyard::server::http {
namespace {

// A server with a token check ("Bearer good" is alice's), /healthz, an
// /api/ route that says who asked, and /slow, which holds its worker until
// `release` is notified.
std::unique_ptr<HttpServer> ServeWithTokens(HttpOptions opt, absl::Notification* release) {
  opt.authenticate = [](absl::string_view authorization) -> absl::StatusOr<Principal> {
    if (authorization == "Bearer good") return Principal{.user = "alice", .admin = false, .anonymous = false};
    return absl::UnauthenticatedError("this server requires a token");
  };
  auto s = HttpServer::Bind(opt);
  EXPECT_TRUE(s.ok()) << s.status();
  (*s)->Handle("GET", "/api/v1/whoami", "/api/v1/whoami",
               [](const httplib::Request&, httplib::Response& res, const Principal& who) {
                 res.set_content(who.user, "text/plain");
               });
  (*s)->Handle("GET", "/healthz", "/healthz", [](const httplib::Request&, httplib::Response& res, const Principal&) {
    res.set_content("ok", "text/plain");
  });
  (*s)->Handle("GET", "/slow", "/slow", [release](const httplib::Request&, httplib::Response& res, const Principal&) {
    release->WaitForNotificationWithTimeout(absl::Seconds(120));
    res.set_content("slow", "text/plain");
  });
  (*s)->Serve();
  return std::move(*s);
}

std::string Addr(int i) { return absl::StrCat("127.0.0.", i); }

// Slowloris from one address: its connections past its cap are refused at
// once, and everyone else is served meanwhile, with or without a token.
TEST(HttpDoorTest, SlowConnectionsBeyondAPeersCapAreRefusedWhileOthersAreServed) {
  HttpOptions opt;
  opt.max_connections = 64;
  opt.max_connections_per_peer = 8;
  opt.header_timeout = absl::Seconds(120);
  absl::Notification release;
  auto s = ServeWithTokens(opt, &release);
  const std::string half = "GET /api/v1/whoami HTTP/1.1\r\nHost: a\r\n";
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(ConnectFrom(s->address(), "127.0.0.2"));
    ASSERT_GT(send(slow.back(), half.data(), half.size(), MSG_NOSIGNAL), 0);
  }
  for (int i = 0; i < 4; ++i) {
    int extra = ConnectFrom(s->address(), "127.0.0.2");
    EXPECT_THAT(ReadUntilClosed(extra, absl::Seconds(30)), HasSubstr("too many HTTP connections from your address"));
    close(extra);
  }
  EXPECT_EQ(s->ConnectionStats().refused_peer_cap, 4);
  httplib::Client client("http://" + s->address());
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto me = client.Get("/api/v1/whoami", {{"Authorization", "Bearer good"}});
  ASSERT_TRUE(me);
  EXPECT_EQ(me->status, 200);
  EXPECT_EQ(me->body, "alice");
  for (int fd : slow) close(fd);
  release.Notify();
}

// A flood of anonymous connections from many addresses: ones that never
// finish their request fill every place (and push each other out), then
// whole requests that hold their workers fill the anonymous share. A
// client with a token is still served.
TEST(HttpDoorTest, AFloodOfAnonymousConnectionsDoesNotKeepOutATokenHolder) {
  HttpOptions opt;
  opt.threads = 2;
  opt.max_log_streams = 0;
  opt.max_watchers = 0;
  opt.max_connections = 32;
  opt.max_connections_per_peer = 4;
  opt.trusted_reserve = 8;
  opt.header_timeout = absl::Seconds(120);
  absl::Notification release;
  auto s = ServeWithTokens(opt, &release);
  std::vector<int> flood;
  const std::string half = "GET /healthz HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 48; ++i) {
    flood.push_back(ConnectFrom(s->address(), Addr(2 + i / 4)));
    ASSERT_GT(send(flood.back(), half.data(), half.size(), MSG_NOSIGNAL), 0);
  }
  ASSERT_TRUE(WaitUntil([&] { return s->ConnectionStats().evicted_unfinished >= 16; }, absl::Seconds(60)));
  const std::string slow = "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n";
  for (int i = 0; i < 32; ++i) {
    flood.push_back(ConnectFrom(s->address(), Addr(20 + i / 4)));
    ASSERT_GT(send(flood.back(), slow.data(), slow.size(), MSG_NOSIGNAL), 0);
  }
  // Past the anonymous share (32 - 8), whole anonymous requests are refused.
  ASSERT_TRUE(WaitUntil([&] { return s->ConnectionStats().refused_anonymous > 0; }, absl::Seconds(60)));
  httplib::Client client("http://" + s->address());
  client.set_read_timeout(60, 0);
  auto me = client.Get("/api/v1/whoami", {{"Authorization", "Bearer good"}});
  ASSERT_TRUE(me);
  EXPECT_EQ(me->status, 200);
  EXPECT_EQ(me->body, "alice");
  EXPECT_GE(s->ConnectionStats().trusted_requests, 1);
  release.Notify();
  for (int fd : flood) close(fd);
}

}  // namespace
}  // namespace trainyard::server::http
