// WriteBatch builders and the state predicates shared by every store.
#include <utility>

#include "store/state_store.h"

namespace trainyard {

void WriteBatch::CreateJob(v1::JobRecord job, v1::JobEventRecord first_event) {
  ops_.emplace_back(CreateJobOp{std::move(job), std::move(first_event)});
}

void WriteBatch::UpdateJob(v1::JobRecord job) { ops_.emplace_back(UpdateJobOp{std::move(job)}); }

void WriteBatch::PutTask(uint64_t job_id, v1::TaskRecord task) {
  ops_.emplace_back(PutTaskOp{job_id, std::move(task)});
}

void WriteBatch::AppendEvent(v1::JobEventRecord event) {
  ops_.emplace_back(AppendEventOp{std::move(event)});
}

void WriteBatch::PutNode(v1::NodeRecord node) { ops_.emplace_back(PutNodeOp{std::move(node)}); }

void WriteBatch::DeleteNode(std::string name) { ops_.emplace_back(DeleteNodeOp{std::move(name)}); }

void WriteBatch::DeleteMeta(std::string key) { ops_.emplace_back(DeleteMetaOp{std::move(key)}); }

void WriteBatch::PutMeta(std::string key, std::string value) {
  ops_.emplace_back(PutMetaOp{std::move(key), std::move(value)});
}

void WriteBatch::PurgeJob(uint64_t id) { ops_.emplace_back(PurgeJobOp{id}); }

}  // namespace trainyard
