// SharedAnswers as a client sees it: one rendering for many requests, a
// stale mark after a change, a new answer after max_age or when asked, and
// gzip made once.
#include "server/http/shared_answers.h"

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "common/wait_until.h"
#include "server/http/http_server.h"

namespace trainyard::server::http {
namespace {

struct SharedAnswersFixture {
  explicit SharedAnswersFixture(absl::Duration max_age = absl::Seconds(60)) : shared(&views, max_age) { Start(); }
  ViewStore views;
  SharedAnswers shared;
  std::atomic<int> renders{0};
  std::unique_ptr<HttpServer> server;
  void Start() {
    server = std::move(*HttpServer::Bind(HttpOptions{}));
    server->Handle("GET", "/list", "/list", [this](const httplib::Request& req, httplib::Response& res, const Principal&) {
      shared.Serve("/list", req, res, [this] {
        int n = ++renders;
        return nlohmann::json{{"render", n}, {"padding", std::string(5000, 'x')}};
      });
    });
    server->Serve();
  }
  ~SharedAnswersFixture() { server->Stop(); }
  httplib::Result Get(const httplib::Headers& headers = {}) {
    httplib::Client client("http://" + server->address());
    client.set_decompress(false);
    return client.Get("/list", headers);
  }
};

void SharedAnswersPutJob(ViewStore& views, uint64_t id) {
  auto v = std::make_shared<v1::JobView>();
  v->set_name(absl::StrCat("j", id));
  v->set_id(id);
  views.PutJob(v->name(), ViewStore::JobEntry{.view = v});
}

TEST(SharedAnswersTest, ManyRequestsWithinMaxAgeCostOneRendering) {
  SharedAnswersFixture f;
  for (int i = 0; i < 5; ++i) {
    auto r = f.Get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(nlohmann::json::parse(r->body)["render"], 1);
    EXPECT_FALSE(r->has_header("X-Trainyard-Stale"));
  }
  EXPECT_EQ(f.renders, 1);
  EXPECT_EQ(f.shared.made(), 1);
}

TEST(SharedAnswersTest, RequestsThatComeWhileOneIsMadeWaitForIt) {
  ViewStore views;
  SharedAnswers shared(&views, absl::Seconds(10));
  std::atomic<int> renders{0};
  auto server = std::move(*HttpServer::Bind(HttpOptions{}));
  server->Handle("GET", "/slow", "/slow", [&](const httplib::Request& req, httplib::Response& res, const Principal&) {
    shared.Serve("/slow", req, res, [&] {
      ++renders;
      absl::SleepFor(absl::Milliseconds(200));  // a large cluster's list
      return nlohmann::json{{"ok", true}};
    });
  });
  server->Serve();
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&] {
      httplib::Client c("http://" + server->address());
      auto r = c.Get("/slow");
      if (r && r->status == 200 && r->body == R"({"ok":true})") ++ok;
    });
  }
  for (auto& t : clients) t.join();
  server->Stop();
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(renders, 1);
}

TEST(SharedAnswersTest, AfterAChangeTheKeptAnswerIsMarkedStale) {
  SharedAnswersFixture f;  // max_age 60 s: the second request comes well within it
  ASSERT_TRUE(f.Get());
  SharedAnswersPutJob(f.views, 1);  // the views change
  auto r = f.Get();
  ASSERT_TRUE(r);
  EXPECT_EQ(nlohmann::json::parse(r->body)["render"], 1);
  EXPECT_EQ(r->get_header_value("X-Trainyard-Stale"), "true");
}

TEST(SharedAnswersTest, PastMaxAgeANewOneIsMadeAfterTheChange) {
  SharedAnswersFixture f(absl::Milliseconds(200));
  ASSERT_TRUE(f.Get());
  SharedAnswersPutJob(f.views, 1);
  bool stale_mark = true;
  ASSERT_TRUE(WaitUntil([&] {
    auto r = f.Get();
    if (!r || nlohmann::json::parse(r->body)["render"] != 2) return false;
    stale_mark = r->has_header("X-Trainyard-Stale");
    return true;
  }, absl::Seconds(20)));
  EXPECT_FALSE(stale_mark);  // made after the change
}

TEST(SharedAnswersTest, NoCacheGetsOneMadeNow) {
  SharedAnswersFixture f;
  ASSERT_TRUE(f.Get());
  auto r = f.Get({{"Cache-Control", "no-cache"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(nlohmann::json::parse(r->body)["render"], 2);
}

TEST(SharedAnswersTest, GzipIsMadeOnceAndSentToWhoeverAcceptsIt) {
  SharedAnswersFixture f;
  auto plain = f.Get();
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->has_header("Content-Encoding"));
  for (int i = 0; i < 3; ++i) {
    auto gz = f.Get({{"Accept-Encoding", "gzip, deflate"}});
    ASSERT_TRUE(gz);
    EXPECT_EQ(gz->get_header_value("Content-Encoding"), "gzip");
    EXPECT_LT(gz->body.size(), plain->body.size() / 4);  // 5,000 x's compress well
    std::string out;
    httplib::detail::gzip_decompressor d;
    ASSERT_TRUE(d.decompress(gz->body.data(), gz->body.size(), [&](const char* p, size_t n) {
      out.append(p, n);
      return true;
    }));
    EXPECT_EQ(out, plain->body);
  }
  auto refused = f.Get({{"Accept-Encoding", "gzip;q=0"}});
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->has_header("Content-Encoding"));
  EXPECT_EQ(f.renders, 1);
}

}  // namespace
}  // namespace trainyard::server::http
