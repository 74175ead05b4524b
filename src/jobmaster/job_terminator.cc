// JobTerminator implementations that do not need the server.
#include "jobmaster/job_terminator.h"

#include <fstream>

#include "common/logging.h"

namespace trainyard::jobmaster {

const char* JobOutcomeName(JobOutcome outcome) {
  return outcome == JobOutcome::kSucceeded ? "SUCCEEDED" : "FAILED";
}

StreamJobTerminator::StreamJobTerminator(std::ostream* out, std::string outcome_file)
    : out_(out), outcome_file_(std::move(outcome_file)) {}

void StreamJobTerminator::Terminate(const JobEnd& end) {
  std::string line = "job " + end.job + " " + JobOutcomeName(end.outcome) + ": " + end.reason;
  *out_ << line << std::endl;
  if (outcome_file_.empty()) return;
  std::ofstream file(outcome_file_, std::ios::trunc);
  file << line << "\n";
  if (!file) {
    Log(LogLevel::kError, "jobmaster", "cannot write the job outcome to %s", outcome_file_);
  }
}

}  // namespace trainyard::jobmaster
