// A standby's HTTP door: callers are sent to the leader's HTTP API with the
// same path, query, method and body (a client that follows redirects lands
// there); while no leader's URL is known they are asked to come back;
// /healthz, /readyz and /metrics say it is a standby.
#include "server/http/standby_door.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "httpd/http_server.h"
#include "nlohmann/json.hpp"

namespace trainyard::server::http {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<StandbyDoor> OpenDoor() {
  absl::StatusOr<std::unique_ptr<StandbyDoor>> door = StandbyDoor::Open({.listen = "127.0.0.1:0"});
  EXPECT_TRUE(door.ok()) << door.status();
  return door.ok() ? std::move(*door) : nullptr;
}

std::string ErrorOf(const httplib::Result& r) {
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  return j.is_object() && j["error"].is_object() ? j["error"].value("message", "") : "";
}

TEST(StandbyDoorTest, SaysItIsAStandbyAndAsksCallersToComeBackUntilItKnowsTheLeadersUrl) {
  std::unique_ptr<StandbyDoor> door = OpenDoor();
  ASSERT_NE(door, nullptr);
  httplib::Client client("http://" + door->address());

  auto early = client.Get("/api/v1/jobs");
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 503);
  EXPECT_EQ(early->get_header_value("Retry-After"), "1");
  EXPECT_THAT(ErrorOf(early), HasSubstr("knows of no leader yet"));

  // The leader is known, its URL not yet (it still loads its state).
  door->SetLeader("10.0.0.1:7450", "");
  auto loading = client.Get("/");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_THAT(ErrorOf(loading), HasSubstr("the leader is 10.0.0.1:7450"));

  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "standby\n");
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("\ntrainyard_server_is_leader 0\n"));
  EXPECT_THAT(metrics->body, HasSubstr("trainyard_standby_leader_info{leader=\"10.0.0.1:7450\",url=\"\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("\ntrainyard_standby_since_timestamp_seconds "));

  // Won and loading: come back, whatever was known before.
  door->SetLeader("10.0.0.1:7450", "http://10.0.0.1:7451");
  door->SetTakingOver();
  auto taking = client.Get("/api/v1/overview");
  ASSERT_TRUE(taking);
  EXPECT_EQ(taking->status, 503);
  EXPECT_THAT(ErrorOf(taking), HasSubstr("taking over"));
}

TEST(StandbyDoorTest, SendsEveryOtherRequestToTheSamePlaceAtTheLeader) {
  std::unique_ptr<StandbyDoor> door = OpenDoor();
  ASSERT_NE(door, nullptr);
  door->SetLeader("10.0.0.1:7450", "https://10.0.0.1:7451");
  httplib::Client client("http://" + door->address());

  auto get = client.Get("/api/v1/jobs?state=RUNNING&limit=5");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 307);
  EXPECT_EQ(get->get_header_value("Location"), "https://10.0.0.1:7451/api/v1/jobs?state=RUNNING&limit=5");
  EXPECT_THAT(ErrorOf(get), HasSubstr("standby; the leader serves at https://10.0.0.1:7451"));
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE"}) {
    httplib::Request req;
    req.method = method;
    req.path = "/api/v1/jobs/a";
    req.body = "{}";
    req.set_header("Content-Type", "application/json");
    auto r = client.send(req);
    ASSERT_TRUE(r) << method;
    EXPECT_EQ(r->status, 307) << method;
    EXPECT_EQ(r->get_header_value("Location"), "https://10.0.0.1:7451/api/v1/jobs/a") << method;
  }
  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 307);
  EXPECT_EQ(page->get_header_value("Location"), "https://10.0.0.1:7451/");
  // Its own three routes stay its own.
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body,
              HasSubstr("trainyard_standby_leader_info{leader=\"10.0.0.1:7450\",url=\"https://10.0.0.1:7451\"} 1"));
}

TEST(StandbyDoorTest, AClientThatFollowsRedirectsGetsTheLeadersAnswerWithItsMethodAndBody) {
  auto leader = httpd::HttpServer::Bind({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(leader.ok()) << leader.status();
  (*leader)->Handle("POST", "/api/v1/jobs", "/api/v1/jobs", [](const httplib::Request& req, httplib::Response& res) {
    res.status = 201;
    res.set_content("leader took " + req.body, "text/plain");
  });
  (*leader)->Serve();
  std::unique_ptr<StandbyDoor> door = OpenDoor();
  ASSERT_NE(door, nullptr);
  door->SetLeader("127.0.0.1:7450", "http://" + (*leader)->address());

  httplib::Client client("http://" + door->address());
  client.set_follow_location(true);
  auto r = client.Post("/api/v1/jobs", "{\"spec\": \"x\"}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "leader took {\"spec\": \"x\"}");
}

}  // namespace
}  // namespace trainyard::server::http
