// Job specs a server must survive, through the real path: malformed YAML
// (keys that are lists, looping aliases, deep nesting, binary) sent to a
// running server as a raw client would and piped to `trainyard submit -`;
// specs over the size cap; and what a spec leaves out filled in by the
// server's defaults, as describe shows it.
#include <sys/wait.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "api/malformed_specs_testing.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "tests/integration/grpc_client.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGood[] = "name: good\nreplicas:\n  worker: {command: [sh, -c, 'exit 0']}\n";

// `trainyard submit - --server ADDRESS` with `text` on its standard input.
// A crash shows as 128 + the signal, as a shell reports it.
CommandResult SubmitStdin(Cluster& c, const std::string& text) {
  static int n = 0;
  std::string base = absl::StrCat(c.dir(), "/stdin-", n++);
  WriteFile(base + ".yaml", text);
  std::string cmd = absl::StrCat("'", TrainyardBin(), "' submit - --server ", c.address(), " < '", base,
                                 ".yaml' > '", base, ".out' 2> '", base, ".err'");
  int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(base + ".out");
  r.err = ReadFile(base + ".err");
  return r;
}

grpc::Status SubmitRaw(v1::Trainyard::Stub& stub, const std::string& yaml, v1::SubmitResponse* resp) {
  v1::SubmitRequest req;
  req.set_yaml(yaml);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", AdminAuthorization());
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub.Submit(&ctx, req, resp);
}

std::unique_ptr<v1::Trainyard::Stub> RawStub(const Cluster& c) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  return v1::Trainyard::NewStub(grpc::CreateCustomChannel(c.address(), ClientCredentials(), args));
}

// A process's memory figure from /proc/PID/status in KiB: "VmRSS:" (now),
// "VmHWM:" (peak).
int64_t MemoryKib(pid_t pid, const std::string& key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size()));
  }
  return -1;
}

TEST(SpecValidationTest, MalformedYamlIsRefusedCleanlyAndTheServerKeepsServing) {
  Cluster c({.nodes = 1});
  auto stub = RawStub(c);
  for (const auto& [name, text] : api::testing::MalformedSpecs()) {
    v1::SubmitResponse resp;
    grpc::Status st = SubmitRaw(*stub, text, &resp);
    // Before, a key that is a list threw out of the handler: UNIMPLEMENTED,
    // no message.
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name << ": " << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(": ")) << name;
    ASSERT_TRUE(c.server().Running()) << name;
    CommandResult cli = SubmitStdin(c, text);
    // Before, the CLI aborted on an uncaught yaml-cpp exception (134).
    EXPECT_EQ(cli.exit_code, 2) << name << ": " << cli.err;
    EXPECT_THAT(cli.err, HasSubstr("trainyard submit: standard input:\n")) << name;
  }
  v1::SubmitResponse resp;
  grpc::Status st = SubmitRaw(*stub, kGood, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(c.WaitForState(resp.job(), "SUCCEEDED"));
}

TEST(SpecValidationTest, TheServerAnswersEveryProblemWithTheUsersFieldNames) {
  Cluster c({.nodes = 1});
  auto stub = RawStub(c);
  v1::SubmitResponse resp;
  grpc::Status st = SubmitRaw(*stub, "replicas:\n  worker:\n    command: echo hi there\n    resources: {cpu: -1}\n", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "replicas.worker.command: must be a list of strings, e.g. [\"sh\", \"-c\", \"echo hi there\"], not a "
            "string\n"
            "name: required (1-63 characters of a-z, 0-9 and '-')\n"
            "replicas.worker.resources.cpu: -1 is negative");
  // The CLI says the same before it calls the server.
  CommandResult cli = SubmitStdin(c, "replicas:\n  worker:\n    command: echo hi there\n    resources: {cpu: -1}\n");
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_EQ(cli.err, absl::StrCat("trainyard submit: standard input:\n", st.error_message(), "\n"));
}

TEST(SpecValidationTest, ASpecOverTheCapIsRefusedBeforeItIsParsed) {
  Cluster c({.nodes = 1});
  auto stub = RawStub(c);
  std::string padded = absl::StrCat(kGood, "# ", std::string(2 << 20, 'x'), "\n");
  v1::SubmitResponse resp;
  grpc::Status st = SubmitRaw(*stub, padded, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), absl::StrCat("spec: ", padded.size(),
                                             " bytes is above the 1048576 bytes this server takes (maxSpecBytes "
                                             "in its config)"));
  // 48 and 64 MiB are refused by gRPC's receive limit, never parsed. A
  // 48 MiB spec was accepted and its parse took the server's peak memory up
  // by ~165 MiB; now gRPC only holds the message itself (this gRPC checks
  // the size once the message is in).
  for (int mib : {48, 64}) {
    int64_t peak = MemoryKib(c.server().pid(), "VmHWM:");
    st = SubmitRaw(*stub, absl::StrCat(kGood, "# ", std::string(mib << 20, 'x'), "\n"), &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_LT(MemoryKib(c.server().pid(), "VmHWM:") - peak, int64_t{mib} * 1024 * 3 / 2) << mib << " MiB";
  }
  ASSERT_TRUE(SubmitRaw(*stub, kGood, &resp).ok());
  // The CLI says how large the spec was.
  CommandResult cli = SubmitStdin(c, absl::StrCat(kGood, "# ", std::string(20 << 20, 'x'), "\n"));
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_THAT(cli.err, HasSubstr("bytes is far above what the server takes"));
}

