// A blocking connection from a worker to its job master: connect with a
// deadline, send framed requests, receive framed responses with a deadline.
// The worker library runs one per worker process; the `trainyard worker`
// commands use one for a few requests and exit.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/jobmaster.pb.h"

namespace trainyard::jobmaster {

namespace pb = ::trainyard::v1;

struct HostPort {
  std::string host;
  int port = 0;
};

// Parses "host:port" (as in TRAINYARD_JOB_MASTER); errors name the text.
absl::StatusOr<HostPort> ParseHostPort(std::string_view text);

// The status an ErrorReply stands for (its code and message).
absl::Status StatusFromErrorReply(const pb::ErrorReply& error);

class FrameConnection {
 public:
  // Connects to `address` ("host:port"), retrying refused connections until
  // `deadline`. UNAVAILABLE names the address when it never answers.
  static absl::StatusOr<std::unique_ptr<FrameConnection>> Connect(std::string_view address,
                                                                  absl::Time deadline);
  ~FrameConnection();
  FrameConnection(const FrameConnection&) = delete;
  FrameConnection& operator=(const FrameConnection&) = delete;

  // Writes one request. Thread-safe with respect to other Sends.
  absl::Status Send(const pb::JobMasterRequest& request);
  // Reads the next response. DEADLINE_EXCEEDED when none came by `deadline`;
  // UNAVAILABLE when the master closed the connection. One reader at a time.
  absl::StatusOr<pb::JobMasterResponse> Receive(absl::Time deadline);
  // Sends `request` and returns the response carrying its request_id
  // (responses to other ids are skipped); an ErrorReply becomes its status.
  absl::StatusOr<pb::JobMasterResponse> Call(const pb::JobMasterRequest& request,
                                             absl::Time deadline);
  // Makes a blocked Receive return UNAVAILABLE. Thread-safe.
  void Shutdown();
  const std::string& address() const { return address_; }

 private:
  FrameConnection(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}

  int fd_;
  std::string address_;
  absl::Mutex write_mu_;  // one Send at a time on fd_
  std::string in_;
};

}  // namespace trainyard::jobmaster
