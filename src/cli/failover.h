// A verb that watches (submit --wait, jobs -w, describe -w) through a
// failover or a server restart: a call that finds no server answering
// (UNAVAILABLE; or its deadline passed on a leader that went silent, until a
// ping goes unanswered) is made again at whichever server answers next,
// through a new channel that dials every server of a list at once, for up to
// kFailoverWaitSeconds without an answer; then the verb fails as before. Only
// once a server has answered: a wrong address, a server that is down or a
// CA that does not match still fails the first call at once.
// What a watch shows is the job's state now, so nothing it carried is lost:
// a state that came and went during the gap is not printed.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/service.grpc.pb.h"

namespace trainyard::cli {

inline constexpr int kFailoverWaitSeconds = 60;

class Failover {
 public:
  // `channel`: one the verb already holds to `address` (its connection is
  // kept); null: a new one.
  Failover(const char* verb, std::string address, std::shared_ptr<grpc::Channel> channel = nullptr);

  // The stub to call now (a new one after a Retry that made a new channel).
  v1::Trainyard::Stub& stub() { return *stub_; }

  // After a call that failed with `status`: true when it is to be made again
  // (a server answered before, none does now, and not for
  // kFailoverWaitSeconds yet), once a server answers. Says so on standard
  // error once an outage.
  bool Retry(const grpc::Status& status);
  // After a call that succeeded: an outage, if any, is over.
  void Answered() {
    answered_ = true;
    gone_since_.reset();
  }

 private:
  const char* const verb_;
  const std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Trainyard::Stub> stub_;
  bool answered_ = false;
  std::optional<absl::Time> gone_since_;
};

}  // namespace trainyard::cli
