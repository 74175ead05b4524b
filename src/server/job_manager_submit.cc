// JobManager: submissions — checked without the lock, prepared in a turn,
// sealed, made durable by the store, then taken in by one path
// (OnCommitted, TakeInCommitted) and answered when the turn that took them
// in ends (job_manager.h).
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/job_array.h"
#include "common/check.h"
#include "server/job_manager.h"
#include "store/etcd_state_store.h"

namespace trainyard::server {

absl::StatusOr<v1::SubmitResponse> JobManager::Submit(v1::JobSpec spec) {
  std::promise<absl::StatusOr<v1::SubmitResponse>> promise;
  std::future<absl::StatusOr<v1::SubmitResponse>> result = promise.get_future();
  SubmitAsync(std::move(spec), [&promise](absl::StatusOr<v1::SubmitResponse> r) { promise.set_value(std::move(r)); });
  return result.get();
}

void JobManager::SetSecretValues(SecretSealer seal, TaskSecrets::SecretOpener open) {
  seal_secret_ = std::move(seal);
  Turn turn(this);
  secrets_.SetSecretOpener(std::move(open));
}

absl::Status JobManager::SealSecrets(v1::JobSpec* spec) const {
  if (!seal_secret_) return absl::OkStatus();
  for (v1::ReplicaSpec& rs : *spec->mutable_replicas()) {
    for (auto& [name, value] : *rs.mutable_secret_env()) {
      absl::StatusOr<std::string> sealed = seal_secret_(value);
      if (!sealed.ok()) return sealed.status();
      value = *std::move(sealed);
    }
  }
  return absl::OkStatus();
}

void JobManager::SubmitAsync(v1::JobSpec spec, std::vector<std::string> parse_problems, SubmitDone done) {
  // Defaults, bounds, validation and the queue need none of the control
  // state: checked here on the caller's thread, no one else waits on them.
  absl::StatusOr<CheckedSpec> checked =
      CheckSubmission(std::move(spec), std::move(parse_problems), config_, queues_);
  if (!checked.ok()) {
    done(checked.status());
    return;
  }
  if (!checked->spec.array().empty()) {
    SubmitArray(*std::move(checked), std::move(done));
    return;
  }
  absl::StatusOr<PreparedJob> prepared;
  {
    Turn turn(this);
    prepared = control_.PrepareChecked(*std::move(checked), clock_->Now());
    if (prepared.ok()) ++submissions_unanswered_by_store_;
  }
  if (!prepared.ok()) {
    done(prepared.status());
    return;
  }
  // Validated in clear, sealed before anything keeps the record (the store,
  // the control state): docs/security.md.
  if (absl::Status sealed = SealSecrets(prepared->rec.mutable_spec()); !sealed.ok()) {
    {
      // Taken as a refused write: frees its name and its place in its
      // user's count. The answer is the sealing's error.
      Turn turn(this);
      if (--submissions_unanswered_by_store_ == 0 && stopping_) cv_.SignalAll();  // Stop waits for it
      absl::StatusOr<v1::SubmitResponse> refused = control_.AcceptCommitted(*prepared, sealed);
      TY_CHECK(!refused.ok(), "a job was accepted after a failed write");
    }
    done(sealed);
    return;
  }
  WriteBatch batch;
  batch.CreateJob(prepared->rec, prepared->first_event);
  auto jobs = std::make_shared<std::vector<PreparedJob>>();
  jobs->push_back(*std::move(prepared));
  store_->CommitAsync(std::move(batch), [this, jobs, done = std::move(done)](absl::Status st) mutable {
    OnCommitted({.jobs = std::move(jobs), .array = false, .st = std::move(st), .done = std::move(done)});
  });
}

void JobManager::OnCommitted(Committed committed) {
  Turn turn(this);
  if (--submissions_unanswered_by_store_ == 0 && stopping_) cv_.SignalAll();  // Stop waits for it
  committed_.push_back(std::move(committed));
  if (loop_running_ && !stopping_) {
    // The store answers a group commit's batches one after another: the
    // loop takes in all that wait into one round (one round per job cost
    // more than the jobs' own work), then answers.
    round_asked_ = true;
    loop_cv_.Signal();
    return;
  }
  TakeInCommitted();
  WakeIfAsked();
  control_.PublishJobs(&views_);  // describe right after the answer sees it
}

void JobManager::SubmitArray(CheckedSpec checked, SubmitDone done) {
  // Every element keeps a copy of the spec: bounded before any is made.
  absl::StatusOr<api::ArrayRange> range = api::ParseArrayRange(checked.spec.array());
  if (!range.ok()) {
    done(range.status());
    return;
  }
  const int64_t total = static_cast<int64_t>(checked.spec.ByteSizeLong()) * static_cast<int64_t>(range->indices.size());
  if (total > api::kMaxArrayTotalBytes) {
    done(absl::InvalidArgumentError(absl::StrCat(
        "array: ", range->indices.size(), " elements of a ", checked.spec.ByteSizeLong(), "-byte spec make ", total,
        " bytes, above the ", api::kMaxArrayTotalBytes, " bytes one array may hold (use fewer elements or a smaller spec)")));
    return;
  }
  absl::StatusOr<std::vector<PreparedJob>> prepared;
  {
    Turn turn(this);
    prepared = control_.PrepareArray(std::move(checked), clock_->Now());
    if (prepared.ok()) ++submissions_unanswered_by_store_;
  }
  if (!prepared.ok()) {
    done(prepared.status());
    return;
  }
  // etcd takes at most etcdMaxTxnOps keys in one transaction, and an array
  // is written in one (all or nothing): one that needs more is refused.
  if (absl::StartsWith(config_.store, "etcd")) {
    const int per_element = EtcdKeysToCreateJob(prepared->front().rec);
    const int n = static_cast<int>(prepared->size());
    if (int64_t{per_element} * n > config_.etcd_max_txn_ops) {
      absl::Status refused = absl::InvalidArgumentError(absl::StrCat(
          "array: ", n, " elements need ", int64_t{per_element} * n, " keys in one etcd transaction, above the ",
          config_.etcd_max_txn_ops, " of etcdMaxTxnOps; at most ", config_.etcd_max_txn_ops / per_element,
          " elements of this job fit (or raise etcd's --max-txn-ops and etcdMaxTxnOps)"));
      {
        Turn turn(this);
        if (--submissions_unanswered_by_store_ == 0 && stopping_) cv_.SignalAll();
        for (PreparedJob& p : *prepared) {
          absl::StatusOr<v1::SubmitResponse> undone = control_.AcceptCommitted(p, refused);
          TY_CHECK(!undone.ok(), "an array element was taken in after its array was refused");
        }
      }
      done(refused);
      return;
    }
  }
  absl::Status sealed;
  WriteBatch batch;
  for (PreparedJob& p : *prepared) {
    if (sealed.ok()) sealed = SealSecrets(p.rec.mutable_spec());
    batch.CreateJob(p.rec, p.first_event);
  }
  auto jobs = std::make_shared<std::vector<PreparedJob>>(*std::move(prepared));
  // One batch: the whole array is durable, or none of it; one answer.
  auto committed = [this, jobs, done = std::move(done)](absl::Status st) mutable {
    OnCommitted({.jobs = std::move(jobs), .array = true, .st = std::move(st), .done = std::move(done)});
  };
  if (!sealed.ok()) {
    committed(sealed);
    return;
  }
  store_->CommitAsync(std::move(batch), std::move(committed));
}

void JobManager::TakeInCommitted() {
  effects_.answers.reserve(effects_.answers.size() + committed_.size());
  for (Committed& c : committed_) {
    if (!c.array) {
      effects_.answers.emplace_back(std::move(c.done), control_.AcceptCommitted(c.jobs->front(), c.st));
      continue;
    }
    absl::StatusOr<v1::SubmitResponse> resp = v1::SubmitResponse();
    const std::string array = c.jobs->front().rec.array_job();  // taking in moves the records
    for (PreparedJob& p : *c.jobs) {
      absl::StatusOr<v1::SubmitResponse> one = control_.AcceptCommitted(p, c.st);
      if (!one.ok()) {
        resp = one.status();
        continue;
      }
      if (!resp.ok()) continue;
      resp->set_job(array);
      if (resp->job_id() == 0) resp->set_job_id(one->job_id());
      resp->add_array_jobs(one->job());
    }
    effects_.answers.emplace_back(std::move(c.done), std::move(resp));
  }
  committed_.clear();
}

}  // namespace trainyard::server
