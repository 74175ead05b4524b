// The rank host: how `mpirun` in one task of an MPI job starts its daemon in
// another node's task without ssh. Each worker of the job runs `trainyard
// rsh --serve`, which listens on the worker's port at its node's address;
// the launcher's `trainyard rsh HOST COMMAND...` (Open MPI's rsh agent,
// OMPI_MCA_plm_rsh_agent) finds HOST's rank host in the job's
// TRAINYARD_MPI_RANK_HOSTS file, shows it holds the job's secret
// (TRAINYARD_JOB_SECRET, which only the job's tasks get) and has COMMAND run
// there by /bin/sh: a child of that worker task, so in its allocation (its
// cgroup and limits, its user, no_new_privs) and stopped with it when the job
// ends. COMMAND's stdout and stderr come back to the caller's, and its exit
// status is the caller's; a caller that goes away (mpirun stopped it) has
// its command stopped.
//
// A caller and the host prove to each other that they hold the secret
// without sending it (rank_host_wire.h). Each command runs in a process
// group of its own, which is stopped (SIGTERM, SIGKILL after a grace) when
// its caller goes away or the rank host is stopped.
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
  std::string secret;   // the job's secret: a caller must prove it holds it
};

// Serves callers until the process is stopped (SIGTERM, SIGINT or SIGHUP,
// on which it stops its commands' process groups first and exits). Returns
// only when it cannot listen (the error names the address).
absl::Status ServeRankHost(const RankHostOptions& options);

// The port of `host`'s rank host in a rank-hosts file ("ADDRESS PORT"
// lines); NotFound naming `host` when it has none.
absl::StatusOr<int> RankHostPort(absl::string_view rank_hosts, absl::string_view host);

// Runs `command` (its words joined by spaces) on the rank host at
// host:port with `secret`, copying its output to this process's stdout and
// stderr once the host has proven it holds the secret; returns its exit
// status (128 + N for a signal N). Tries to connect until `connect_timeout`
// (the worker may still be starting); Unauthenticated when what answers
// there does not prove the secret.
absl::StatusOr<int> RunOnRankHost(const std::string& host, int port, const std::string& secret,
                                  const std::vector<std::string>& command, absl::Duration connect_timeout);

}  // namespace trainyard::jobmaster
