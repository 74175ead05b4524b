// The inputs Trainyard reads from strangers and users, one entry point per
// fuzz target: each takes arbitrary bytes, runs them through the same code
// the daemons run, and aborts (TY_CHECK) when an invariant breaks. The
// libFuzzer programs (fuzzer.cc, the `fuzz` preset) and the corpus replay
// test (corpus_test.cc, every build) call these, so a crash the fuzzers
// found stays a test everywhere.
#pragma once

#include <string_view>
#include <vector>

namespace trainyard::fuzz {

struct Target {
  const char* name;  // also the corpus directory: fuzz/corpus/NAME
  void (*run)(std::string_view data);
};

// Every target, in a fixed order.
const std::vector<Target>& Targets();
// The target called `name`, or null.
const Target* FindTarget(std::string_view name);

// The job spec YAML: parse, validate, convert to the scheduler's request.
void JobSpec(std::string_view data);
// Bytes on job-master connections: framing, decoding and MasterState.
void JobMaster(std::string_view data);
// GPU topology text: the spec form and `nvidia-smi topo -m`.
void Topology(std::string_view data);
// Port range text, and the set operations on two of them.
void PortRanges(std::string_view data);
// The queue config YAML.
void QueueConfig(std::string_view data);
// The simulator's CSV: node lists and traces (Alibaba, Trainyard).
void Traces(std::string_view data);
// A script of events in any order (agents, clients, job masters, server
// restarts) through the server's ControlState, its invariants checked after
// each (server/control_harness.h; control_entry.cc).
void ControlEvents(std::string_view data);

}  // namespace trainyard::fuzz
