// The polling loop of -w (see watch.h).
#include "cli/watch.h"

#include <unistd.h>

#include <iostream>

#include "absl/time/clock.h"
#include "cli/client.h"
#include "cli/failover.h"
#include "cli/verbs.h"

namespace trainyard::cli {

int WatchLoop(const char* verb, const std::string& address, const WatchStep& step, absl::Duration poll) {
  Failover failover(verb, address);
  for (;;) {
    bool done = false;
    grpc::Status st = step(failover.stub(), &done);
    if (!st.ok()) {
      if (failover.Retry(st)) continue;
      return ReportError(verb, address, st);
    }
    failover.Answered();
    if (done) return kExitOk;
    absl::SleepFor(poll);  // until the next call to the server
  }
}

void PrintScreen(const std::string& text, bool first) {
  static const bool tty = isatty(STDOUT_FILENO);
  if (tty) {
    std::cout << "\033[H\033[2J";  // cursor home, clear the screen
  } else if (!first) {
    std::cout << "\n";
  }
  std::cout << text << std::flush;
}

}  // namespace trainyard::cli
