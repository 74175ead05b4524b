// The service proxy and its links (service_proxy.h, server/service_links.h)
// over real sockets: a service (an HTTP server on a free port) behind the
// server's HTTP listener, reached with a link its owner asked for; what
// the service sees of the caller, what the caller sees of the service, and
// every refusal.
#include "server/http/service_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <vector>

#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/service_links.h"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using nlohmann::json;

class LinksBackend final : public RestBackend {
 public:
  explicit LinksBackend(ServiceLinks* links) : links_(links) {}
  ViewStore views;
  const ViewStore& Views() override { return views; }
  void Submit(const Principal&, const v1::SubmitRequest&, SubmitDone done) override {
    done(absl::UnimplementedError("test"));
  }
  absl::StatusOr<v1::JobState> Kill(const Principal&, const std::string&, const std::string&) override {
    return absl::UnimplementedError("test");
  }
  absl::StatusOr<v1::JobView> Describe(const std::string&) override { return absl::UnimplementedError("test"); }
  absl::StatusOr<v1::ServiceLinkResponse> ServiceLink(const Principal& who,
                                                      const v1::ServiceLinkRequest& req) override {
    return links_->Link(who, req);
  }
  absl::StatusOr<ServiceTarget> ResolveService(absl::string_view grant) override { return links_->Resolve(grant); }

 private:
  ServiceLinks* links_;
};

// What the service saw of the last request.
struct Seen {
  std::mutex mu;
  std::string method, target, body, authorization, cookie, prefix;
};

class ServiceProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/proxy-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    security_ = std::move(*security::ServerSecurity::Open({.data_dir = dir_}));
    links_ = std::make_unique<ServiceLinks>(
        security_.get(),
        [this](const std::string& name) -> std::shared_ptr<const v1::JobView> {
          std::optional<ViewStore::JobEntry> e = backend_->views.Job(name);
          return e ? e->view : nullptr;
        },
        &clock_, absl::Hours(1));
    backend_ = std::make_unique<LinksBackend>(links_.get());
    StartService();
    PutJob("train", 7, v1::TASK_RUNNING, service_port_);
    HttpOptions options;
    options.authenticate = [](absl::string_view authorization) -> absl::StatusOr<Principal> {
      if (authorization == "Bearer alice") return Principal{.user = "alice", .admin = false, .anonymous = false};
      if (authorization == "Bearer bob") return Principal{.user = "bob", .admin = false, .anonymous = false};
      if (authorization == "Bearer root") return Principal{.user = "root", .admin = true, .anonymous = false};
      return absl::UnauthenticatedError("no such token");
    };
    options.proxied_prefix = kServiceProxyPrefix;
    options.threads = 2;  // one for requests without a token
    options.max_proxied = 4;
    server_ = std::move(*HttpServer::Bind(options));
    proxy_ = ServiceProxy::Add(*server_, backend_.get(),
                               {.connect_timeout = absl::Seconds(5), .timeout = absl::Seconds(5),
                                .total_timeout = absl::Seconds(20), .max_answer_bytes = 1 << 20});
    server_->Handle("GET", "/ping", "/ping",
                    [](const httplib::Request&, httplib::Response& res, const Principal&) { res.set_content("pong", "text/plain"); });
    server_->Serve();
    int port = std::stoi(server_->address().substr(server_->address().rfind(':') + 1));
    links_->SetListener("http", "", port);
    client_ = std::make_unique<httplib::Client>("http://" + server_->address());
  }

  void TearDown() override {
    release_.Notify();
    proxy_->Stop();
    server_->Stop();
    service_.stop();
    if (service_thread_.joinable()) service_thread_.join();
    std::filesystem::remove_all(dir_);
  }

  void StartService() {
    auto record = [this](const httplib::Request& req) {
      std::lock_guard<std::mutex> lock(seen_.mu);
      seen_.method = req.method;
      seen_.target = req.target;
      seen_.body = req.body;
      seen_.authorization = req.get_header_value("Authorization");
      seen_.cookie = req.get_header_value("Cookie");
      seen_.prefix = req.get_header_value("X-Forwarded-Prefix");
    };
    service_.Get("/echo.*", [record](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.set_header("Set-Cookie", "session=service; Path=/");
      res.set_content("hello from the service", "text/plain");
    });
    service_.Post("/echo", [record](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.status = 201;
      res.set_content(req.body, "application/octet-stream");
    });
    service_.Get("/login", [](const httplib::Request&, httplib::Response& res) {
      res.status = 302;
      res.set_header("Location", "/home");
    });
    service_.Get("/prefixed", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 303;
      res.set_header("Location", req.get_header_value("X-Forwarded-Prefix") + "/there");
    });
    service_.Get("/slow", [this](const httplib::Request&, httplib::Response& res) {
      slow_.fetch_add(1);
      release_.WaitForNotificationWithTimeout(absl::Seconds(60));
      res.set_content("late", "text/plain");
    });
    service_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(2 << 20, 'x'), "text/plain");
    });
    service_port_ = service_.bind_to_any_port("127.0.0.1");
    service_thread_ = std::thread([this] { service_.listen_after_bind(); });
    ASSERT_TRUE(service_.is_valid());
  }

  // Job `name` (id `id`, alice's): worker 0 a plain task, board 0 its service
  // at 127.0.0.1:`port` in `state`.
  void PutJob(const std::string& name, uint64_t id, v1::TaskState state, int port) {
    auto job = std::make_shared<v1::JobView>();
    job->set_name(name);
    job->set_id(id);
    job->set_user("alice");
    job->set_state(v1::JOB_RUNNING);
    v1::TaskView* w = job->add_tasks();
    w->set_name(name + "-worker-0");
    w->set_role("worker");
    w->set_state(v1::TASK_RUNNING);
    w->set_node("n1");
    w->set_node_address("127.0.0.1");
    v1::PortRange* wp = w->add_ports();
    wp->set_begin(1);
    wp->set_end(1);
    v1::TaskView* b = job->add_tasks();
    b->set_name(name + "-board-0");
    b->set_role("board");
    b->set_service(true);
    b->set_state(state);
    b->set_node("n1");
    b->set_node_address("127.0.0.1");
    v1::PortRange* p = b->add_ports();
    p->set_begin(port);
    p->set_end(port);
    backend_->views.PutJob(name, ViewStore::JobEntry{job});
  }

  // POST the link route as `token` for `body`: status and JSON.
  std::pair<int, json> Link(const std::string& job, const std::string& token, const std::string& body = "") {
    auto r = client_->Post(absl::StrCat("/api/v1/jobs/", job, "/service-link").c_str(),
                           {{"Authorization", "Bearer " + token}}, body, "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  std::string dir_;
  FakeClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<security::ServerSecurity> security_;
  std::unique_ptr<ServiceLinks> links_;
  std::unique_ptr<LinksBackend> backend_;
  std::unique_ptr<HttpServer> server_;
  std::shared_ptr<ServiceProxy> proxy_;
  std::unique_ptr<httplib::Client> client_;
  absl::Notification release_;
  std::atomic<int> slow_{0};
  httplib::Server service_;
  std::thread service_thread_;
  int service_port_ = 0;
  Seen seen_;
};

TEST_F(ServiceProxyTest, TheOwnersLinkReachesTheServiceWithoutTheCallersTokenOrCookiesInASandbox) {
  auto [status, link] = Link("train", "alice");
  ASSERT_EQ(status, 200) << link.dump();
  std::string path = link["path"];
  EXPECT_THAT(path, StartsWith("/proxy/"));
  EXPECT_TRUE(absl::EndsWith(path, "/"));
  EXPECT_EQ(link["port"], service_port_);
  EXPECT_EQ(link["expires_unix_ms"], int64_t{1'800'003'600} * 1000);

  auto r = client_->Get((path + "echo?x=1&y=%2F").c_str(), {{"Authorization", "Bearer alice"}, {"Cookie", "a=b"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello from the service");
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain");
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), StartsWith("sandbox "));
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), Not(HasSubstr("allow-same-origin")));
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(r->get_header_value("Referrer-Policy"), "no-referrer");
  EXPECT_FALSE(r->has_header("Set-Cookie"));
  {
    std::lock_guard<std::mutex> lock(seen_.mu);
    EXPECT_EQ(seen_.method, "GET");
    EXPECT_EQ(seen_.target, "/echo?x=1&y=%2F");  // the prefix taken off, the query as sent
    EXPECT_EQ(seen_.authorization, "");
    EXPECT_EQ(seen_.cookie, "");
    EXPECT_EQ(seen_.prefix + "/", path);
  }
  auto post = client_->Post((path + "echo").c_str(), "some body", "application/octet-stream");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 201);
  EXPECT_EQ(post->body, "some body");
}

TEST_F(ServiceProxyTest, ThePathGoesOnAsTheCallerWroteIt) {
  std::string path = Link("train", "alice").second["path"];
  auto r = client_->Get((path + "echo/a%20b%3Fc%2Fd?q=%2F%20").c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  {
    std::lock_guard<std::mutex> lock(seen_.mu);
    EXPECT_EQ(seen_.target, "/echo/a%20b%3Fc%2Fd?q=%2F%20");
  }
  // The prefix as the link gave it, not encoded (the door queues proxied
  // requests by their target as sent).
  auto encoded = client_->Get(("/%70roxy/" + path.substr(7) + "echo").c_str());
  ASSERT_TRUE(encoded);
  EXPECT_EQ(encoded->status, 400);
  EXPECT_THAT(encoded->body, HasSubstr("not percent-encoded"));
}

TEST_F(ServiceProxyTest, SlowServicesHoldNoneOfTheThreadsOtherRequestsNeedAndStopEndsThem) {
  std::string path = Link("train", "alice").second["path"];
  // As many slow requests as the proxy serves at once, and one more that
  // waits its turn; none of them a token's, as a browser's.
  std::vector<std::future<int>> slow;
  for (int i = 0; i < 5; ++i) {
    slow.push_back(std::async(std::launch::async, [this, path] {
      httplib::Client c("http://" + server_->address());
      c.set_read_timeout(60, 0);
      auto r = c.Get((path + "slow").c_str());
      return r ? r->status : 0;
    }));
  }
  ASSERT_TRUE(WaitUntil([&] { return slow_.load() == 4; }, absl::Seconds(30))) << slow_.load();
  // Requests without a token are still served, by the threads of their own.
  auto ping = client_->Get("/ping");
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->body, "pong");
  EXPECT_EQ(Link("train", "alice").first, 200);
  // Stopping ends the requests waiting for the service at once.
  proxy_->Stop();
  for (auto& f : slow) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    int status = f.get();
    EXPECT_TRUE(status == 502 || status == 503 || status == 504) << status;
  }
}

