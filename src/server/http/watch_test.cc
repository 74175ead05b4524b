// GET /api/v1/watch over a real socket: an event per topic on connect, one
// when a topic's views change, bursts coalesced, unknown topics refused,
// and watchers bounded.
#include "server/http/watch.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "common/wait_until.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

struct WatchFixture {
  ViewStore views;
  std::unique_ptr<HttpServer> server;

  explicit WatchFixture(HttpOptions opt = {}) {
    auto s = HttpServer::Bind(opt);
    EXPECT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
    AddWatchRoute(*server, &views);
    server->Serve();
  }
  void PutJob(const std::string& name, v1::JobState state) {
    auto v = std::make_shared<v1::JobView>();
    v->set_name(name);
    v->set_state(state);
    views.PutJob(name, ViewStore::JobEntry{.view = v});
  }
};

// A watch stream read on its own thread until Stop.
class Watch {
 public:
  Watch(const std::string& address, const std::string& query) {
    thread_ = std::thread([this, address, query] {
      httplib::Client client("http://" + address);
      client.set_read_timeout(30, 0);
      httplib::Result r = client.Get("/api/v1/watch" + query, [this](const char* d, size_t n) {
        absl::MutexLock lock(&mu_);
        text_.append(d, n);
        return !stop_;
      });
      absl::MutexLock lock(&mu_);
      status_ = r ? r->status : -1;
      body_ = r ? r->body : "";
      done_ = true;
    });
  }
  ~Watch() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  std::string Text() {
    absl::MutexLock lock(&mu_);
    return text_;
  }
  // The events so far: their topics and versions.
  std::vector<std::pair<std::string, int64_t>> Events() {
    std::vector<std::pair<std::string, int64_t>> out;
    std::string text = Text();
    size_t at = 0;
    while ((at = text.find("event: ", at)) != std::string::npos) {
      size_t nl = text.find('\n', at);
      size_t end = text.find("\n\n", nl);
      if (nl == std::string::npos || end == std::string::npos) break;
      std::string topic = text.substr(at + 7, nl - at - 7);
      auto data = nlohmann::json::parse(text.substr(nl + 7, end - nl - 7));  // after "data: "
      out.emplace_back(topic, data["version"].get<int64_t>());
      at = end;
    }
    return out;
  }
  bool WaitEvents(size_t n) {
    return WaitUntil([&] { return Events().size() >= n; });
  }
  // Waits until the last event says `version`.
  bool WaitLast(int64_t version) {
    return WaitUntil([&] {
      auto e = Events();
      return !e.empty() && e.back().second == version;
    });
  }
  bool Done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  int status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  std::string body() {
    absl::MutexLock lock(&mu_);
    return body_;
  }

 private:
  absl::Mutex mu_;
  std::string text_;
  std::string body_;
  int status_ = 0;
  bool done_ = false;
  bool stop_ = false;
  std::thread thread_;
};

TEST(WatchTest, EachTopicOnConnectThenOneEventPerChange) {
  WatchFixture f;
  f.PutJob("a", v1::JOB_RUNNING);
  Watch w(f.server->address(), "");
  ASSERT_TRUE(w.WaitEvents(3)) << w.Text();
  auto first = w.Events();
  std::set<std::string> topics;
  for (const auto& e : first) topics.insert(e.first);
  EXPECT_EQ(topics, (std::set<std::string>{"jobs", "nodes", "queues"}));
  EXPECT_EQ(first[0], std::make_pair(std::string("jobs"), f.views.CurrentVersions().jobs));
  EXPECT_THAT(w.Text(), HasSubstr("event: jobs\ndata: {\"version\": "));
  f.PutJob("a", v1::JOB_SUCCEEDED);
  ASSERT_TRUE(w.WaitEvents(4)) << w.Text();
  EXPECT_EQ(w.Events()[3], std::make_pair(std::string("jobs"), f.views.CurrentVersions().jobs));
}

TEST(WatchTest, ABurstOfChangesIsCoalescedAndOnlyWatchedTopicsCome) {
  WatchFixture f;
  Watch w(f.server->address(), "?topics=jobs");
  ASSERT_TRUE(w.WaitEvents(1)) << w.Text();
  absl::Time start = absl::Now();
  for (int i = 0; i < 200; ++i) f.PutJob(absl::StrCat("j", i), v1::JOB_QUEUED);
  int64_t last = f.views.CurrentVersions().jobs;
  ASSERT_TRUE(w.WaitLast(last)) << w.Text();
  absl::Duration took = absl::Now() - start;
  auto events = w.Events();
  // At most one event per 500 ms, whatever the number of changes.
  EXPECT_LE(static_cast<int64_t>(events.size()), 2 + absl::ToInt64Milliseconds(took) / 500) << w.Text();
  for (const auto& e : events) EXPECT_EQ(e.first, "jobs");
  // Nodes change: nothing for this watcher.
  f.views.PutNodes(std::make_shared<const std::vector<ViewStore::NodeEntry>>(
      std::vector<ViewStore::NodeEntry>{{.view = std::make_shared<v1::NodeView>()}}));
  f.PutJob("after", v1::JOB_QUEUED);
  ASSERT_TRUE(w.WaitLast(f.views.CurrentVersions().jobs));
  for (const auto& e : w.Events()) EXPECT_EQ(e.first, "jobs");
}

TEST(WatchTest, UnknownTopicsAndTooManyWatchersAreJsonErrors) {
  HttpOptions opt;
  opt.max_watchers = 1;
  WatchFixture f(opt);
  httplib::Client client("http://" + f.server->address());
  httplib::Result bad = client.Get("/api/v1/watch?topics=jobs,gpus");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("'gpus' is not one of jobs, nodes, queues"));
  Watch first(f.server->address(), "");
  ASSERT_TRUE(first.WaitEvents(3));
  httplib::Result second = client.Get("/api/v1/watch");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 503);
  EXPECT_THAT(second->body, HasSubstr("as many watchers as it serves"));
}

}  // namespace
}  // namespace trainyard::server::http
