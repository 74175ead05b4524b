// The job master's periodic figures to the server (see summary_reporter.h).
#include "jobmaster/summary_reporter.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/histogram.h"
#include "common/logging.h"
#include "common/server_list_channel.h"
#include "grpcpp/grpcpp.h"
#include "proto/service.grpc.pb.h"

namespace trainyard::jobmaster {

struct SummaryReporter::Shared {
  absl::Mutex mu;
  bool stop ABSL_GUARDED_BY(mu) = false;
  // Used by the reporter's thread only (and by Finish once it has ended).
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Trainyard::Stub> stub;
};

v1::JobMasterSummary BuildSummary(const MasterState& state, const std::string& job, int connections) {
  v1::JobMasterSummary s;
  s.set_job(job);
  for (int w = pb::UNASSIGNED; w <= pb::ERROR; ++w) s.add_workers_by_state(state.CountIn(static_cast<pb::WorkerState>(w)));
  s.set_connections(connections);
  const Histogram& h = state.barrier_seconds();
  for (int i = 0; i < h.buckets(); ++i) s.add_barrier_bounds_seconds(h.bound(i));
  for (int i = 0; i <= h.buckets(); ++i) s.add_barrier_buckets(h.in_bucket(i));
  s.set_barrier_seconds_sum(h.sum());
  s.set_master_address(ReportedMasterAddress());
  return s;
}

SummaryReporter::SummaryReporter(std::string server_address, ReportCredentials credentials, JobMasterServer* master,
                                 std::string job, absl::Duration every)
    : address_(std::move(server_address)),
      credentials_(std::move(credentials)),
      master_(master),
      job_(std::move(job)),
      every_(every),
      shared_(std::make_shared<Shared>()) {
  shared_->channel = ServerChannel(address_, credentials_);
  shared_->stub = v1::Trainyard::NewStub(shared_->channel);
}

SummaryReporter::~SummaryReporter() {
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->stop = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SummaryReporter::Start() {
  thread_ = std::thread([this] {
    bool warned = false;
    while (true) {
      {
        absl::MutexLock lock(&shared_->mu);
        if (shared_->mu.AwaitWithTimeout(absl::Condition(&shared_->stop), every_)) return;
      }
      v1::JobMasterSummary summary;
      bool built = master_->Inspect([&](const MasterState& state) {
        summary = BuildSummary(state, job_, master_->connection_count());
      });
      if (!built) return;  // the loop ended: Finish sends the last one
      if (!Send(summary, every_) && !warned) {
        warned = true;  // once: a server that is away would fill the log
        Log(LogLevel::kWarning, "jobmaster", "the server at %s did not take this master's figures for /metrics",
            address_);
      }
    }
  });
}

bool SummaryReporter::Finish(absl::Duration wait) {
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->stop = true;
  }
  if (thread_.joinable()) thread_.join();
  v1::JobMasterSummary summary = BuildSummary(master_->state_after_run(), job_, 0);
  summary.set_final(true);
  return Send(summary, wait);
}

bool SummaryReporter::Send(const v1::JobMasterSummary& summary, absl::Duration wait) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + wait));
  PresentCredentials(credentials_, &ctx);
  v1::JobMasterSummaryResponse resp;
  grpc::Status st = shared_->stub->ReportJobMasterSummary(&ctx, summary, &resp);
  if (!st.ok()) Log(LogLevel::kDebug, "jobmaster", "figures for /metrics: %s", st.error_message());
  // The server gone (a failover): the next report goes through a new
  // channel, which dials every server of a list at once, not when the old
  // one's backoff for each would let it.
  if (ServerGone(st, shared_->channel.get())) {
    shared_->channel = ServerChannel(address_, credentials_);
    shared_->stub = v1::Trainyard::NewStub(shared_->channel);
  }
  // The server's order to checkpoint rides on its answer (the master takes
  // each order once).
  if (st.ok() && resp.checkpoint().id() > 0 && !summary.final()) {
    master_->Post([order = resp.checkpoint()](MasterState& state, absl::Time now) {
      state.OnCheckpointOrder(order, now);
    });
  }
  return st.ok();
}

}  // namespace trainyard::jobmaster
