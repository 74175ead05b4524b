// `trainyard up --demo`.
#include "cli/demo.h"

#include "api/log_lines.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "api/states.h"
#include "cli/client.h"
#include "cli/up_report.h"
#include "cli/verbs.h"

namespace trainyard::cli {
namespace {

std::string FindSpec(const std::string& given) {
  if (!given.empty()) return given;
  for (std::string p : {std::string("examples/demo.yaml"), std::string(TRAINYARD_SOURCE_DIR "/examples/demo.yaml")}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "examples/demo.yaml";
}

// What the log follower and the main thread share: the log stream in flight,
// which the main thread cancels once the job has ended, and whether it has.
class LogStop {
 public:
  // Makes `ctx` the stream that Stop() cancels. Returns false, registering
  // nothing, once Stop() has run.
  bool Begin(grpc::ClientContext* ctx) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return false;
    ctx_ = ctx;
    return true;
  }
  // The stream that Begin() registered has finished.
  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ctx_ = nullptr;
  }
  // Cancels the stream in flight; Begin() refuses from now on.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  // The follower has returned.
  void Done() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  // Waits up to `timeout` for Done(); returns whether it has run.
  bool WaitDone(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
    return done_;
  }
  // Waits up to `timeout` for Stop(); returns whether it has run, so a retry
  // does not hold up the end of the demo.
  bool WaitStopped(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopped_), timeout);
    return stopped_;
  }

 private:
  absl::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Prints the first worker's log as it arrives, retrying while the task has
// not started, until the stream ends or `stop` cancels it.
void FollowWorkerLog(v1::Trainyard::Stub& stub, const std::string& job, LogStop& stop) {
  v1::LogsRequest lr;
  lr.set_job(job);
  lr.set_role("worker");
  lr.set_index(0);
  lr.set_attempt(-1);
  lr.set_follow(true);
  for (int tries = 0; tries < 100; ++tries) {  // the task may not have started yet
    grpc::ClientContext ctx;
    Authorize(&ctx);
    if (!stop.Begin(&ctx)) return;
    auto reader = stub.Logs(&ctx, lr);
    v1::LogChunk chunk;
    api::LogSplitter splitter;  // the stamps off each line
    bool any = false;
    while (reader->Read(&chunk)) {
      any = true;
      splitter.Add(chunk.data(), [&](const api::LogPiece& p) {
        if (p.line_start) std::cout << "  [" << chunk.task() << "] ";
        std::cout << p.text;
      });
      std::cout << std::flush;
    }
    grpc::Status rs = reader->Finish();
    stop.End();
    if (any || rs.error_code() == grpc::StatusCode::CANCELLED) return;
    if (stop.WaitStopped(absl::Milliseconds(200))) return;
  }
}

}  // namespace

int RunDemo(const std::string& address, const std::string& spec_path) {
  std::string path = FindSpec(spec_path);
  std::ifstream in(path);
  if (!in) {
    std::cerr << "trainyard up --demo: cannot read " << path << "\n";
    return kExitFailure;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto stub = MakeStub(address);
  v1::SubmitRequest req;
  req.set_yaml(text.str());
  v1::SubmitResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->Submit(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError("up --demo", address, st);
  const std::string job = resp.job();
  std::error_code ec;
  std::cout << "demo: submitted " << std::filesystem::absolute(path, ec).string() << " as job " << job << std::endl;

  // Follow the first worker's log on a second stream while polling the state.
  LogStop log_stop;
  std::thread follower([&] {
    FollowWorkerLog(*stub, job, log_stop);
    log_stop.Done();
  });
  std::string last;
  v1::JobView v;
  absl::Time deadline = absl::Now() + absl::Minutes(5);
  while (absl::Now() < deadline) {
    v1::DescribeJobRequest dr;
    dr.set_job(job);
    auto dctx = Context();
    if (stub->DescribeJob(dctx.get(), dr, &v).ok()) {
      if (api::IsTerminal(v.state())) break;  // printed below, after the last log lines
      std::string line = api::JobStateName(v.state()) + (v.reason().empty() ? "" : " (" + v.reason() + ")");
      if (line != last) std::cout << "demo: job " << job << " " << line << std::endl;
      last = line;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // The log stream ends by itself once the server has sent everything the
  // ended task wrote; the job's end is printed after it, as the last word.
  log_stop.WaitDone(absl::Seconds(10));
  log_stop.Stop();
  follower.join();
  std::cout << "demo: job " << job << " " << api::JobStateName(v.state())
            << (v.reason().empty() ? "" : " (" + v.reason() + ")") << "\n"
            << "demo: its logs: " << SelfPath() << " logs " << job << " --server " << address << std::endl;
  return v.state() == v1::JOB_SUCCEEDED ? kExitOk : kExitFailure;
}

}  // namespace trainyard::cli
