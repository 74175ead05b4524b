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
// The job token of JobMaster's master, the key of a pushed order's MAC
// (fuzz/jobmaster_seeds.cc writes a seed whose MAC matches).
inline constexpr char kJobMasterOrderKey[] = "fuzz-job-token";
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
// each (server/control/control_harness.h; control_entry.cc).
void ControlEvents(std::string_view data);

// Bytes sent to the server's HTTP endpoint on one connection: request
// lines, headers, queries and bodies of any route (http_entry.cc).
void HttpRequest(std::string_view data);
// Bytes of a request as the HTTP door frames them (request_frame.h): the
// head's end, its fields, chunked bodies, scanned whole and a byte at a time.
void HttpFrame(std::string_view data);
// The body of a REST call (the first byte picks submit as JSON, submit as
// YAML, or kill): the handlers' body parsing.
void RestBody(std::string_view data);
// One query string, sent to every route that reads parameters.
void QueryString(std::string_view data);
// An Authorization header's value: bearer and login tokens (security_entry.cc).
void BearerToken(std::string_view data);
// A JoinNode request: token, node name and certificate request.
void JoinRequest(std::string_view data);
// AgentMessages from a node to the server's control state and log hub
// (agent_entry.cc).
void AgentMessages(std::string_view data);
// A launch order (TaskSpec) through the agent's checks and conversion.
void LaunchOrder(std::string_view data);
// A task's log bytes (stamps, lines) and `logs --since` (text_entry.cc).
void LogLines(std::string_view data);
// The server's config file (YAML).
void ServerConfigFile(std::string_view data);
// The client config file (YAML).
void ClientConfigFile(std::string_view data);
// The agent's --task-user-map, and the accounts it gives tasks.
void TaskUserMapFile(std::string_view data);
// The job master's barrier record file.
void BarrierRecordFile(std::string_view data);
// An MPI job's rank host wire, both ways: what a caller sends the rank host
// after its challenge, and what a rank host (or a stranger on its port)
// sends `trainyard rsh` (rank_host_entry.cc).
void RankHostWire(std::string_view data);

}  // namespace trainyard::fuzz
