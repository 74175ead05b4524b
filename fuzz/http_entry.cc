// The HTTP fuzz targets: bytes sent to the server's HTTP endpoint as a
// client sends them. One endpoint per process, made as the server makes it
// (httpd::HttpServer with the server's bearer-token check and every REST
// route, over a fake backend whose views hold one job, one node and one
// queue), serving on a loopback port with its own door and workers. Each
// input is sent on one new TCP connection, whose writing side then ends:
// the door's non-blocking reads, framing and byte caps, the library's
// request line, header and query parsing, the routes, the body and query
// parsers of the REST API all see it as a client's bytes. The request
// framing alone (request_frame.h, pure) is its own target, http_frame.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/job_spec.h"
#include "common/check.h"
#include "fuzz/entry_points.h"
#include "fuzz/fuzz_files.h"
#include "httpd/request_frame.h"
#include "security/tokens.h"
#include "server/http/http_server.h"
#include "server/http/rest_api.h"

namespace trainyard::fuzz {
namespace {

using server::ViewStore;

// The REST API's backend: published views of one job (alice's train-1, two
// tasks), one node and one queue; submit checks the spec as the server
// would and answers a name; kill answers for train-1 only.
class FakeBackend final : public server::http::RestBackend {
 public:
  FakeBackend() {
    auto job = std::make_shared<v1::JobView>();
    job->set_name("train-1");
    job->set_user("alice");
    job->set_queue("default");
    job->set_state(v1::JOB_RUNNING);
    for (int i = 0; i < 2; ++i) {
      v1::TaskView* t = job->add_tasks();
      t->set_name(absl::StrCat("train-1-worker-", i));
      t->set_role("worker");
      t->set_index(i);
      t->set_node("n1");
      t->set_state(v1::TASK_RUNNING);
    }
    views_.PutJob("train-1", ViewStore::JobEntry{.view = job});
    auto node = std::make_shared<v1::NodeView>();
    node->mutable_info()->set_name("n1");
    node->mutable_info()->mutable_capacity()->set_gpus(8);
    views_.PutNodes(std::make_shared<std::vector<ViewStore::NodeEntry>>(
        std::vector<ViewStore::NodeEntry>{ViewStore::NodeEntry{.view = node}}));
    auto queues = std::make_shared<v1::ListQueuesResponse>();
    queues->add_queues()->set_name("default");
    views_.PutQueues(queues);
  }

  const ViewStore& Views() override { return views_; }
  void Submit(const server::http::Principal&, const v1::SubmitRequest& req, SubmitDone done) override {
    absl::Status st = req.has_spec() ? api::ProblemsStatus(api::ValidateJobSpec(req.spec(), api::UnboundedLimits()))
                                     : api::LoadJobSpec(req.yaml(), api::UnboundedLimits()).status();
    if (!st.ok()) return done(st);
    v1::SubmitResponse answer;
    answer.set_job("train-2");
    answer.set_job_id(2);
    done(answer);
  }
  absl::StatusOr<v1::JobState> Kill(const server::http::Principal&, const std::string& job,
                                    const std::string&) override {
    if (job != "train-1") return absl::NotFoundError(absl::StrCat("job '", job, "' does not exist"));
    return v1::JOB_KILLED;
  }
  absl::StatusOr<v1::JobView> Describe(const std::string& job) override {
    return absl::NotFoundError(absl::StrCat("job '", job, "' does not exist"));
  }

 private:
  ViewStore views_;
};

struct Endpoint {
  FakeBackend backend;
  std::unique_ptr<security::TokenStore> tokens;
  std::unique_ptr<server::http::HttpServer> server;
};

// The endpoint, made once: tokens "ty_fuzz_alice" (alice) and
// "ty_fuzz_admin" (an admin, root) in a token file of the scratch dir.
Endpoint& TheEndpoint() {
  static Endpoint* endpoint = [] {
    auto* e = new Endpoint;
    std::string path = ScratchDir() + "/http-tokens";
    TY_CHECK(security::AddToken(path, "ty_fuzz_alice", "alice", false).ok(), "token file");
    TY_CHECK(security::AddToken(path, "ty_fuzz_admin", "root", true).ok(), "token file");
    e->tokens = std::make_unique<security::TokenStore>(path);
    server::http::HttpOptions options;
    options.request_timeout = absl::Seconds(2);  // never reached: the client's side ends with its bytes
    // No streamed answers (a watch, a followed log would last as long as
    // the client): their queries are parsed, then answered 503 at once.
    options.max_watchers = 0;
    options.max_log_streams = 0;
    options.authenticate = [tokens = e->tokens.get()](absl::string_view authorization) {
      return tokens->Authenticate(authorization);
    };
    absl::StatusOr<std::unique_ptr<server::http::HttpServer>> server = server::http::HttpServer::Bind(options);
    TY_CHECK(server.ok(), "cannot bind the HTTP endpoint: %s", std::string(server.status().message()).c_str());
    e->server = std::move(*server);
    server::http::AddRestRoutes(*e->server, &e->backend);
    e->server->Serve();
    return e;
  }();
  return *endpoint;
}

int64_t Answered500(const server::http::HttpServer& server) {
  int64_t n = 0;
  for (const server::http::HttpRequestCount& c : server.RequestCounts()) {
    if (c.code == 500) n += c.count;
  }
  return n;
}

// A new TCP connection to the endpoint.
int Connect(const server::http::HttpServer& server) {
  const std::string& address = server.address();
  int port = std::stoi(address.substr(address.rfind(':') + 1));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Thousands of connections a second leave the loopback's ports and the
  // listener's queue short now and then: a refused or unaddressable
  // connect is tried again, for a while, before it counts as a failure.
  absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (true) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    TY_CHECK(fd >= 0, "socket: %s", strerror(errno));
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
    int err = errno;
    close(fd);
    TY_CHECK(absl::Now() < give_up && (err == EADDRNOTAVAIL || err == ECONNREFUSED || err == EAGAIN ||
                                        err == ETIMEDOUT || err == EINTR),
             "connect to %s: %s", address.c_str(), strerror(err));
    absl::SleepFor(absl::Milliseconds(10));
  }
}

// Sends `request` on one connection (then ends the client's side) and
// returns every byte answered before the server closed it.
std::string Exchange(std::string_view request) {
  Endpoint& e = TheEndpoint();
  int fd = Connect(*e.server);
  std::string answer;
  int64_t before = Answered500(*e.server);
  std::thread client([&] {
    for (size_t sent = 0; sent < request.size();) {
      ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the server closed early (a refused request): what it answered counts
      sent += static_cast<size_t>(n);
    }
    shutdown(fd, SHUT_WR);
  });
  char buf[16384];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;  // reset: the server cut a connection it refused
    answer.append(buf, static_cast<size_t>(n));
  }
  client.join();
  close(fd);
  // A handler that throws is answered 500: a stranger's request broke it.
  TY_CHECK(Answered500(*e.server) == before, "a request was answered 500 (a handler failed)");
  TY_CHECK(answer.empty() || answer.rfind("HTTP/1.1 ", 0) == 0, "an answer that is not HTTP/1.1: '%.40s'",
           answer.c_str());
  return answer;
}

