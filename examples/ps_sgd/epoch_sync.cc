// EpochSync implementations: none, and the job master's barrier through the
// worker library (JobMasterClient).
#include "ps_sgd/epoch_sync.h"

#include <thread>

#include "absl/time/clock.h"

#include "absl/strings/str_cat.h"
#include "jobmaster/client/job_master_client.h"

namespace trainyard::examples {
namespace {

class NoSync : public EpochSync {
 public:
  absl::Status Start() override { return absl::OkStatus(); }
  absl::Status Barrier(const std::string&) override { return absl::OkStatus(); }
  absl::Status Complete() override { return absl::OkStatus(); }
};

class JobMasterSync : public EpochSync {
 public:
  explicit JobMasterSync(absl::Duration barrier_timeout) : barrier_timeout_(barrier_timeout) {}

  absl::Status Start() override {
    auto options = jobmaster::ClientOptionsFromEnvironment();
    if (!options.ok()) return options.status();
    auto client = jobmaster::JobMasterClient::Start(*std::move(options));
    if (!client.ok()) return client.status();
    client_ = *std::move(client);
    return client_->SetState(jobmaster::pb::RUNNING, "", absl::Seconds(30));
  }

  absl::Status Barrier(const std::string& what) override {
    absl::Time deadline = absl::Now() + barrier_timeout_;
    for (;;) {
      absl::Status s = client_->WaitOnBarrier(deadline - absl::Now());
      if (s.ok()) return s;
      bool retry = s.code() == absl::StatusCode::kAborted || s.code() == absl::StatusCode::kUnavailable;
      if (!retry || absl::Now() + absl::Milliseconds(100) > deadline) {
        return absl::Status(s.code(), absl::StrCat("barrier at ", what, ": ", s.message()));
      }
      // Another worker ended or is restarting: wait for it to come back.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  absl::Status Complete() override {
    return client_->SetState(jobmaster::pb::COMPLETED, "", absl::Seconds(30));
  }

 private:
  absl::Duration barrier_timeout_;
  std::unique_ptr<jobmaster::JobMasterClient> client_;
};

}  // namespace

std::unique_ptr<EpochSync> MakeNoSync() { return std::make_unique<NoSync>(); }

std::unique_ptr<EpochSync> MakeJobMasterSync(absl::Duration barrier_timeout) {
  return std::make_unique<JobMasterSync>(barrier_timeout);
}

}  // namespace trainyard::examples
