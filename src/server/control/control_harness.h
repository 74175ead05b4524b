// ControlHarness: drives one ControlState with a script of events in any
// order a peer, the network or an operator could produce them, and checks
// its invariants (ControlState::CheckInvariantsForTest) after each. The
// world around the state is simulated: three nodes whose agents keep tasks,
// answer launches and kills, restart and end tasks, heartbeat, pause
// (SIGSTOP), lose their stream, reconnect (twice), crash; each agent's link
// follows the real agent's rules (api::LinkState: statuses written while no
// stream is registered are replayed first on the next, ends are repeated in
// its heartbeats), and what it wrote to a stream that broke before the
// server read it is lost; clients that
// submit, kill and delete; job masters with verdicts; a store (in memory)
// that the server restarts from. For the event-order property test
// (control_harness_test.cc) and the control-state fuzzer (fuzz/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace trainyard::server {

// Runs the events `script` encodes (each byte picks an event, the bytes
// after it its arguments; a script of any bytes is valid). Returns OK, or
// Internal naming the step, the event and the invariant broken. An abort
// inside the control state is the test's failure (no CHECK may be reached).
// `trace`, when given, gets one line per event.
absl::Status RunControlScript(std::string_view script, std::string* trace = nullptr);

// A script of `steps` random events from `seed` (deterministic).
std::string RandomControlScript(uint64_t seed, int steps);

}  // namespace trainyard::server
