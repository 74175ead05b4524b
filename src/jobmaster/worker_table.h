// The worker table: a job's members (who is where: address, port, role,
// index, node, restarts) in a compact column form for discovery at scale.
// The master encodes it once per membership version and writes the same
// bytes to every worker that asks; a worker decodes it back into one
// WorkerInfo per joined worker. Columns hold deltas and string indexes, and
// are zlib-compressed, so a 100,000-rank job's table takes a few bytes per
// worker instead of the ~26-60 of a WorkerStatus row.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "proto/jobmaster.pb.h"

namespace trainyard::jobmaster {

namespace pb = ::trainyard::v1;

// Builds one WorkerTable. Add the joined workers in increasing id order,
// then Finish. Not reusable after Finish.
class WorkerTableEncoder {
 public:
  // `job_name` lets the usual task name ("<job>-<role>-<index>") go unsent.
  explicit WorkerTableEncoder(std::string job_name);

  // Adds worker `info.worker_id()`, reachable at `address` (its ip, else the
  // address its connection came from). REQUIRES: ids increase from call to call.
  void Add(const pb::WorkerInfo& info, const std::string& address, int restart_count);

  // The serialized WorkerTable for a job of `num_workers` at `version`
  // (the body of a JobMasterResponse's `table`).
  std::string Finish(int num_workers, int64_t version);

 private:
  uint32_t Intern(const std::string& s);
  uint32_t InternResource(const pb::Resource& resource);

  pb::WorkerColumns columns_;
  absl::flat_hash_map<std::string, uint32_t> strings_;
  absl::flat_hash_map<std::string, uint32_t> resources_;
  int last_id_ = -1;
  int64_t last_address_ = 0, last_port_ = 0, last_node_ = 0, last_index_ = 0, last_ports_ = 0;
};

// One worker as a decoded table gives it.
struct TableRow {
  pb::WorkerInfo info;  // ip = the worker's address; task_name filled in
  int restart_count = 0;
};

// The table in `table` (not `unchanged`) as rows ordered by worker id.
// Returns DATA_LOSS naming the field when the columns are malformed (bad
// compression, a column of the wrong length, an index out of range).
absl::Status DecodeWorkerTable(const pb::WorkerTable& table, std::vector<TableRow>* rows);

}  // namespace trainyard::jobmaster
