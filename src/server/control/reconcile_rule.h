// The reconcile rule between an agent's heartbeats and the server's launches
// (docs/agent.md, "Launches and heartbeats"): when a task that the server
// has as live on a node, and that the node's heartbeats leave out, is taken
// as gone, and when its launch is sent again. Only a heartbeat made after
// the agent read the task's launch may say that the task is gone. The
// agent's stream is ordered and a heartbeat lists every launch the agent has
// read, so the first report of a launch (a status, or a heartbeat that lists
// it: Acknowledge) marks where such heartbeats begin: beats that missed it
// before (the launch still on its way, or queued behind others at the agent)
// no longer count. Functions of one task's TaskRt; part of the control state.
#pragma once

#include "server/control/job_rt.h"

namespace trainyard::server {

// Heartbeats in a row that must leave out a task its agent had shown it has
// before the server takes it as gone from its node. Statuses and heartbeats
// share the agent's one ordered stream, and an agent lists a task's final
// status in its heartbeats for a while after the end, so a task that ended
// normally is never taken as gone.
inline constexpr int kMissingBeats = 3;
// A launch the agent has not shown it has after this many heartbeats is sent
// again (a launch order lost with a server that died; the agent ignores one
// for a task it already has).
inline constexpr int kUnackedBeats = 10;

// The agent reported the task's current launch (a status or a heartbeat
// that lists it): from now on a heartbeat without it counts as missing.
void Acknowledge(TaskRt& rt);

// What a heartbeat of its node says of one task placed there.
struct TaskInBeat {
  bool listed = false;     // the heartbeat lists it
  bool ended = false;      // the server has it ended already
  bool stopping = false;   // its job is being stopped (killed, preempted)
  bool launching = false;  // LAUNCHING: never seen running
};
enum class Unlisted {
  kWait,         // listed, ended, or not missing long enough
  kGone,         // its agent no longer has it
  kLaunchAgain,  // its launch never arrived: sent again
};
// Counts the task's missing beats and says what follows. A task of a job
// being stopped that its agent does not have is gone, whether or not its
// launch ever arrived.
Unlisted OnBeat(TaskRt& rt, const TaskInBeat& beat);

}  // namespace trainyard::server
