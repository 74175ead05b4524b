// Services on a real cluster, as a user runs them (docs/services.md): a role
// of kind: service runs beside the job's workers, its port is reached
// through the server's HTTP listener with the address `trainyard url`
// prints (its owner's or an admin's, nobody else's), and it is stopped when
// the workers are done; `trainyard tensorboard JOB` starts TensorBoard on
// the job's checkpoint directory and prints its address.
#include <stdlib.h>
#include <sys/stat.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// A web service: listens on the node's address and its service port,
// answers every GET with what it saw.
constexpr char kService[] = R"(import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("service of %s saw %s prefix=%s auth=%s" % (os.environ["TRAINYARD_JOB"], self.path,
                self.headers.get("X-Forwarded-Prefix", ""), self.headers.get("Authorization", ""))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((os.environ["TRAINYARD_NODE_ADDRESS"], int(os.environ["TRAINYARD_SERVICE_PORT"])), H).serve_forever()
)";

// GET `url` (http://HOST:PORT/PATH, as `trainyard url` prints it) + `then`.
HttpResult GetUrl(const std::string& url, const std::string& then = "", const httplib::Headers& headers = {}) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) return {};
  size_t slash = rest.find('/');
  httplib::Client client("http://" + std::string(rest.substr(0, slash)));
  client.set_read_timeout(30, 0);
  return ToResult(client.Get(std::string(rest.substr(slash)) + then, headers));
}

// `trainyard url ARGS...` as the user of `token` ("" : the admin), once the
// service task runs (the job may run before each of its tasks does).
CommandResult UrlOnceRunning(Cluster& c, const std::string& token, const std::vector<std::string>& args) {
  CommandResult r;
  std::vector<std::string> argv = {"url"};
  argv.insert(argv.end(), args.begin(), args.end());
  WaitUntil([&] {
    r = token.empty() ? c.Cli(argv) : c.CliAs(token, argv);
    return !absl::StrContains(r.err, "its link is made once it runs");
  }, absl::Seconds(30));
  return r;
}

std::string Line(const std::string& out) { return std::string(absl::StripTrailingAsciiWhitespace(out)); }