TEST(SpecValidationTest, TheCapIsConfigurable) {
  TempDir dir;
  WriteFile(dir.path() + "/server.yaml", "maxSpecBytes: 8192\n");
  Cluster c({.nodes = 1, .server_flags = {"--config", dir.path() + "/server.yaml"}});
  CommandResult cli = SubmitStdin(c, absl::StrCat(kGood, "# ", std::string(10000, 'x'), "\n"));
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_THAT(cli.err, HasSubstr("bytes is above the 8192 bytes this server takes (maxSpecBytes in its config)"));
  EXPECT_EQ(SubmitStdin(c, kGood).exit_code, 0);
}

TEST(SpecValidationTest, SubmitDashReadsStdinAndDescribeShowsTheDefaults) {
  Cluster c({.nodes = 1});
  CommandResult r = SubmitStdin(c, kGood);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "job good submitted\n");
  ASSERT_TRUE(c.WaitForState("good", "SUCCEEDED"));
  nlohmann::json d = c.Describe("good");
  nlohmann::json worker;
  for (const auto& t : d["tasks"]) {
    if (t["role"] == "worker") worker = t;
  }
  EXPECT_EQ(worker.value("vcores_milli", int64_t{0}), 1000) << d.dump();
  EXPECT_EQ(worker.value("memory_mb", int64_t{0}), 1024) << d.dump();
  CommandResult table = c.Cli({"describe", "good"});
  EXPECT_THAT(table.out, HasSubstr("CPU"));
  EXPECT_THAT(table.out, HasSubstr("server defaults for what the spec leaves out: worker cpu 1, memory 1Gi"));
}

TEST(SpecValidationTest, ASubmissionOverABoundIsRefusedNamingItWhileTheClusterKeepsServing) {
  Cluster c({.nodes = 1});
  auto stub = RawStub(c);
  // Another user's view of the cluster meanwhile: every `jobs` is answered.
  std::atomic<bool> done{false};
  std::atomic<int> listed{0}, failed{0};
  std::thread lister([&] {
    auto other = RawStub(c);
    while (!done) {
      v1::ListJobsRequest req;
      v1::ListJobsResponse resp;
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", AdminAuthorization());
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      (other->ListJobs(&ctx, req, &resp).ok() ? listed : failed)++;
    }
  });
  // 5,000 roles in 144 KB stalled every call for 8.5 minutes.
  std::string roles = "name: roles\nreplicas:\n";
  for (int r = 0; r < 5000; ++r) absl::StrAppend(&roles, "  r", r, ": {command: [x]}\n");
  v1::SubmitResponse resp;
  grpc::Status st = SubmitRaw(*stub, roles, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "replicas: 5000 roles is above the 100 roles this server takes in one job "
                                "(maxRolesPerJob in its config)");
  // count: 10000 twice over took 3.2 GB of the server's memory.
  st = SubmitRaw(*stub, "name: wide\nreplicas:\n  a: {count: 6000, command: [x]}\n  b: {count: 6000, command: [x]}\n",
                 &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "replicas: 12000 tasks in all (the sum of the roles' counts) is above the 2000 "
                                "tasks this server takes in one job (maxTasksPerJob in its config)");
  st = SubmitRaw(*stub, absl::StrCat("name: env\nreplicas:\n  w: {command: [x], env: {BIG: ", std::string(200000, 'x'),
                                     "}}\n"), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("replicas.w.env: 200003 bytes is above the 131072 bytes this server "
                                            "takes per role (maxEnvBytesPerRole in its config)"));
  // The cluster serves on: a good job runs, and `jobs` was answered throughout.
  ASSERT_TRUE(SubmitRaw(*stub, kGood, &resp).ok());
  EXPECT_TRUE(c.WaitForState(resp.job(), "SUCCEEDED"));
  done = true;
  lister.join();
  EXPECT_GT(listed.load(), 0);
  EXPECT_EQ(failed.load(), 0);
}

TEST(SpecValidationTest, TheBoundsAreConfigurable) {
  TempDir dir;
  WriteFile(dir.path() + "/server.yaml", "maxTasksPerJob: 4\n");
  Cluster c({.nodes = 1, .server_flags = {"--config", dir.path() + "/server.yaml"}});
  auto stub = RawStub(c);
  v1::SubmitResponse resp;
  grpc::Status st = SubmitRaw(*stub, "name: five\nreplicas:\n  worker: {count: 5, command: [x]}\n", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("above the 4 tasks this server takes in one job (maxTasksPerJob"));
  EXPECT_TRUE(SubmitRaw(*stub, "name: four\nreplicas:\n  worker: {count: 4, command: [sh, -c, 'exit 0']}\n", &resp).ok());
}

TEST(SpecValidationTest, CpuThatCannotRunIsRefusedAtSubmitNamingTheMinimum) {
  Cluster c({.nodes = 1});
  auto stub = RawStub(c);
  // Accepted before, and every task then failed with exit code 127: the
  // agent's CFS quota of 100 us is below the kernel's 1 ms.
  constexpr char kTiny[] = "name: tiny\nreplicas:\n  worker: {command: [sh, -c, 'exit 0'], resources: {cpu: 1m}}\n";
  v1::SubmitResponse resp;
  grpc::Status st = SubmitRaw(*stub, kTiny, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "replicas.worker.resources.cpu: 1m is below 10m, the least CPU a task can run with "
                                "(the kernel takes no CPU quota below 1 ms per 100 ms period)");
  CommandResult cli = SubmitStdin(c, kTiny);
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_THAT(cli.err, HasSubstr("cpu: 1m is below 10m"));
  // The least that runs, runs.
  ASSERT_TRUE(SubmitRaw(*stub, "name: least\nreplicas:\n  worker: {command: [sh, -c, 'exit 0'], resources: {cpu: 10m}}\n",
                        &resp).ok());
  EXPECT_TRUE(c.WaitForState(resp.job(), "SUCCEEDED"));
}

}  // namespace
}  // namespace trainyard::testing
