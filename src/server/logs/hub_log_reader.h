// HubLogReader: the REST API's LogReader (server/http/log_reader.h) over the
// log hub — one follower, waited on with a condition variable instead of a
// gRPC reactor: the HTTP handler that reads it owns its thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/http/log_reader.h"
#include "security/principal.h"
#include "server/logs/log_hub.h"

namespace trainyard::server {

// Whose log stream it is, for the hub's per-user limits: the caller; with
// security off (every caller anonymous, names unchecked) the job's owner.
std::string LogStreamUser(const security::Principal& who, const std::string& job_owner);

class HubLogReader final : public http::LogReader {
 public:
  // Opens a follower for `request`, counted against `user` (LogHub::Open's
  // errors). REQUIRES: hub outlives the reader.
  static absl::StatusOr<http::LogReaderPtr> Open(LogHub* hub, const v1::LogsRequest& request,
                                                 const std::string& user);
  ~HubLogReader() override;

  http::LogRead Next(absl::Time deadline) override;

 private:
  struct Sink;
  HubLogReader(LogHub* hub, std::shared_ptr<Sink> sink) : hub_(hub), sink_(std::move(sink)) {}

  LogHub* const hub_;
  const std::shared_ptr<Sink> sink_;
  uint64_t id_ = 0;
  bool taken_ = false;  // a chunk was returned and not yet acknowledged
};

}  // namespace trainyard::server
