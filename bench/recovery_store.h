// The store a restart is measured on (store_bench's recovery, recovery_bench):
// 10,000 nodes of 16 GPUs and 12,500 running jobs of 8 one-GPU workers, each
// task with its own GPU and port on its node (10 tasks a node; 6 GPUs a node
// stay free).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/trainyard.pb.h"
#include "store/sqlite_state_store.h"

namespace trainyard::bench {

constexpr int kNodes = 10000;
constexpr int kJobs = 12500;

inline v1::NodeInfo NodeOf(int n) {
  v1::NodeInfo info;
  info.set_name(absl::StrCat("node-", n));
  info.set_address(absl::StrCat("10.", n / 256, ".", n % 256, ".1"));
  info.mutable_capacity()->set_memory_mb(65536);
  info.mutable_capacity()->set_vcores_milli(32000);
  info.mutable_capacity()->set_gpus(16);
  v1::PortRange* p = info.mutable_capacity()->add_ports();
  p->set_begin(30000);
  p->set_end(30999);
  info.mutable_topology()->set_gpu_count(16);
  for (int s = 0; s < 8; ++s) info.mutable_topology()->add_switches(3ull << (2 * s));
  info.mutable_topology()->add_sockets(0xff);
  info.mutable_topology()->add_sockets(0xff00);
  return info;
}

inline v1::JobSpec WorkerSpec(const std::string& name, int count) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_user("default");
  spec.set_queue("default");
  v1::ReplicaSpec* rs = spec.add_replicas();
  rs->set_role("worker");
  rs->set_count(count);
  rs->mutable_resources()->set_gpus(1);
  rs->mutable_resources()->set_port_count(1);
  rs->add_command("true");
  return spec;
}

// Calls `add` with a batch per node and per job of that store.
template <typename Add>
void ForEachBatch(Add add) {
  for (int n = 0; n < kNodes; ++n) {
    v1::NodeRecord node;
    *node.mutable_info() = NodeOf(n);
    WriteBatch batch;
    batch.PutNode(std::move(node));
    add(std::move(batch));
  }
  int slot = 0;
  for (uint64_t id = 1; id <= kJobs; ++id) {
    v1::JobRecord job;
    job.set_id(id);
    job.set_name(absl::StrCat("job-", id));
    *job.mutable_spec() = WorkerSpec(job.name(), 8);
    job.set_state(v1::JOB_RUNNING);
    for (int i = 0; i < 8; ++i, ++slot) {
      v1::TaskRecord& task = *job.add_tasks();
      task.set_role("worker");
      task.set_index(i);
      task.set_worker_id(i);
      task.set_state(v1::TASK_RUNNING);
      task.set_node(absl::StrCat("node-", slot % kNodes));
      task.mutable_allocation()->set_gpus(1);
      task.mutable_allocation()->set_gpu_mask(uint64_t{1} << (slot / kNodes));
      v1::PortRange& port = *task.mutable_allocation()->add_ports();
      port.set_begin(30000 + slot / kNodes);
      port.set_end(30000 + slot / kNodes);
    }
    WriteBatch batch;
    batch.CreateJob(std::move(job), v1::JobEventRecord());
    add(std::move(batch));
  }
}

// Writes that store into `dir` (fsync off), in one transaction.
inline absl::Status Fill(const std::string& dir) {
  SqliteStoreOptions options;
  options.sync = StoreSync::kOff;
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir, options);
  if (!store.ok()) return store.status();
  WriteBatch all;
  ForEachBatch([&](WriteBatch batch) {
    for (const WriteBatch::Op& op : batch.ops()) {
      if (const auto* node = std::get_if<WriteBatch::PutNodeOp>(&op)) all.PutNode(node->node);
      if (const auto* job = std::get_if<WriteBatch::CreateJobOp>(&op)) all.CreateJob(job->job, job->first_event);
    }
  });
  return (*store)->Commit(std::move(all));
}

}  // namespace trainyard::bench
