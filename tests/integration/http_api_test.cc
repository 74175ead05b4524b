// The server's HTTP API through real processes: the REST API against the
// gRPC API it mirrors (the same jobs, the same refusals), its JSON errors,
// what jobs, nodes and queues show of a placed job, and the limits that
// keep a stranger's request from hurting the server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "api/malformed_specs_testing.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/service.grpc.pb.h"
#include "tests/integration/grpc_client.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kHttpApiTwoGpus[] = R"(name: pair
user: ana
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi, gpus: 2}
    command: [sleep, '300']
)";

std::unique_ptr<v1::Trainyard::Stub> Stub(const Cluster& c) {
  return v1::Trainyard::NewStub(grpc::CreateChannel(c.address(), ClientCredentials()));
}

grpc::Status GrpcSubmit(const Cluster& c, const std::string& yaml, v1::SubmitResponse* resp) {
  v1::SubmitRequest req;
  req.set_yaml(yaml);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", AdminAuthorization());
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return Stub(c)->Submit(&ctx, req, resp);
}

// The job's task of `role` (its job master is a task too).
nlohmann::json TaskOf(const nlohmann::json& job, const std::string& role) {
  for (const auto& t : job["tasks"]) {
    if (t["role"] == role) return t;
  }
  return nlohmann::json();
}

// The fields of a job that its spec decides (not its name, id or times).
nlohmann::json SpecPart(nlohmann::json job) {
  nlohmann::json out = {{"user", job["user"]},           {"queue", job["queue"]},
                        {"priority", job["priority"]},   {"framework", job["framework"]},
                        {"gpus", job["gpus"]},           {"tasks", nlohmann::json::array()}};
  for (auto& t : job["tasks"]) {
    out["tasks"].push_back({{"role", t["role"]},
                            {"index", t["index"]},
                            {"worker_id", t["worker_id"]},
                            {"memory_mb", t["memory_mb"]},
                            {"vcores_milli", t["vcores_milli"]},
                            {"gpu_count", t["gpus"].size()}});
  }
  return out;
}

TEST(HttpApiTest, SubmitThroughRestAndGrpcGivesTheSameJob) {
  Cluster c({.nodes = 2});
  ASSERT_TRUE(c.WaitNodesReady(2));
  v1::SubmitResponse by_grpc;
  grpc::Status st = GrpcSubmit(c, kHttpApiTwoGpus, &by_grpc);
  ASSERT_TRUE(st.ok()) << st.error_message();
  HttpResult by_rest = HttpPost(c.http_address(), "/api/v1/jobs", kHttpApiTwoGpus, "application/yaml");
  ASSERT_EQ(by_rest.status, 201) << by_rest.body;
  EXPECT_EQ(by_grpc.job(), "pair");
  EXPECT_EQ(by_rest.json["job"], "pair-2");  // the same naming: a free name after the first
  EXPECT_EQ(by_rest.json["id"].get<uint64_t>(), by_grpc.job_id() + 1);
  // JSON {"yaml": ...} is the same request as the YAML body.
  HttpResult as_json = HttpPost(c.http_address(), "/api/v1/jobs", nlohmann::json({{"yaml", kHttpApiTwoGpus}}).dump(),
                                "application/json");
  ASSERT_EQ(as_json.status, 201) << as_json.body;
  EXPECT_EQ(as_json.json["job"], "pair-3");

  for (const std::string job : {"pair", "pair-2"}) ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << job;
  HttpResult a = HttpGet(c.http_address(), "/api/v1/jobs/pair");
  HttpResult b = HttpGet(c.http_address(), "/api/v1/jobs/pair-2");
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(SpecPart(a.json), SpecPart(b.json)) << a.body << "\n" << b.body;
  EXPECT_EQ(a.json["user"], "ana");
  // The job submitted over REST is the one gRPC describes.
  nlohmann::json described = c.Describe("pair-2");
  EXPECT_EQ(described["id"], by_rest.json["id"]);
  for (const auto& t : described["tasks"]) EXPECT_EQ(t["node"], TaskOf(b.json, t["role"])["node"]) << t.dump();
}