TEST(ServicesTest, AServiceIsReachedThroughTheServerByItsOwnerAndIsStoppedWhenTheWorkersAreDone) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string alice = c.UserToken("alice"), mallory = c.UserToken("mallory");
  std::string done = c.dir() + "/done";
  WriteFile(c.dir() + "/web.py", kService);
  WriteFile(c.dir() + "/job.yaml",
            "name: svc\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
            "    command: [sh, -c, \"" + WaitForFile(done) + "\"]\n"
            "  web:\n    kind: service\n    resources: {cpu: 100m, memory: 128Mi}\n"
            "    command: [/usr/bin/python3, " + c.dir() + "/web.py]\n");
  CommandResult submitted = c.CliAs(alice, {"submit", c.dir() + "/job.yaml"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  ASSERT_TRUE(c.WaitForState("svc", "RUNNING")) << c.Describe("svc").dump(2);

  // Its owner's address reaches it; the service sees the path under it
  // and no token.
  CommandResult url = UrlOnceRunning(c, alice, {"svc"});
  ASSERT_EQ(url.exit_code, 0) << url.err;
  std::string link = Line(url.out);
  EXPECT_TRUE(absl::StartsWith(link, "http://127.0.0.1:")) << link;
  EXPECT_THAT(link, HasSubstr("/proxy/"));
  HttpResult page;
  // The caller's token and cookies stay with the server.
  const httplib::Headers caller = {{"Authorization", "Bearer " + alice}, {"Cookie", "dashboard=1"}};
  ASSERT_TRUE(WaitUntil([&] {
    page = GetUrl(link, "hello?x=%2F", caller);
    return page.status == 200;
  }, absl::Seconds(30))) << page.status << " " << page.body;
  EXPECT_THAT(page.body, HasSubstr("service of svc saw /hello?x=%2F prefix=/proxy/"));
  EXPECT_TRUE(absl::EndsWith(page.body, " auth=")) << page.body;
  // The same service by its role, and an admin's own address.
  EXPECT_EQ(c.CliAs(alice, {"url", "svc", "web/0", "-q"}).exit_code, 0);
  CommandResult admin = UrlOnceRunning(c, "", {"svc", "web"});
  ASSERT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_EQ(GetUrl(Line(admin.out), "x").status, 200);

  // Refusals name the reason.
  CommandResult r = c.CliAs(mallory, {"url", "svc"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("only its owner or a cluster admin may"));
  r = c.CliAs(alice, {"url", "svc", "worker"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("is not a service"));
  EXPECT_EQ(GetUrl(absl::StrCat(link.substr(0, link.size() - 2), "x/")).status, 403) << "a changed address";

  // describe shows which task is the service.
  nlohmann::json view = c.Describe("svc");
  bool shown = false;
  for (const auto& t : view["tasks"]) shown |= t["role"] == "web" && t.value("service", false);
  EXPECT_TRUE(shown) << view.dump(2);

  // The workers done, the job succeeds and its service is stopped: the
  // address answers no more.
  WriteFile(done, "");
  ASSERT_TRUE(c.WaitForState("svc", "SUCCEEDED", absl::Seconds(60))) << c.Describe("svc").dump(2);
  HttpResult after = GetUrl(link, "hello");
  EXPECT_TRUE(after.status == 503 || after.status == 404) << after.status << " " << after.body;
}

// A `tensorboard` on the agents' PATH that serves what a TensorBoard
// would read: its --logdir's files.
constexpr char kTensorboard[] = R"(#!/usr/bin/python3
import argparse, http.server, os
p = argparse.ArgumentParser()
p.add_argument("--logdir"); p.add_argument("--host"); p.add_argument("--port", type=int)
a = p.parse_args()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("board of %s: %s" % (a.logdir, " ".join(sorted(os.listdir(a.logdir))))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((a.host, a.port), H).serve_forever()
)";

TEST(ServicesTest, TensorboardStartsOnTheJobsCheckpointsAndPrintsItsAddress) {
  TempDir bin;
  WriteFile(bin.path() + "/tensorboard", kTensorboard);
  ASSERT_EQ(chmod((bin.path() + "/tensorboard").c_str(), 0755), 0);
  // The agents (and so their tasks) find it on their PATH.
  std::string path = getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin";
  setenv("PATH", (bin.path() + ":" + path).c_str(), 1);
  Cluster c({.nodes = 1});
  setenv("PATH", path.c_str(), 1);
  ASSERT_TRUE(c.WaitNodesReady(1));
  WriteFile(c.dir() + "/job.yaml",
            "name: train\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
            "    command: [sh, -c, \"touch $TRAINYARD_CHECKPOINT_DIR/events.out.tfevents.1; exec sleep 600\"]\n");
  ASSERT_EQ(c.Cli({"submit", c.dir() + "/job.yaml"}).exit_code, 0);
  ASSERT_TRUE(c.WaitForState("train", "RUNNING"));
  std::string checkpoints = c.Describe("train")["checkpoint_dir"];
  ASSERT_FALSE(checkpoints.empty());

  CommandResult tb = c.Cli({"tensorboard", "train", "-q", "--timeout", "60"});
  ASSERT_EQ(tb.exit_code, 0) << tb.err;
  EXPECT_THAT(tb.err, HasSubstr("job train-tensorboard submitted"));
  HttpResult page;
  ASSERT_TRUE(WaitUntil([&] {
    page = GetUrl(Line(tb.out));
    return page.status == 200 && absl::StrContains(page.body, "events.out");
  }, absl::Seconds(30))) << page.status << " " << page.body;
  EXPECT_TRUE(absl::StartsWith(page.body, "board of " + checkpoints + ": ")) << page.body;
  EXPECT_THAT(page.body, HasSubstr(" events.out.tfevents.1")) << "what the job wrote there";
  EXPECT_EQ(c.Cli({"kill", "train-tensorboard"}).exit_code, 0);
}

TEST(ServicesTest, TensorboardSaysSoWhenTheNodeHasNone) {
  if (RunCommandLine({"/bin/sh", "-c", "command -v tensorboard"}, absl::Seconds(10)).exit_code == 0) {
    GTEST_SKIP() << "this machine has a tensorboard";
  }
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  WriteFile(c.dir() + "/job.yaml",
            "name: train\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
            "    command: [sleep, \"600\"]\n");
  ASSERT_EQ(c.Cli({"submit", c.dir() + "/job.yaml"}).exit_code, 0);
  CommandResult tb = c.Cli({"tensorboard", "train", "--logdir", c.dir(), "--timeout", "60"});
  EXPECT_EQ(tb.exit_code, 1);
  EXPECT_THAT(tb.err, HasSubstr("job train-tensorboard ended FAILED"));
  EXPECT_THAT(tb.err, HasSubstr("is tensorboard installed on the node?"));
}

}  // namespace
}  // namespace trainyard::testing
