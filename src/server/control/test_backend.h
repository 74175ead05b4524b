// An ExecutionBackend for the control state's tests: it records every order
// it is given, per node, for the test to read back.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/execution_backend.h"

namespace trainyard::server::testing {

class RecordingBackend : public ExecutionBackend {
 public:
  void Registered(const std::string& node, uint64_t session, const v1::Registered& ack) override {
    registered.push_back(node);
    sessions.push_back(session);
    acks.push_back(ack);
  }
  void Launch(const std::string& node, v1::TaskSpec t) override { launches.emplace_back(node, std::move(t)); }
  void Kill(const std::string& node, const v1::KillTask& k) override { kills.emplace_back(node, k); }
  void UpdateFiles(const std::string& node, const v1::TaskFiles& f) override { files.emplace_back(node, f); }
  void Drained(const std::string& node) override { drained.push_back(node); }
  void OrderCheckpoint(const std::string& job_master, uint64_t /*job_id*/, const std::string& /*job*/,
                       const v1::CheckpointOrder& order) override {
    orders.emplace_back(job_master, order);
  }

  std::vector<std::string> registered;
  std::vector<uint64_t> sessions;    // beside `registered`: the connection that registered
  std::vector<v1::Registered> acks;  // beside `registered`
  std::vector<std::pair<std::string, v1::TaskSpec>> launches;
  std::vector<std::pair<std::string, v1::KillTask>> kills;
  std::vector<std::pair<std::string, v1::TaskFiles>> files;
  std::vector<std::string> drained;
  std::vector<std::pair<std::string, v1::CheckpointOrder>> orders;  // master address, order
};

}  // namespace trainyard::server::testing
