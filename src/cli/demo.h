// The demo `trainyard up --demo` runs: submits a job spec and follows it —
// state changes and the chief worker's log (epoch, loss) — to its end.
#pragma once

#include <string>

namespace trainyard::cli {

// Returns 0 when the job SUCCEEDED. `spec_path` "" = examples/demo.yaml
// (from the working directory, else from the source tree).
int RunDemo(const std::string& address, const std::string& spec_path);

}  // namespace trainyard::cli
