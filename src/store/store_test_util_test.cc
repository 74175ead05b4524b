// Helpers for the store tests (compiled into the test program only, hence the
// _test suffix): temp dirs and small records.
#include <google/protobuf/util/message_differencer.h>
#include <stdlib.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "store/store_test_util.h"

namespace trainyard::store_test {

TempDir::TempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr ? base : std::filesystem::temp_directory_path().string(),
                   "/trainyard_store_XXXXXX");
  path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

v1::JobRecord MakeJob(uint64_t id, int tasks, const std::string& queue, const std::string& user) {
  v1::JobRecord job;
  job.set_id(id);
  job.set_name(absl::StrCat("job-", id));
  job.set_state(v1::JOB_QUEUED);
  job.set_submit_time_ms(1700000000000 + static_cast<int64_t>(id));
  job.set_pending_reason("waiting for 1 GPU");
  v1::JobSpec& spec = *job.mutable_spec();
  spec.set_name(job.name());
  spec.set_user(user);
  spec.set_queue(queue);
  v1::ReplicaSpec& replica = *spec.add_replicas();
  replica.set_role("worker");
  replica.set_count(tasks);
  replica.mutable_resources()->set_gpus(1);
  replica.add_command("python3");
  replica.add_command("train.py");
  for (int i = 0; i < tasks; ++i) {
    v1::TaskRecord& task = *job.add_tasks();
    task.set_role("worker");
    task.set_index(i);
    task.set_worker_id(i);
    task.set_state(v1::TASK_PENDING);
  }
  return job;
}

v1::JobEventRecord MakeEvent(uint64_t id, const std::string& kind, int64_t time_ms) {
  v1::JobEventRecord event;
  event.set_job_id(id);
  event.set_time_ms(time_ms);
  event.set_kind(kind);
  event.set_text(absl::StrCat(kind, " job ", id));
  return event;
}

v1::NodeRecord MakeNode(const std::string& name, v1::NodeState state) {
  v1::NodeRecord node;
  node.mutable_info()->set_name(name);
  node.mutable_info()->set_address("10.0.0.1");
  node.mutable_info()->set_state(state);
  node.mutable_info()->mutable_capacity()->set_gpus(8);
  node.mutable_info()->mutable_topology()->set_gpu_count(8);
  node.set_registered_time_ms(1700000000000);
  return node;
}

bool SameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace trainyard::store_test
