// Task logs over the REST API through real processes: a byte range of an
// attempt, a follow that sees a line as the task prints it and ends with
// the attempt, the whole job's logs as a tar.gz opened with tar, and the
// JSON errors of the log routes.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// Runs `command` in a shell; its exit code, and its output and errors in
// *out.
int Shell(const std::string& command, std::string* out, const std::string& dir) {
  std::string file = dir + "/shell.out";
  int rc = std::system(absl::StrCat(command, " > ", file, " 2>&1").c_str());
  *out = ReadFile(file);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string LogPath(const std::string& job, const std::string& task, const std::string& query = "") {
  return absl::StrCat("/api/v1/jobs/", job, "/tasks/", task, "/logs", query.empty() ? "" : "?", query);
}

TEST(HttpLogsTest, ARangeOfAnAttemptIsPlainTextWithItsOffsets) {
  Cluster c({.nodes = 1});
  std::string go = c.dir() + "/go", go_err = c.dir() + "/go-err";
  // The stderr line comes once the stdout lines were seen: their order in
  // the text is then certain.
  std::string job = c.Submit(absl::StrCat(R"(
name: lines
replicas:
  worker:
    command: [sh, -c, 'for i in 1 2 3 4 5; do echo "line $i"; done; )", WaitForFile(go_err), R"(; echo oops >&2; )",
                                          WaitForFile(go), R"(']
)"));
  std::string path = LogPath(job, "worker-0");
  HttpResult all;
  ASSERT_TRUE(WaitUntil([&] {
    all = HttpGet(c.http_address(), path);
    return all.status == 200 && all.body == "line 1\nline 2\nline 3\nline 4\nline 5\n";
  }, absl::Seconds(30))) << all.status << " " << all.body;
  WriteFile(go_err, "");
  ASSERT_TRUE(WaitUntil([&] {
    all = HttpGet(c.http_address(), path);
    return all.status == 200 && all.body.find("oops") != std::string::npos;
  }, absl::Seconds(30))) << all.status << " " << all.body;
  EXPECT_EQ(all.body, "line 1\nline 2\nline 3\nline 4\nline 5\noops\n");
  // The task's full name names it as well as ROLE-INDEX.
  EXPECT_EQ(HttpGet(c.http_address(), LogPath(job, job + "-worker-0")).body, all.body);

  httplib::Client client = HttpClient(c.http_address());
  httplib::Result part = client.Get(LogPath(job, "worker-0", "offset=7&limit=7"));
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 200);
  EXPECT_EQ(part->body, "line 2\n");
  EXPECT_EQ(part->get_header_value("X-Trainyard-Attempt"), "0");
  EXPECT_EQ(part->get_header_value("X-Trainyard-Next-Offset"), "14");
  EXPECT_EQ(part->get_header_value("X-Trainyard-More"), "true");
  httplib::Result tail = client.Get(LogPath(job, "worker-0", "offset=35"));
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->body, "oops\n");
  EXPECT_EQ(tail->get_header_value("X-Trainyard-More"), "false");

  HttpResult bad = HttpGet(c.http_address(), LogPath(job, "worker-0", "offset=-1"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.json["error"]["message"].get<std::string>(), HasSubstr("offset"));
  HttpResult no_task = HttpGet(c.http_address(), LogPath(job, "ps-3"));
  EXPECT_EQ(no_task.status, 404);
  EXPECT_THAT(no_task.json["error"]["message"].get<std::string>(), HasSubstr("has no task 'ps-3'"));
  HttpResult no_job = HttpGet(c.http_address(), LogPath("nosuch", "worker-0"));
  EXPECT_EQ(no_job.status, 404);
  EXPECT_THAT(no_job.json["error"]["message"].get<std::string>(), HasSubstr("job 'nosuch' does not exist"));
  HttpResult no_attempt = HttpGet(c.http_address(), LogPath(job, "worker-0", "attempt=4"));
  EXPECT_EQ(no_attempt.status, 404);
  EXPECT_THAT(no_attempt.json["error"]["message"].get<std::string>(), HasSubstr("has no attempt 4"));
  WriteFile(go, "");
  EXPECT_TRUE(c.WaitForState(job, "SUCCEEDED"));
}

// What a streamed answer has brought so far, read on its own thread.
struct Streamed {
  absl::Mutex mu;
  std::string text;
  int status = 0;
  std::atomic<bool> done{false};
  std::string Text() {
    absl::MutexLock lock(&mu);
    return text;
  }
};

TEST(HttpLogsTest, FollowSeesANewLineAsTheTaskPrintsItAndEndsWithTheAttempt) {
  Cluster c({.nodes = 1});
  std::string go1 = c.dir() + "/go1", go2 = c.dir() + "/go2";
  std::string job = c.Submit(absl::StrCat(R"(
name: follow
replicas:
  worker:
    command: [sh, -c, 'echo first; )", WaitForFile(go1), R"(; echo second; )", WaitForFile(go2), R"(; echo third']
)"));
  ASSERT_TRUE(WaitUntil([&] { return HttpGet(c.http_address(), LogPath(job, "worker-0")).body == "first\n"; },
                      absl::Seconds(30)));
  Streamed s;
  std::thread reader([&] {
    httplib::Client client = HttpClient(c.http_address());
    // A browser asks for gzip: a followed log must come uncompressed (a
    // compressor would hold the lines back).
    httplib::Headers headers = {{"Accept-Encoding", "gzip, deflate"}};
    httplib::Result r = client.Get(LogPath(job, "worker-0", "follow=1"), headers,
                                   [&](const char* data, size_t n) {
                                     absl::MutexLock lock(&s.mu);
                                     s.text.append(data, n);
                                     return true;
                                   });
    s.status = r ? r->status : -1;
    s.done = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return s.Text() == "first\n"; }, absl::Seconds(10))) << s.Text();
  WriteFile(go1, "");
  absl::Time written = absl::Now();
  ASSERT_TRUE(WaitUntil([&] { return s.Text() == "first\nsecond\n"; }, absl::Seconds(10))) << s.Text();
  std::cerr << "second line seen " << absl::FormatDuration(absl::Now() - written)
            << " after the task could print it\n";
  EXPECT_FALSE(s.done);  // the attempt still runs: the stream waits for more
  WriteFile(go2, "");
  ASSERT_TRUE(WaitUntil([&] { return s.done.load(); }, absl::Seconds(30))) << s.Text();
  reader.join();
  EXPECT_EQ(s.status, 200);
  EXPECT_EQ(s.Text(), "first\nsecond\nthird\n");
}

TEST(HttpLogsTest, TheArchiveHoldsEveryAttemptOfEveryTaskAfterARestart) {
  Cluster c({.nodes = 1});
  std::string counter = c.dir() + "/count";
  std::string job = c.Submit(absl::StrCat(R"(
name: flaky
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 2
    command: [sh, -c, 'n=$(cat )", counter, R"( 2>/dev/null || echo 0); n=$((n+1)); echo $n > )", counter,
                                          R"(; echo "run $n"; if [ $n -eq 1 ]; then echo "run 1 fails" >&2; exit 3; fi']
)"));
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(60)));
  httplib::Client client = HttpClient(c.http_address());
  httplib::Result r = client.Get(absl::StrCat("/api/v1/jobs/", job, "/logs.tar.gz"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/gzip");
  EXPECT_THAT(r->get_header_value("Content-Disposition"), HasSubstr(job + "-logs.tar.gz"));
  std::string archive = c.dir() + "/logs.tar.gz", out = c.dir() + "/extracted";
  WriteFile(archive, r->body);
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string list, extract;
  ASSERT_EQ(Shell("tar -tzf " + archive, &list, c.dir()), 0) << list;
  EXPECT_THAT(list, HasSubstr(job + "-worker-0/attempt-0.log\n"));
  EXPECT_THAT(list, HasSubstr(job + "-worker-0/attempt-1.log\n"));
  EXPECT_THAT(list, HasSubstr(job + "-jobmaster-0/attempt-0.log\n"));
  EXPECT_THAT(list, ::testing::Not(HasSubstr("MISSING")));
  ASSERT_EQ(Shell("tar -xzf " + archive + " -C " + out, &extract, c.dir()), 0) << extract;
  // Its stdout and stderr lines, in the order the node read them.
  std::string first = ReadFile(absl::StrCat(out, "/", job, "-worker-0/attempt-0.log"));
  EXPECT_EQ(first.size(), std::string("run 1\nrun 1 fails\n").size()) << first;
  EXPECT_THAT(first, HasSubstr("run 1\n"));
  EXPECT_THAT(first, HasSubstr("run 1 fails\n"));
  EXPECT_EQ(ReadFile(absl::StrCat(out, "/", job, "-worker-0/attempt-1.log")), "run 2\n");

  HttpResult none = HttpGet(c.http_address(), "/api/v1/jobs/nosuch/logs.tar.gz");
  EXPECT_EQ(none.status, 404);
  EXPECT_THAT(none.json["error"]["message"].get<std::string>(), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace trainyard::testing
