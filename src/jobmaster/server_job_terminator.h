// ServerJobTerminator: the default way a job master ends its job — it tells
// the Trainyard server the outcome (ReportJobOutcome), which then stops the
// job's remaining tasks (parameter servers above all). The call runs on its
// own thread so the master's event loop never waits on the network; it is
// retried with backoff until the server answers or gives up for good.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "jobmaster/job_terminator.h"

namespace trainyard::jobmaster {

class ServerJobTerminator : public JobTerminator {
 public:
  // `also` (may be nullptr) is told too, e.g. to print the outcome.
  ServerJobTerminator(std::string server_address, JobTerminator* also);
  ~ServerJobTerminator() override;
  void Terminate(const JobEnd& end) override;
  // Waits (up to `seconds`) for the report to be delivered; true when it was
  // or when there was nothing to report (the master was stopped first).
  bool WaitDelivered(int seconds);

 private:
  struct State;
  std::string address_;
  JobTerminator* also_;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace trainyard::jobmaster
