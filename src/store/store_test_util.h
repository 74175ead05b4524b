// Helpers for the store tests: temp dirs and small records.
#pragma once

#include <cstdint>
#include <string>

#include "proto/trainyard.pb.h"

namespace trainyard::store_test {

// A fresh directory under the test temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Returns a job `id` named "job-<id>" in `queue` with one task per role in
// `roles` ("worker" by default), QUEUED.
v1::JobRecord MakeJob(uint64_t id, int tasks = 1, const std::string& queue = "default",
                      const std::string& user = "alice");

// Returns an event of `kind` for job `id`.
v1::JobEventRecord MakeEvent(uint64_t id, const std::string& kind, int64_t time_ms = 1000);

// Returns a node named `name` with 8 GPUs.
v1::NodeRecord MakeNode(const std::string& name, v1::NodeState state = v1::NODE_READY);

// Returns true when two messages are equal, field by field.
bool SameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b);

}  // namespace trainyard::store_test
