// SummaryReporter: sends the job master's figures (workers by state,
// connections, barrier latency) to the Trainyard server every ~2 s and once
// more when the master stops (ReportJobMasterSummary), with the same
// credential as its verdict. The server sums every master's figures into its
// own /metrics (server/master_metrics.h): a master has no metrics port of
// its own, so a job is never a new Prometheus target. Reports go out on the
// reporter's own thread; the event loop only builds the summary (Inspect).
// A report that fails is not retried: the next one carries newer figures.
// The server's answer carries the job's open order to checkpoint, if any
// (docs/jobmaster.md, "Checkpoints"): the reporter posts it to the master's
// loop, so the server reaches the master within one period.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "jobmaster/jobmaster_server.h"
#include "jobmaster/master_state.h"
#include "jobmaster/server_job_terminator.h"
#include "proto/service.pb.h"

namespace trainyard::jobmaster {

// The summary of `state` for job `job`, with `connections` open.
v1::JobMasterSummary BuildSummary(const MasterState& state, const std::string& job, int connections);

class SummaryReporter {
 public:
  // REQUIRES: `master` outlives the reporter.
  SummaryReporter(std::string server_address, ReportCredentials credentials, JobMasterServer* master,
                  std::string job, absl::Duration every = absl::Seconds(2));
  // Stops the reports (without the final one, unless Finish was called).
  ~SummaryReporter();

  // Starts reporting every `every` while the master's loop runs.
  void Start();
  // Stops the periodic reports and sends the final one, built from the
  // master's state after its Run returned; waits for the server up to
  // `wait`. True when the server took it.
  bool Finish(absl::Duration wait = absl::Seconds(2));

 private:
  struct Shared;
  bool Send(const v1::JobMasterSummary& summary, absl::Duration wait);

  const std::string address_;
  const ReportCredentials credentials_;
  JobMasterServer* const master_;
  const std::string job_;
  const absl::Duration every_;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace trainyard::jobmaster
