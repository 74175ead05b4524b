// Services (docs/services.md): `trainyard url JOB [ROLE[/INDEX]]` prints the
// address of a service task's port through the server's proxy;
// `trainyard tensorboard JOB` starts TensorBoard on a job's checkpoint
// directory as a service job of its own and prints its address.
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/states.h"
#include "cli/client.h"
#include "cli/text.h"
#include "cli/verb_common.h"
#include "cli/verbs.h"

namespace trainyard::cli {
namespace {

// The host of a gRPC target "host:port" ("[v6]:port", bracketed as it
// came); 127.0.0.1 for a target without one.
std::string HostOf(const std::string& address) {
  std::string a = address;
  if (absl::StartsWith(a, "dns:///")) a = a.substr(7);
  if (absl::StartsWith(a, "ipv4:") || absl::StartsWith(a, "ipv6:")) a = a.substr(5);
  if (absl::StartsWith(a, "unix:")) return "127.0.0.1";
  size_t colon = a.rfind(':');
  std::string host = colon == std::string::npos ? a : a.substr(0, colon);
  return host.empty() ? "127.0.0.1" : host;
}

std::string LinkUrl(const v1::ServiceLinkResponse& r, const std::string& server) {
  std::string host = r.http_host().empty() ? HostOf(server) : r.http_host();
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) host = absl::StrCat("[", host, "]");
  return absl::StrCat(r.http_scheme(), "://", host, ":", r.http_port(), r.path());
}

// Prints the link's address (and, unless quiet, until when it holds).
void PrintUrl(const v1::ServiceLinkResponse& link, const std::string& server, bool quiet) {
  std::cout << LinkUrl(link, server) << std::endl;
  if (!quiet) {
    std::cerr << "(the address is yours: it lets whoever holds it reach this service until "
              << TimeText(link.expires_unix_ms()) << ")" << std::endl;
  }
}

// Asks for the link and prints its address (and, unless quiet, until when).
int PrintLink(const char* verb, v1::Trainyard::Stub& stub, const std::string& address,
              const v1::ServiceLinkRequest& req, bool quiet) {
  v1::ServiceLinkResponse resp;
  auto ctx = Context();
  grpc::Status st = stub.ServiceLink(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError(verb, address, st);
  PrintUrl(resp, address, quiet);
  return kExitOk;
}

struct UrlFlags {
  std::string server;
  std::string job;
  std::string task;
  bool quiet = false;
};

int Url(UrlFlags& f) {
  v1::ServiceLinkRequest req;
  req.set_job(f.job);
  if (!f.task.empty()) {
    int index = 0;
    if (!ParseTask("url", f.task, req.mutable_role(), &index)) return kExitUsage;
    req.set_index(index);
  }
  std::string address = ServerAddress(f.server);
  return PrintLink("url", *MakeStub(address), address, req, f.quiet);
}

struct TensorboardFlags {
  std::string server;
  std::string job;
  std::string logdir;
  std::string name;
  std::string node;
  int timeout_s = 120;
  bool quiet = false;
};

// Follows `job`'s views (WatchJob, again when a stream ends) until `done`
// says so (true) or `deadline` passes (false). Errors other than the
// deadline's are the call's.
absl::StatusOr<bool> FollowJob(v1::Trainyard::Stub& stub, const std::string& job, absl::Time deadline,
                               const std::function<bool(const v1::JobView&)>& done) {
  while (absl::Now() < deadline) {
    v1::WatchJobRequest req;
    req.set_job(job);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    Authorize(&ctx);
    std::unique_ptr<grpc::ClientReader<v1::JobView>> reader = stub.WatchJob(&ctx, req);
    v1::JobView v;
    while (reader->Read(&v)) {
      if (done(v)) {
        ctx.TryCancel();
        reader->Finish();
        return true;
      }
    }
    grpc::Status st = reader->Finish();
    if (!st.ok() && st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
    }
  }
  return false;
}

// The job's first service task; nullptr when it has none.
const v1::TaskView* FirstService(const v1::JobView& v) {
  for (const v1::TaskView& t : v.tasks()) {
    if (t.service()) return &t;
  }
  return nullptr;
}

bool ServiceRuns(const v1::JobView& v) {
  const v1::TaskView* t = FirstService(v);
  return t && t->state() == v1::TASK_RUNNING;
}

// Follows `job` until its first service task runs (true) or the job ends
// or `deadline` passes (false, said on stderr).
bool WaitForService(v1::Trainyard::Stub& stub, const std::string& address, const std::string& job,
                    absl::Time deadline, int timeout_s) {
  std::string last;
  bool ended = false;
  absl::StatusOr<bool> runs = FollowJob(stub, job, deadline, [&](const v1::JobView& v) {
    if (ServiceRuns(v)) return true;
    std::string line = api::JobStateName(v.state()) + (v.reason().empty() ? "" : ": " + v.reason());
    if (api::IsTerminal(v.state())) {
      std::cerr << "trainyard tensorboard: job " << job << " ended " << line
                << " (is tensorboard installed on the node? `trainyard logs " << job << "` says more)\n";
      return ended = true;
    }
    if (line != last) std::cerr << job << ": " << line << std::endl;
    last = line;
    return false;
  });
  if (!runs.ok()) {
    ReportError("tensorboard", address,
                grpc::Status(static_cast<grpc::StatusCode>(runs.status().code()), std::string(runs.status().message())));
    return false;
  }
  if (*runs && !ended) return true;
  if (!ended) {
    std::cerr << "trainyard tensorboard: job " << job << "'s TensorBoard did not run within " << timeout_s
              << " s (it goes on; `trainyard url " << job << "` once it runs)\n";
  }
  return false;
}

// Whether `job`'s first service task is still RUNNING `settle` from now
// (false as soon as it is not, or the job ended).
bool StaysRunning(v1::Trainyard::Stub& stub, const std::string& job, absl::Duration settle) {
  absl::StatusOr<bool> stopped = FollowJob(stub, job, absl::Now() + settle, [](const v1::JobView& v) {
    return api::IsTerminal(v.state()) || !ServiceRuns(v);
  });
  return stopped.ok() && !*stopped;
}

int Tensorboard(TensorboardFlags& f) {
  std::string address = ServerAddress(f.server);
  std::unique_ptr<v1::Trainyard::Stub> stub = MakeStub(address);
  v1::JobView job;
  {
    v1::DescribeJobRequest req;
    req.set_job(f.job);
    auto ctx = Context();
    grpc::Status st = stub->DescribeJob(ctx.get(), req, &job);
    if (!st.ok()) return ReportError("tensorboard", address, st);
  }
  std::string logdir = f.logdir.empty() ? job.checkpoint_dir() : f.logdir;
  v1::SubmitRequest submit;
  v1::JobSpec* spec = submit.mutable_spec();
  spec->set_name(f.name.empty() ? job.name() + "-tensorboard" : f.name);
  spec->set_queue(job.queue());
  if (!f.node.empty()) spec->set_node_name(f.node);
  v1::ReplicaSpec* rs = spec->add_replicas();
  rs->set_role("tensorboard");
  rs->set_kind(v1::ROLE_KIND_SERVICE);
  rs->set_count(1);
  rs->set_restart_policy(v1::RESTART_NEVER);
  rs->mutable_resources()->set_vcores_milli(1000);
  rs->mutable_resources()->set_memory_mb(2048);
  rs->mutable_resources()->set_port_count(1);
  // On the node's address (the proxy reaches it there) and the port the
  // task was given.
  for (const char* arg : {"sh", "-c",
                          "exec tensorboard --logdir \"$1\" --host \"$TRAINYARD_NODE_ADDRESS\" "
                          "--port \"$TRAINYARD_SERVICE_PORT\"",
                          "tensorboard"}) {
    rs->add_command(arg);
  }
  rs->add_command(logdir);
  v1::SubmitResponse resp;
  {
    auto ctx = Context();
    grpc::Status st = stub->Submit(ctx.get(), submit, &resp);
    if (!st.ok()) return ReportError("tensorboard", address, st);
  }
  std::cerr << "job " << resp.job() << " submitted: TensorBoard on " << logdir << " (stop it with `trainyard kill "
            << resp.job() << "`)" << std::endl;
  // Until it runs and its link is made: a TensorBoard that is not there
  // runs for a moment (its shell) and then fails, which the next wait tells.
  const absl::Time deadline = absl::Now() + absl::Seconds(f.timeout_s);
  for (;;) {
    if (!WaitForService(*stub, address, resp.job(), deadline, f.timeout_s)) return kExitFailure;
    v1::ServiceLinkRequest req;
    req.set_job(resp.job());
    v1::ServiceLinkResponse link;
    auto ctx = Context();
    grpc::Status st = stub->ServiceLink(ctx.get(), req, &link);
    if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION && absl::Now() < deadline) {
      continue;  // it ended again since
    }
    if (!st.ok()) return ReportError("tensorboard", address, st);
    // Still running a moment later: a TensorBoard that is not installed
    // ends at once (its shell found nothing to run).
    if (!StaysRunning(*stub, resp.job(), absl::Seconds(2))) continue;
    PrintUrl(link, address, f.quiet);
    return kExitOk;
  }
}

}  // namespace

