// The log routes over a fake backend whose readers play scripted chunks:
// ranges and their headers, query errors, the stream limit, and what the
// archive does with an attempt it cannot read.
#include "server/http/log_routes.h"

#include <zlib.h>

#include <deque>

#include "api/log_lines.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

class ScriptedReader final : public LogReader {
 public:
  explicit ScriptedReader(std::deque<LogRead> script) : script_(std::move(script)) {}
  LogRead Next(absl::Time) override {
    if (script_.empty()) return LogRead{.kind = LogRead::Kind::kEnd};
    LogRead r = std::move(script_.front());
    script_.pop_front();
    return r;
  }

 private:
  std::deque<LogRead> script_;
};

LogRead Data(const std::string& text, bool err, int64_t nanos, int attempt = 0) {
  LogRead r{.kind = LogRead::Kind::kChunk};
  r.chunk.set_task("j-worker-0");
  r.chunk.set_attempt(attempt);
  r.chunk.set_stderr(err);
  r.chunk.set_data(api::LogStamp(nanos) + text);
  return r;
}

LogRead OutputEnd(bool err) {
  LogRead r{.kind = LogRead::Kind::kChunk};
  r.chunk.set_task("j-worker-0");
  r.chunk.set_stderr(err);
  r.chunk.set_output_end(true);
  return r;
}

class LogRoutesFakeBackend final : public RestBackend {
 public:
  ViewStore views;
  std::vector<v1::LogsRequest> opened;
  const ViewStore& Views() override { return views; }
  void Submit(const Principal&, const v1::SubmitRequest&, SubmitDone done) override { done(absl::UnimplementedError("no")); }
  absl::StatusOr<v1::JobState> Kill(const Principal&, const std::string&, const std::string&) override {
    return absl::UnimplementedError("no");
  }
  absl::StatusOr<v1::JobView> Describe(const std::string&) override { return absl::UnimplementedError("no"); }
  absl::StatusOr<LogReaderPtr> OpenLogs(const Principal&, const v1::LogsRequest& req) override {
    opened.push_back(req);
    if (req.attempt() == 1) {  // on a node that is gone
      return LogReaderPtr(new ScriptedReader({LogRead{.kind = LogRead::Kind::kEnd,
                                                      .end = absl::UnavailableError("node n-1 is LOST")}}));
    }
    if (req.attempt() == 2) {
      return LogReaderPtr(new ScriptedReader({LogRead{.kind = LogRead::Kind::kEnd,
                                                      .end = absl::NotFoundError("has no attempt 2")}}));
    }
    return LogReaderPtr(new ScriptedReader({Data("out one\n", false, 1), Data("err two\n", true, 2),
                                            Data("out three\n", false, 3), OutputEnd(false), OutputEnd(true)}));
  }
};

struct Api {
  LogRoutesFakeBackend backend;
  std::unique_ptr<HttpServer> server;
  std::unique_ptr<httplib::Client> client;
  explicit Api(HttpOptions opt = {}) {
    auto job = std::make_shared<v1::JobView>();
    job->set_name("j");
    auto* t = job->add_tasks();
    t->set_name("j-worker-0");
    t->set_role("worker");
    t->set_index(0);
    t->set_attempt(2);
    backend.views.PutJob("j", ViewStore::JobEntry{.view = job});
    server = std::move(*HttpServer::Bind(opt));
    AddLogRoutes(*server, &backend);
    server->Serve();
    client = std::make_unique<httplib::Client>("http://" + server->address());
  }
};

TEST(LogRoutesTest, ARangeIsTheMergedTextFromOffsetUpToLimit) {
  Api api;
  auto all = api.client->Get("/api/v1/jobs/j/tasks/worker-0/logs?attempt=0");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(all->body, "out one\nerr two\nout three\n");
  EXPECT_EQ(all->get_header_value("X-Trainyard-More"), "false");
  auto part = api.client->Get("/api/v1/jobs/j/tasks/j-worker-0/logs?attempt=0&offset=8&limit=8");
  ASSERT_TRUE(part);
  EXPECT_EQ(part->body, "err two\n");
  EXPECT_EQ(part->get_header_value("X-Trainyard-Next-Offset"), "16");
  EXPECT_EQ(part->get_header_value("X-Trainyard-More"), "true");
  ASSERT_FALSE(api.backend.opened.empty());
  EXPECT_EQ(api.backend.opened.back().role(), "worker");
  EXPECT_FALSE(api.backend.opened.back().follow());
}

TEST(LogRoutesTest, BadQueriesAndUnreadableAttemptsAreJsonErrors) {
  Api api;
  for (const char* q : {"limit=0", "attempt=x", "follow=maybe", "colour=red"}) {
    auto r = api.client->Get(std::string("/api/v1/jobs/j/tasks/worker-0/logs?") + q);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << q;
    EXPECT_TRUE(nlohmann::json::parse(r->body)["error"]["message"].is_string()) << r->body;
  }
  auto lost = api.client->Get("/api/v1/jobs/j/tasks/worker-0/logs?attempt=1");
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->status, 503);
  EXPECT_THAT(lost->body, HasSubstr("node n-1 is LOST"));
}

TEST(LogRoutesTest, AFollowBeyondTheStreamSlotsIs503) {
  HttpOptions opt;
  opt.max_log_streams = 0;
  Api api(opt);
  auto r = api.client->Get("/api/v1/jobs/j/tasks/worker-0/logs?follow=1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(r->body, HasSubstr("log streams"));
  auto a = api.client->Get("/api/v1/jobs/j/logs.tar.gz");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 503);
}

TEST(LogRoutesTest, AFollowedAttemptStreamsItsPiecesAndEndsWithIt) {
  Api api;
  auto r = api.client->Get("/api/v1/jobs/j/tasks/worker-0/logs?follow=1&attempt=0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "out one\nerr two\nout three\n");
  EXPECT_TRUE(api.backend.opened.back().follow());
  EXPECT_EQ(api.backend.opened.back().attempt(), 0);
}

std::string Gunzip(const std::string& gz) {
  z_stream z{};
  inflateInit2(&z, 15 + 16);
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
  inflateEnd(&z);
  EXPECT_EQ(r, Z_STREAM_END);
  return out;
}

TEST(LogRoutesTest, TheArchiveHasEachReadableAttemptAndSaysWhichWereNot) {
  Api api;
  auto r = api.client->Get("/api/v1/jobs/j/logs.tar.gz");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  std::string tar = Gunzip(r->body);
  EXPECT_EQ(std::string(tar.data()), "j-worker-0/attempt-0.log");
  EXPECT_THAT(tar, HasSubstr("out one\nerr two\nout three\n"));
  EXPECT_THAT(tar, HasSubstr("MISSING.txt"));
  EXPECT_THAT(tar, HasSubstr("j-worker-0 attempt 1: node n-1 is LOST"));
  EXPECT_THAT(tar, ::testing::Not(HasSubstr("attempt-2.log")));  // it never ran
}

}  // namespace
}  // namespace trainyard::server::http
