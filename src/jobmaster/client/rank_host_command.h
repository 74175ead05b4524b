// The commands a rank host runs for its callers (rank_host.h): each is
// /bin/sh -c COMMAND in a process group of its own, so that stopping it
// reaches what the shell started (mpirun's daemon and anything it forks),
// and its output is relayed to its caller.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainyard::jobmaster {

// A running command: its shell's pid, which is also its process group, and
// the read ends of its stdout and stderr.
struct RankCommand {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  int pidfd = -1;  // readable once the shell exits; -1 without pidfd_open
};

// How long a command's group has between SIGTERM and SIGKILL.
inline constexpr absl::Duration kRankCommandGrace = absl::Seconds(2);

// Starts /bin/sh -c `command` with stdin from /dev/null (and no other fd of
// this process), stdout and stderr into pipes, in a new process group that
// StopRankCommands reaches; the error names what failed.
absl::StatusOr<RankCommand> StartRankCommand(const std::string& command);

// Sends the command's output to the caller on `conn` ('O' / 'E' frames) and
// returns its exit status (128 + N for a signal N). When the caller goes
// away the command's group gets SIGTERM, and SIGKILL `grace` later. Returns
// once the shell has exited and either its output pipes are closed or its
// group is gone (or, after a SIGKILL, a second more has passed): a process
// that left the group cannot hold it. Closes the command's fds.
int RelayRankCommand(int conn, RankCommand& command, absl::Duration grace = kRankCommandGrace);

// Stops every running command's group: SIGTERM, then SIGKILL to those left
// after `grace`; returns once all have ended or two seconds after the
// SIGKILL. What the rank host does before it exits on a signal (a command
// that starts meanwhile is killed as its shell's parent thread ends).
void StopRankCommands(absl::Duration grace = kRankCommandGrace);

}  // namespace trainyard::jobmaster