TEST_F(ServiceProxyTest, AddressesOnTheServicesRootStayUnderTheLink) {
  std::string path = Link("train", "alice").second["path"];
  auto bare = client_->Get(path.substr(0, path.size() - 1).c_str());
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 308);
  EXPECT_EQ(bare->get_header_value("Location"), path);
  auto login = client_->Get((path + "login").c_str());
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 302);
  EXPECT_EQ(login->get_header_value("Location"), path + "home");
  // One the service put under its prefix itself (X-Forwarded-Prefix) stays.
  auto already = client_->Get((path + "prefixed").c_str());
  ASSERT_TRUE(already);
  EXPECT_EQ(already->get_header_value("Location"), path + "there");
  // A sandboxed page's preflight is answered by the proxy.
  auto pre = client_->Options((path + "echo").c_str(), {{"Origin", "null"},
                                                        {"Access-Control-Request-Method", "POST"},
                                                        {"Access-Control-Request-Headers", "content-type"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "content-type");
}

TEST_F(ServiceProxyTest, OnlyTheOwnerOrAnAdminGetsALinkAndOnlyToARunningService) {
  EXPECT_EQ(Link("train", "root").first, 200);
  auto [bob, why] = Link("train", "bob");
  EXPECT_EQ(bob, 403);
  EXPECT_THAT(why["error"]["message"].get<std::string>(), HasSubstr("only its owner or a cluster admin"));
  EXPECT_EQ(Link("train", "nobody").first, 401);
  EXPECT_EQ(Link("nope", "alice").first, 404);
  auto [worker, not_service] = Link("train", "alice", R"({"role": "worker", "index": 0})");
  EXPECT_EQ(worker, 404);
  EXPECT_THAT(not_service["error"]["message"].get<std::string>(), HasSubstr("is not a service"));
  EXPECT_EQ(Link("train", "alice", R"({"role": "board", "index": 1})").first, 404);
  EXPECT_EQ(Link("train", "alice", R"({"index": "x"})").first, 400);
  EXPECT_EQ(Link("train", "alice", R"({"role": "board", "index": 0})").first, 200);
  PutJob("train", 7, v1::TASK_PENDING, service_port_);
  auto [pending, msg] = Link("train", "alice");
  EXPECT_EQ(pending, 409);
  EXPECT_THAT(msg["error"]["message"].get<std::string>(), HasSubstr("once it runs"));
}

TEST_F(ServiceProxyTest, ALinkStopsWorkingWhenItExpiresIsChangedOrItsJobIsGoneOrReplaced) {
  std::string path = Link("train", "alice").second["path"];
  auto get = [&](const std::string& p) {
    auto r = client_->Get((p + "echo").c_str());
    return r ? r->status : 0;
  };
  EXPECT_EQ(get(path), 200);
  std::string changed = path;
  changed[7] = changed[7] == '7' ? '8' : '7';  // the job id's digit
  EXPECT_EQ(get(changed), 403);
  PutJob("train", 7, v1::TASK_FAILED, service_port_);
  EXPECT_EQ(get(path), 503);
  PutJob("train", 8, v1::TASK_RUNNING, service_port_);  // another job of the same name
  EXPECT_EQ(get(path), 404);
  PutJob("train", 7, v1::TASK_RUNNING, service_port_);
  EXPECT_EQ(get(path), 200);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(get(path), 403);
}

TEST_F(ServiceProxyTest, AServiceThatDoesNotAnswerOrAnswersTooMuchIsABadGateway) {
  std::string path = Link("train", "alice").second["path"];
  auto big = client_->Get((path + "big").c_str());
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 503);
  EXPECT_THAT(big->body, HasSubstr("more than 1 MiB"));
  // A port nobody listens on: bound for a moment, then closed.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  PutJob("train", 7, v1::TASK_RUNNING, ntohs(addr.sin_port));
  auto down = client_->Get((path + "echo").c_str());
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 502);
  EXPECT_THAT(down->body, HasSubstr("could not be reached"));
  EXPECT_THAT(down->body, HasSubstr("train-board-0"));
}

}  // namespace
}  // namespace trainyard::server::http