TEST(HttpApiTest, ASpecIsRefusedWithTheSameMessageAsOverGrpc) {
  Cluster c({.nodes = 1, .server_flags = {"--max-gpus", "4"}});
  auto specs = api::testing::MalformedSpecs();
  specs.push_back({"too many GPUs", "name: big\nreplicas:\n  worker: {resources: {gpus: 8}, command: [true]}\n"});
  specs.push_back({"no queue", "name: lost\nqueue: nowhere\nreplicas:\n  worker: {command: [true]}\n"});
  for (const auto& [name, text] : specs) {
    v1::SubmitResponse resp;
    grpc::Status st = GrpcSubmit(c, text, &resp);
    ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
    HttpResult r = HttpPost(c.http_address(), "/api/v1/jobs", text, "application/yaml");
    // A body above the HTTP cap (2 x maxSpecBytes + 64 KiB) is refused
    // unread, where gRPC reads it and refuses it by its size.
    if (text.size() > 2 * (1u << 20) + (64u << 10)) {
      EXPECT_EQ(r.status, 413) << name;
      EXPECT_THAT(st.error_message(), HasSubstr("maxSpecBytes")) << name;
      continue;
    }
    EXPECT_EQ(r.status, 400) << name << ": " << r.body;
    EXPECT_EQ(r.json["error"]["status"], "INVALID_ARGUMENT") << name;
    // Word for word (bytes that are not UTF-8, quoted from the spec, are
    // replaced in JSON).
    nlohmann::json grpc_message = nlohmann::json::parse(
        nlohmann::json(st.error_message()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    EXPECT_EQ(r.json["error"]["message"], grpc_message) << name;
    ASSERT_TRUE(c.server().Running()) << name;
  }
}

TEST(HttpApiTest, BadRequestsAreAnsweredWithJsonNamingTheProblem) {
  Cluster c({.nodes = 1});
  struct Case {
    std::string path;
    int status;
    std::string message;
  };
  std::vector<Case> cases = {
      {"/api/v1/jobs?state=FLYING", 400, "state: 'FLYING' is not one of QUEUED, SCHEDULED"},
      {"/api/v1/jobs?queue=nowhere", 400, "queue: there is no queue 'nowhere' (queues: default)"},
      {"/api/v1/jobs?colour=red", 400, "colour: not a filter of /api/v1/jobs"},
      {"/api/v1/jobs?all=maybe", 400, "all: 'maybe' is not true or false"},
      {"/api/v1/jobs/nosuch", 404, "job 'nosuch' does not exist"},
      {"/api/v1/nodes/nosuch", 404, "node 'nosuch' is not known"},
      {"/api/v1/nothing", 404, "no such resource"},
  };
  for (const Case& k : cases) {
    HttpResult r = HttpGet(c.http_address(), k.path);
    EXPECT_EQ(r.status, k.status) << k.path << ": " << r.body;
    EXPECT_EQ(r.json["error"]["code"], k.status) << k.path << ": " << r.body;
    EXPECT_THAT(r.json["error"].value("message", ""), HasSubstr(k.message)) << k.path;
  }
  HttpResult kill = HttpPost(c.http_address(), "/api/v1/jobs/nosuch/kill", "", "application/json");
  EXPECT_EQ(kill.status, 404) << kill.body;
  EXPECT_THAT(kill.json["error"].value("message", ""), HasSubstr("nosuch"));
  HttpResult not_json = HttpPost(c.http_address(), "/api/v1/jobs", "{nope", "application/json");
  EXPECT_EQ(not_json.status, 400) << not_json.body;
  EXPECT_THAT(not_json.json["error"].value("message", ""), HasSubstr("body: not a JSON object"));
  // A body far above the spec cap (1 MiB by default) is refused unread.
  HttpResult huge = HttpPost(c.http_address(), "/api/v1/jobs", std::string(8 << 20, 'x'), "application/yaml");
  EXPECT_EQ(huge.status, 413) << huge.body.substr(0, 200);
  // Above maxSpecBytes but within the body cap: the same words as gRPC's.
  HttpResult big = HttpPost(c.http_address(), "/api/v1/jobs", std::string((1 << 20) + 10, '#'), "application/yaml");
  EXPECT_EQ(big.status, 400) << big.body.substr(0, 200);
  EXPECT_THAT(big.json["error"].value("message", ""), HasSubstr("maxSpecBytes"));
}

TEST(HttpApiTest, APlacedJobShowsItsTasksNodesGpusAndQueueUse) {
  Cluster c({.nodes = 2});
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string job = c.Submit(kHttpApiTwoGpus);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  HttpResult j = HttpGet(c.http_address(), "/api/v1/jobs/" + job);
  ASSERT_EQ(j.status, 200) << j.body;
  const nlohmann::json task = TaskOf(j.json, "worker");
  ASSERT_TRUE(task.is_object()) << j.body;
  std::string node = task["node"];
  EXPECT_THAT(node, HasSubstr("node-"));
  EXPECT_EQ(task["state"], "RUNNING");
  EXPECT_THAT(task["gpus"], SizeIs(2));
  EXPECT_EQ(task["restarts"], 0);
  EXPECT_THAT(j.json["events"].dump(), HasSubstr(node + " ("));  // "scheduled on node-1 (1 task)"
  EXPECT_EQ(task["last_exit"], nullptr);  // it has not ended

  // The node's bitmap: exactly the task's GPUs are used, held by the task.
  // Node views are published a moment after the jobs' (at most every few ms,
  // later under load): it is read once it shows the placement.
  HttpResult n;
  ASSERT_TRUE(WaitUntil(
      [&] {
        n = HttpGet(c.http_address(), "/api/v1/nodes/" + node);
        return n.status == 200 && n.json.value("allocated_gpus", 0) == 2;
      },
      absl::Seconds(30), absl::Milliseconds(50)))
      << n.body;
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.json["state"], "READY");
  EXPECT_EQ(n.json["allocated_gpus"], 2);
  EXPECT_THAT(n.json["free_gpus"], SizeIs(6));
  for (const auto& gpu : n.json["gpus"]) {
    bool held = std::find(task["gpus"].begin(), task["gpus"].end(), gpu["index"]) != task["gpus"].end();
    EXPECT_EQ(gpu["state"], held ? "used" : "free") << gpu.dump();
    EXPECT_EQ(gpu["task"], held ? task["name"].get<std::string>() : "") << gpu.dump();
  }
  EXPECT_THAT(n.json["topology"]["switches"], SizeIs(4));  // the harness's switches=0-1,2-3,4-5,6-7

  HttpResult q = HttpGet(c.http_address(), "/api/v1/queues");
  ASSERT_EQ(q.status, 200) << q.body;
  const nlohmann::json& queue = q.json["queues"][0];
  EXPECT_EQ(queue["name"], "default");
  EXPECT_EQ(queue["used"]["gpus"], 2);
  ASSERT_THAT(queue["users"], SizeIs(1)) << q.body;
  EXPECT_EQ(queue["users"][0]["user"], "ana");
  EXPECT_EQ(queue["users"][0]["used"]["gpus"], 2);
  EXPECT_EQ(q.json["cluster"]["gpus"], 16);

  HttpResult listed = HttpGet(c.http_address(), "/api/v1/jobs?user=ana&state=running");
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_THAT(listed.json["jobs"], SizeIs(1));
  EXPECT_EQ(listed.json["jobs"][0]["name"], job);
  EXPECT_FALSE(listed.json["jobs"][0].contains("events"));  // a listing is without events
  EXPECT_THAT(HttpGet(c.http_address(), "/api/v1/jobs?user=bob").json["jobs"], SizeIs(0));

  HttpResult killed = HttpPost(c.http_address(), "/api/v1/jobs/" + job + "/kill", R"({"reason":"test"})",
                               "application/json");
  ASSERT_EQ(killed.status, 200) << killed.body;
  EXPECT_EQ(killed.json["state"], "KILLED");
  EXPECT_THAT(HttpGet(c.http_address(), "/api/v1/jobs?state=RUNNING").json["jobs"], SizeIs(0));
  EXPECT_THAT(HttpGet(c.http_address(), "/api/v1/jobs?state=KILLED").json["jobs"], SizeIs(1));
}

// A raw TCP connection to host:port, from the loopback address `from`
// ("" : any; each of 127.0.0.0/8 is a peer of its own to the server).
int Connect(const std::string& address, const std::string& from = "") {
  size_t colon = address.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  if (!from.empty() && (inet_pton(AF_INET, from.c_str(), &local.sin_addr) != 1 ||
                        bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0)) {
    close(fd);
    return -1;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True when the server has closed `fd` (EOF or reset), reading what it sent
// into `got`; false while it is open and quiet.
bool ClosedByServer(int fd, std::string* got) {
  char buf[4096];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      got->append(buf, n);
      continue;
    }
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

TEST(HttpApiTest, ClientsThatHoldConnectionsOrDripBytesDoNotStallTheServer) {
  TempDir dir;
  WriteFile(dir.path() + "/server.yaml",
            "httpThreads: 2\nhttpMaxConnections: 16\nhttpMaxConnectionsPerPeer: 4\nhttpHeaderTimeoutMs: 1000\n");
  Cluster c({.nodes = 1, .server_flags = {"--config", dir.path() + "/server.yaml"}});
  // From one address, four connections: two send half a request and stop,
  // one sends headers without end, one sends nothing.
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    int fd = Connect(c.http_address(), "127.0.0.2");
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  const std::string half = "GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n";
  ASSERT_GT(send(held[0], half.data(), half.size(), MSG_NOSIGNAL), 0);
  ASSERT_GT(send(held[1], half.data(), half.size(), MSG_NOSIGNAL), 0);
  // One more from that address is told at once that it has its share.
  int extra = Connect(c.http_address(), "127.0.0.2");
  ASSERT_GE(extra, 0);
  std::string refused;
  ASSERT_TRUE(WaitUntil([&] { return ClosedByServer(extra, &refused); }, absl::Seconds(30)));
  EXPECT_THAT(refused, HasSubstr("503 Service Unavailable"));
  EXPECT_THAT(refused, HasSubstr("from your address"));
  close(extra);
  std::string endless = "GET / HTTP/1.1\r\n";
  while (endless.size() < (256 << 10)) endless += "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
  ssize_t sent = send(held[2], endless.data(), endless.size(), MSG_NOSIGNAL);
  (void)sent;  // the server may cut it off before all of it is taken
  // Everyone else is served meanwhile: gRPC, /healthz, and REST with a token.
  CommandResult jobs = c.Cli({"jobs"});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  HttpResult health = HttpGet(c.http_address(), "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  HttpResult listed = HttpGet(c.http_address(), "/api/v1/jobs");
  EXPECT_EQ(listed.status, 200) << listed.body;
  // Each held connection is cut off: by the head's deadline (1 s) or the
  // byte cap on a head.
  for (int i = 0; i < 4; ++i) {
    std::string got;
    EXPECT_TRUE(WaitUntil([&] { return ClosedByServer(held[i], &got); }, absl::Seconds(30))) << "connection " << i;
    close(held[i]);
  }
  // ...and counted.
  HttpResult metrics = HttpGet(c.http_address(), "/metrics");
  EXPECT_THAT(MetricSample(metrics.body, "trainyard_http_connections_refused_total{reason=\"peer_cap\"}"),
              ::testing::Optional(1.0));
  EXPECT_THAT(MetricSample(metrics.body, "trainyard_http_connections_timed_out_total{phase=\"header\"}"),
              ::testing::Optional(::testing::Ge(2.0)));
  EXPECT_TRUE(c.server().Running());
}

// A POST without Content-Length or Transfer-Encoding has an empty body
// (RFC 9112) and gets its route's own answer: before, the server waited
// for a body until its request deadline and answered 400.
TEST(HttpApiTest, APostWithoutABodyGetsItsRoutesOwnAnswer) {
  TempDir dir;
  // Long enough that waiting for a body could not end before the test does.
  WriteFile(dir.path() + "/server.yaml", "httpRequestTimeoutMs: 300000\nhttpBodyTimeoutMs: 300000\n");
  Cluster c({.nodes = 1, .server_flags = {"--config", dir.path() + "/server.yaml"}});
  std::string job = c.Submit(kHttpApiTwoGpus);
  ASSERT_FALSE(job.empty());
  // The raw request, as curl -X POST sends it (no Content-Length).
  auto post = [&](const std::string& path) {
    int fd = Connect(c.http_address());
    std::string req = absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nAuthorization: ", AdminAuthorization(),
                                   "\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    std::string got;
    EXPECT_TRUE(WaitUntil([&] { return ClosedByServer(fd, &got); }, absl::Seconds(60))) << "no answer to " << path;
    close(fd);
    return got;
  };
  std::string killed = post("/api/v1/jobs/" + job + "/kill");
  EXPECT_THAT(killed, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(killed, HasSubstr("KILLED"));
  std::string no_spec = post("/api/v1/jobs");
  EXPECT_THAT(no_spec, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(no_spec, HasSubstr("spec: is empty"));
}

}  // namespace
}  // namespace trainyard::testing
