// For the log hub's and the exec relay's tests: a LogBackend that keeps the
// orders it is given, as the agent would receive them, for the nodes in
// `connected` (an order for another node is refused, as for a node with no
// connection). Places are the test's to give (`jobs`).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/logs/log_hub.h"

namespace trainyard::server::testing {

class RecordingLogBackend : public LogBackend {
 public:
  absl::StatusOr<JobLogPlaces> Places(const std::string& job) override {
    auto it = jobs.find(job);
    if (it == jobs.end()) return absl::NotFoundError("job '" + job + "' does not exist");
    return it->second;
  }
  bool ReadLog(const std::string& node, v1::LogRead read) override {
    return Keep(node, [&](v1::ServerMessage& m) { *m.mutable_read_log() = std::move(read); });
  }
  bool AckLog(const std::string& node, v1::LogAck ack) override {
    return Keep(node, [&](v1::ServerMessage& m) { *m.mutable_ack_log() = std::move(ack); });
  }
  bool CancelLog(const std::string& node, v1::LogCancel cancel) override {
    return Keep(node, [&](v1::ServerMessage& m) { *m.mutable_cancel_log() = std::move(cancel); });
  }
  bool OpenExec(const std::string& node, v1::ExecOpen open) override {
    return Keep(node, [&](v1::ServerMessage& m) { *m.mutable_exec_open() = std::move(open); });
  }
  bool ExecInput(const std::string& node, v1::ExecInput input) override {
    return Keep(node, [&](v1::ServerMessage& m) { *m.mutable_exec_input() = std::move(input); });
  }

  std::map<std::string, JobLogPlaces> jobs;
  std::set<std::string> connected{"n1", "n2"};
  std::vector<std::pair<std::string, v1::ServerMessage>> sent;

 private:
  template <typename Fill>
  bool Keep(const std::string& node, Fill fill) {
    if (!connected.count(node)) return false;
    v1::ServerMessage m;
    fill(m);
    sent.emplace_back(node, std::move(m));
    return true;
  }
};

}  // namespace trainyard::server::testing
