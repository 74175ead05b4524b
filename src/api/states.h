// Job and task states: which are terminal, their names, and the transitions
// the server may make. One home for these rules; the server, the store, the
// CLI and the dashboard call them instead of writing their own.
#pragma once

#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// SUCCEEDED, FAILED, KILLED and DEADLINE_EXCEEDED: nothing follows them.
bool IsTerminal(v1::JobState s);
bool IsTerminal(v1::TaskState s);
// LAUNCHING, RUNNING and RESTARTING: the task holds its place (its node's
// resources) and accounting counts the time.
bool HoldsPlace(v1::TaskState s);

// Upper-case names as the CLI prints them ("QUEUED", "RUNNING", ...);
// "UNKNOWN" for a value outside the enum.
const char* JobStateName(v1::JobState s);
const char* TaskStateName(v1::TaskState s);
// A job state as a person writes it: "running", "RUNNING" or "JOB_RUNNING";
// nullopt for anything else.
std::optional<v1::JobState> ParseJobState(absl::string_view text);

// Every job state a job can be in, in life-cycle order (QUEUED ... the
// terminal ones), and the terminal ones alone: what lists, filters and
// counts by state enumerate.
const std::vector<v1::JobState>& JobStates();
const std::vector<v1::JobState>& FinishedJobStates();

// The job transitions the server makes:
//   QUEUED -> SCHEDULED             placed
//   SCHEDULED -> STARTING           its first task runs
//   STARTING -> RUNNING             every task runs
//   SCHEDULED|STARTING|RUNNING -> QUEUED   preempted, or a lost task that
//                                   no node can take now
//   any live state -> SUCCEEDED|FAILED|KILLED|DEADLINE_EXCEEDED
// A state to itself is no transition and always allowed.
bool IsLegalTransition(v1::JobState from, v1::JobState to);

// The task transitions:
//   PENDING -> LAUNCHING            placed, launch sent
//   LAUNCHING|RESTARTING -> RUNNING its agent runs it
//   LAUNCHING|RUNNING|RESTARTING -> RESTARTING  its agent restarts it
//   LAUNCHING|RUNNING|RESTARTING -> LAUNCHING   started again by the server
//                                   (moved off a lost node, or lost by its agent)
//   any live state -> SUCCEEDED|FAILED|KILLED
//   any state -> PENDING            its job goes back to the queue
bool IsLegalTransition(v1::TaskState from, v1::TaskState to);

}  // namespace trainyard::api
