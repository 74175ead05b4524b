// cli::Failover (failover.h): when a watching verb's call is made again.
#include "cli/failover.h"

#include <iostream>

#include "absl/time/clock.h"
#include "cli/client.h"
#include "common/server_list_channel.h"

namespace trainyard::cli {

Failover::Failover(const char* verb, std::string address, std::shared_ptr<grpc::Channel> channel)
    : verb_(verb), address_(std::move(address)), channel_(channel ? std::move(channel) : MakeChannel(address_)),
      stub_(v1::Trainyard::NewStub(channel_)) {}

bool Failover::Retry(const grpc::Status& status) {
  if (!answered_ || (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
                     status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)) {
    return false;
  }
  const absl::Time now = absl::Now();
  if (!gone_since_) {
    gone_since_ = now;
    std::cerr << "trainyard " << verb_ << ": no answer from the server (" << status.error_message()
              << "); asking the servers again for up to " << kFailoverWaitSeconds << " s\n";
  }
  const absl::Time until = *gone_since_ + absl::Seconds(kFailoverWaitSeconds);
  if (now >= until) return false;
  if (ServerGone(status, channel_.get())) {
    channel_ = MakeChannel(address_);
    stub_ = v1::Trainyard::NewStub(channel_);
  }
  if (!channel_->WaitForConnected(absl::ToChronoTime(until))) return false;
  // A server that answers but fails the call (it is still loading the state)
  // is not asked again at once.
  absl::SleepFor(absl::Milliseconds(200));
  return true;
}

}  // namespace trainyard::cli