// `text` for a request target: the bytes that would end the request line
// (space, CR, LF) percent-escaped, everything else as it is.
std::string InTarget(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == ' ') out += "%20";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}

constexpr const char* kAuth = "Authorization: Bearer ty_fuzz_alice\r\n";

}  // namespace

void HttpRequest(std::string_view data) { Exchange(data); }

// The door's framing, however a client cuts its bytes: scanned a byte at a
// time it finds the same head end and the same chunked body end as when
// scanned whole, and a normalized head still ends where it says.
void HttpFrame(std::string_view input) {
  absl::string_view data(input.data(), input.size());
  using httpd::ChunkResult;
  // A byte at a time costs a scan of the line so far per byte: inputs are
  // kept below what makes that quadratic walk slow.
  if (data.size() > 16384) data = data.substr(0, 16384);
  size_t whole = httpd::FindHeadEnd(data, 0);
  size_t end = absl::string_view::npos;
  for (size_t n = 1; n <= data.size() && end == absl::string_view::npos; ++n) {
    end = httpd::FindHeadEnd(data.substr(0, n), n - 1);
  }
  TY_CHECK(end == whole, "head end %zu a byte at a time, %zu whole", end, whole);
  if (whole == absl::string_view::npos) return;
  httpd::RequestHead head = httpd::ParseHead(data.substr(0, whole));
  if (!head.error.empty()) return;
  std::string in(data);
  size_t head_end = httpd::NormalizeHead(&in, whole, head);
  TY_CHECK(httpd::FindHeadEnd(in, 0) == head_end, "a normalized head does not end where NormalizeHead says");
  httpd::RequestHead again = httpd::ParseHead(absl::string_view(in).substr(0, head_end));
  TY_CHECK(again.error.empty() && again.chunked == head.chunked && again.expects_continue == false &&
               (again.has_length || again.chunked),
           "a normalized head frames its body differently");
  if (!head.chunked) return;
  httpd::ChunkScan all{.pos = head_end, .in_trailers = false};
  size_t all_end = 0;
  ChunkResult all_result = httpd::ScanChunks(in, &all, &all_end);
  httpd::ChunkScan step{.pos = head_end, .in_trailers = false};
  size_t step_end = 0;
  ChunkResult step_result = ChunkResult::kNeedMore;
  for (size_t n = head_end + 1; n <= in.size() && step_result == ChunkResult::kNeedMore; ++n) {
    step_result = httpd::ScanChunks(absl::string_view(in).substr(0, n), &step, &step_end);
  }
  TY_CHECK(step_result == all_result, "a chunked body scanned a byte at a time ends otherwise than whole");
  TY_CHECK(all_result != ChunkResult::kDone || step_end == all_end, "chunked body ends at %zu, whole at %zu",
           step_end, all_end);
}

void RestBody(std::string_view data) {
  if (data.empty()) return;
  // The first byte picks the request the rest is the body of.
  static constexpr const char* kHeads[] = {
      "POST /api/v1/jobs HTTP/1.1\r\nContent-Type: application/json\r\n",
      "POST /api/v1/jobs HTTP/1.1\r\nContent-Type: application/yaml\r\n",
      "POST /api/v1/jobs/train-1/kill HTTP/1.1\r\nContent-Type: application/json\r\n",
  };
  const char* head = kHeads[static_cast<unsigned char>(data[0]) % 3];
  absl::string_view body(data.data() + 1, data.size() - 1);
  Exchange(absl::StrCat(head, kAuth, "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body));
}

void QueryString(std::string_view data) {
  // Every route that reads parameters, with the same query.
  static constexpr const char* kPaths[] = {
      "/api/v1/jobs", "/api/v1/jobs/train-1/tasks/worker-0/logs", "/api/v1/jobs/train-1/logs.tar.gz",
      "/api/v1/watch"};
  std::string query = InTarget(data);
  std::string requests;
  for (const char* path : kPaths) absl::StrAppend(&requests, "GET ", path, "?", query, " HTTP/1.1\r\n", kAuth, "\r\n");
  Exchange(requests);
}

}  // namespace trainyard::fuzz
