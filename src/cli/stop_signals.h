// The signals that stop a daemon verb (SIGINT, SIGTERM), taken one way by
// all of them: blocked in every thread, then waited for by one.
#pragma once

namespace trainyard::cli {

// Blocks SIGINT and SIGTERM in the calling thread. REQUIRES: called before
// the threads that must not take them start (they inherit the mask), so only
// WaitForStopSignal sees them.
void BlockStopSignals();

// Waits until SIGINT or SIGTERM arrives and returns its number. REQUIRES:
// BlockStopSignals was called in this thread or before it started.
int WaitForStopSignal();

}  // namespace trainyard::cli
