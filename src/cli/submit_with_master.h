// `trainyard submit --jobmaster-in-client`: the job's master runs inside the
// submitting client instead of as the job's first task; the client stays
// attached until the job ends.
#pragma once

#include <string>

#include "proto/service.grpc.pb.h"

namespace trainyard::cli {

// Starts a job master for `spec` on this machine, submits the spec naming it,
// follows the job to its end and returns the exit code (0 = SUCCEEDED).
// `advertise_host` "" = 127.0.0.1 for a loopback server, else the host name.
int SubmitWithMaster(v1::Trainyard::Stub& stub, const std::string& server_address, v1::JobSpec spec,
                     const std::string& advertise_host);

}  // namespace trainyard::cli
