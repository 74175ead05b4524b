// The check an agent makes before it starts a task: every address of the
// task's peers (its job's hosts file, "ADDRESS TASK-NAME" lines, the
// addresses MASTER_ADDR, TF_CONFIG and the MPI hostfile are made of) must
// resolve on this node. A rank that cannot resolve its peers would wait on
// them until the framework's own timeout (PyTorch's store: 30 minutes), the
// job RUNNING all along; refused here, the task fails at once with a reason.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace trainyard::agent {

// OK when every address of `hosts_file` resolves here; else InvalidArgument
// naming the first that does not, the task on it and `node` (this node). An
// address is looked up once however many tasks it has.
absl::Status CheckPeerAddresses(absl::string_view hosts_file, absl::string_view node);

}  // namespace trainyard::agent