void RegisterServiceVerbs(CLI::App& app, int* exit_code) {
  static UrlFlags url;
  auto* c = app.add_subcommand("url",
                               "Print the address of a running service task (a role of kind: service) through the "
                               "server's proxy, for a browser");
  c->add_option("job", url.job, "job name")->required();
  c->add_option("task", url.task, "ROLE or ROLE/INDEX (default: the job's first service task)");
  c->add_flag("-q,--quiet", url.quiet, "print only the address");
  c->add_option("--server", url.server, "server address host:port (default $TRAINYARD_SERVER or 127.0.0.1:7450)");
  AddCaOption(c);
  c->callback([exit_code] { *exit_code = Url(url); });

  static TensorboardFlags tb;
  c = app.add_subcommand("tensorboard",
                         "Start TensorBoard (if installed on the nodes) on a job's checkpoint directory as a service "
                         "job and print its address");
  c->add_option("job", tb.job, "the job whose logs to show")->required();
  c->add_option("--logdir", tb.logdir, "the directory TensorBoard reads (default: the job's checkpoint directory)");
  c->add_option("--name", tb.name, "the TensorBoard job's name (default JOB-tensorboard)");
  c->add_option("--node", tb.node, "run it on this node (default: any)");
  c->add_option("--timeout", tb.timeout_s, "seconds to wait for it to run (default 120)")->check(CLI::PositiveNumber);
  c->add_flag("-q,--quiet", tb.quiet, "print only the address");
  c->add_option("--server", tb.server, "server address host:port (default $TRAINYARD_SERVER or 127.0.0.1:7450)");
  AddCaOption(c);
  c->callback([exit_code] { *exit_code = Tensorboard(tb); });
}

}  // namespace trainyard::cli
