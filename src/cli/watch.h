// -w of `jobs` and `describe`: print, then print again whenever what the
// verb shows changed, until Ctrl-C (or, for describe, the job's end).
//
// It asks the server again every 500 ms with the verb's own call (ListJobs,
// DescribeJob) and prints when the answer differs from the last one, rather
// than holding a gRPC stream: those calls read only the server's published
// views (never its lock or its store), the server keeps nothing per
// watching terminal (nothing to bound, nothing left behind by a closed
// one), and a restarted server, a failover or a dropped connection costs
// calls made again until a server answers (cli/failover.h), not a stream
// to rebuild. What it costs is the answer every 500 ms
// even when nothing changed; the REST watch stream (docs/api.md) is the one
// that pushes changes, for the dashboard.
#pragma once

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/service.grpc.pb.h"

namespace trainyard::cli {

// Reads what to show through `stub` and prints it when it differs from what
// was printed last; sets *done when the watch should end.
using WatchStep = std::function<grpc::Status(v1::Trainyard::Stub& stub, bool* done)>;

// Runs `step` now and every `poll` after, until it is done (exit 0) or a
// call fails (its ReportError exit code); a call that found no server is
// made again once one answers, for up to a minute (cli/failover.h).
int WatchLoop(const char* verb, const std::string& address, const WatchStep& step,
              absl::Duration poll = absl::Milliseconds(500));

// Prints `text` as the watch's next screen: over the last one on a
// terminal, after a blank line otherwise (a file or a pipe keeps them all).
void PrintScreen(const std::string& text, bool first);

}  // namespace trainyard::cli
