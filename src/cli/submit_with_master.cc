// A job master inside the submitting client.
#include "cli/submit_with_master.h"

#include <unistd.h>

#include <iostream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "api/states.h"
#include "cli/client.h"
#include "cli/verbs.h"
#include "common/clock.h"
#include "jobmaster/jobmaster_server.h"
#include "jobmaster/server_job_terminator.h"
#include "jobmaster/summary_reporter.h"
#include "api/task_env.h"

namespace trainyard::cli {
namespace {

// Reports the job under the name the server gave it (known only after the
// submission, which needs the master's address first).
class NamedTerminator : public jobmaster::JobTerminator {
 public:
  explicit NamedTerminator(jobmaster::JobTerminator* inner) : inner_(inner) {}
  void SetName(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    name_ = name;
  }
  void Terminate(const jobmaster::JobEnd& end) ABSL_LOCKS_EXCLUDED(mu_) override {
    jobmaster::JobEnd named = end;
    {
      absl::MutexLock lock(&mu_);
      if (!name_.empty()) named.job = name_;
    }
    inner_->Terminate(named);
  }

 private:
  jobmaster::JobTerminator* const inner_;
  absl::Mutex mu_;
  std::string name_ ABSL_GUARDED_BY(mu_);
};

std::string HostFor(const std::string& server, const std::string& advertise) {
  if (!advertise.empty()) return advertise;
  if (absl::StartsWith(server, "127.") || absl::StartsWith(server, "localhost")) return "127.0.0.1";
  char host[256] = {0};
  return gethostname(host, sizeof(host) - 1) == 0 && host[0] ? host : "127.0.0.1";
}

// The master's loop on its own thread; Stop ends it and says how it ended:
// a master that failed (its listener or event loop) is the reason the job's
// workers could not report, so the user is told, not left guessing.
class MasterLoop {
 public:
  explicit MasterLoop(jobmaster::JobMasterServer* master)
      : master_(master), thread_([this] { status_ = master_->Run(absl::Seconds(1)); }) {}
  void Stop() {
    master_->Stop();
    thread_.join();
    if (!status_.ok()) std::cerr << "trainyard submit: the job master stopped: " << status_.message() << "\n";
  }

 private:
  jobmaster::JobMasterServer* const master_;
  absl::Status status_;  // written by thread_ only, read after it is joined
  std::thread thread_;
};

}  // namespace

int SubmitWithMaster(v1::Trainyard::Stub& stub, const std::string& server_address, v1::JobSpec spec,
                     const std::string& advertise_host) {
  jobmaster::StreamJobTerminator printer(&std::cout, "");
  // A master inside the client speaks with the user's token.
  const jobmaster::ReportCredentials credentials{.job_token = "", .bearer = ClientToken(), .server_ca_pem = ServerCaPem()};
  jobmaster::ServerJobTerminator to_server(server_address, &printer, credentials);
  NamedTerminator named(&to_server);
  jobmaster::JobMasterConfig config;
  config.job_name = spec.name();
  config.num_workers = std::max(1, api::WorkerCount(spec));
  RealClock clock;
  auto master = jobmaster::JobMasterServer::Create(config, &named, &clock);
  if (!master.ok()) {
    std::cerr << "trainyard submit: cannot start the job master: " << master.status().message() << "\n";
    return kExitFailure;
  }
  MasterLoop loop(master->get());
  std::string address = absl::StrCat(HostFor(server_address, advertise_host), ":", (*master)->port());
  spec.set_job_master_address(address);
  v1::SubmitRequest req;
  *req.mutable_spec() = spec;
  v1::SubmitResponse resp;
  auto ctx = Context();
  grpc::Status st = stub.Submit(ctx.get(), req, &resp);
  if (!st.ok()) {
    loop.Stop();
    return ReportError("submit", server_address, st);
  }
  named.SetName(resp.job());
  std::cout << "job " << resp.job() << " submitted; its master runs here at " << address << std::endl;
  // Its figures for the server's /metrics, as a master task sends them
  // (jobmaster/summary_reporter.h), with the user's token.
  jobmaster::SummaryReporter figures(server_address, credentials, master->get(), resp.job());
  figures.Start();
  v1::JobView v;
  std::string last;
  for (;;) {
    v1::DescribeJobRequest dr;
    dr.set_job(resp.job());
    auto dctx = Context();
    if (stub.DescribeJob(dctx.get(), dr, &v).ok()) {
      std::string line = v1::JobState_Name(v.state()) + (v.reason().empty() ? "" : ": " + v.reason());
      if (line != last) std::cout << resp.job() << ": " << line.substr(line.find('_') + 1) << std::endl;
      last = line;
      // A job past its time limit is ordered to checkpoint first: this
      // master serves its workers until the order is answered.
      if (api::IsTerminal(v.state()) && v.checkpoint_order().id() == 0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // polling the server
  }
  loop.Stop();
  figures.Finish();
  to_server.WaitDelivered(5);
  return v.state() == v1::JOB_SUCCEEDED ? kExitOk : kExitFailure;
}

}  // namespace trainyard::cli
