// The rank host: how `mpirun` in one task of an MPI job starts its daemon in
// another node's task without ssh. Each worker of the job runs `trainyard
// rsh --serve`, which listens on the worker's port at its node's address;
// the launcher's `trainyard rsh HOST COMMAND...` (Open MPI's rsh agent,
// OMPI_MCA_plm_rsh_agent) finds HOST's rank host in the job's
// TRAINYARD_MPI_RANK_HOSTS file, presents the job's secret
// (TRAINYARD_JOB_SECRET, which only the job's tasks get) and has COMMAND run
// there by /bin/sh: a child of that worker task, so in its allocation (its
// cgroup and limits, its user, no_new_privs) and stopped with it when the job
// ends. COMMAND's stdout and stderr come back to the caller's, and its exit
// status is the caller's; a caller that goes away (mpirun stopped it) has
// its command stopped.
//
// Wire (plain TCP, as the job master's): frames of a kind byte, a
// little-endian u32 length and the payload. The caller sends 'H' (the
// secret, a newline, COMMAND); the host answers 'O' / 'E' (stdout / stderr
// bytes) and finally 'X' (the exit status in decimal), or 'R' (refused: why).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace trainyard::jobmaster {

struct RankHostOptions {
  std::string address;  // this node's address (TRAINYARD_NODE_ADDRESS)
  int port = 0;         // the worker's first port (TRAINYARD_PORTS)
  std::string secret;   // the job's secret: a caller must present it
};

// Serves callers until the process is stopped. Returns only when it cannot
// listen (the error names the address).
absl::Status ServeRankHost(const RankHostOptions& options);

// Reads a caller's 'H' frame from `conn` (waiting at most 10 s) and returns
// its command when it holds `secret`; false for anything else (end of
// stream, another frame, a frame above 1 MiB, another secret). What the rank
// host runs on every connection before anything else.
bool ReadHello(int conn, const std::string& secret, std::string* command);

// Reads the rank host's answer frames from `conn` until its exit status,
// copying 'O' and 'E' bytes to `out_fd` and `err_fd`; the status, or an error
// for a refusal ('R'), another frame or an early end. What a caller runs.
absl::StatusOr<int> ReadAnswer(int conn, int out_fd, int err_fd);

// The port of `host`'s rank host in a rank-hosts file ("ADDRESS PORT"
// lines); NotFound naming `host` when it has none.
absl::StatusOr<int> RankHostPort(absl::string_view rank_hosts, absl::string_view host);

// Runs `command` (its words joined by spaces) on the rank host at
// host:port with `secret`, copying its output to this process's stdout and
// stderr; returns its exit status (128 + N for a signal N). Tries to connect
// until `connect_timeout` (the worker may still be starting).
absl::StatusOr<int> RunOnRankHost(const std::string& host, int port, const std::string& secret,
                                  const std::vector<std::string>& command, absl::Duration connect_timeout);

}  // namespace trainyard::jobmaster
