// DecodeRequests: frames to JobMasterRequests (see request_decoder.h).
#include "jobmaster/request_decoder.h"

#include "absl/strings/str_format.h"
#include "jobmaster/frame.h"

namespace trainyard::jobmaster {

size_t DecodeRequests(std::string_view data, uint32_t max_payload,
                      ::trainyard::v1::JobMasterRequest* scratch,
                      absl::FunctionRef<bool(const ::trainyard::v1::JobMasterRequest&)> on_request,
                      absl::Status* bad) {
  *bad = absl::OkStatus();
  size_t used = 0;
  while (true) {
    FrameView frame;
    *bad = PeekFrame(data.substr(used), max_payload, &frame);
    if (!bad->ok() || !frame.complete) return used;
    if (!scratch->ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()))) {
      *bad = absl::InvalidArgumentError(absl::StrFormat(
          "a frame of %d bytes is not a JobMasterRequest protobuf", frame.payload.size()));
      return used;
    }
    used += frame.consumed;
    if (!on_request(*scratch)) return used;
  }
}

}  // namespace trainyard::jobmaster
