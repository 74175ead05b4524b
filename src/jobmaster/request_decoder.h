// Decoding of the request frames that arrive on one connection to the job
// master: the step between bytes and MasterState, shared by the event loop
// and the fuzz target that drives MasterState with arbitrary bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "proto/jobmaster.pb.h"

namespace trainyard::jobmaster {

// Decodes the complete frames at the start of `data` one by one into
// `*scratch` and hands each to `on_request`, which returns false to stop
// (its connection is going away). Returns the bytes of the frames handed
// over (a partial frame after them is left). A frame longer than
// `max_payload` or a payload that is not a JobMasterRequest stops decoding
// with its error in `*bad` (the connection must then be closed); `*bad` is
// OK otherwise.
size_t DecodeRequests(std::string_view data, uint32_t max_payload,
                      ::trainyard::v1::JobMasterRequest* scratch,
                      absl::FunctionRef<bool(const ::trainyard::v1::JobMasterRequest&)> on_request,
                      absl::Status* bad);

}  // namespace trainyard::jobmaster
