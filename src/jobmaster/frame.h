// Framing of job-master messages on a TCP stream: each frame is a 4-byte
// big-endian payload length followed by one serialized protobuf message
// (JobMasterRequest towards the master, JobMasterResponse back). Both the
// master's event loop and the worker library use these helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"

namespace trainyard::jobmaster {

inline constexpr size_t kFrameHeaderBytes = 4;
// Default largest request payload the master accepts; workers send small
// messages, so anything bigger is garbage or abuse.
inline constexpr uint32_t kDefaultMaxRequestBytes = 1 << 20;
// Largest response payload a worker accepts (a worker list of a large job).
inline constexpr uint32_t kMaxResponseBytes = 256u << 20;

// Appends one frame holding `message` to `out`.
void AppendFrame(const google::protobuf::MessageLite& message, std::string* out);

// Appends one frame holding a JobMasterResponse with `request_id` whose body
// is the `workers` field set to the already serialized ListWorkersReply in
// `serialized_list`. Lets one list go to many waiters without re-encoding it.
void AppendWorkerListFrame(uint64_t request_id, std::string_view serialized_list,
                           std::string* out);

// Result of looking for a complete frame at the start of a buffer.
struct FrameView {
  // The payload, valid while the buffer is; empty when `complete` is false.
  std::string_view payload;
  // Bytes of the buffer the frame takes (header + payload) when complete.
  size_t consumed = 0;
  bool complete = false;
};

// The bytes of a JobMasterResponse frame with `request_id` whose body is
// field `body_field`, `body_bytes` long, that come before the serialized body
// itself (length header and envelope fields): a body shared among many
// answers is written after it without being copied.
std::string SharedBodyFramePrefix(uint64_t request_id, int body_field, size_t body_bytes);

// SharedBodyFramePrefix for the `workers` body (a ListWorkersReply).
std::string WorkerListFramePrefix(uint64_t request_id, size_t list_bytes);

// Looks for one frame at the start of `buffer`. Returns an incomplete view
// when more bytes are needed, or an error naming the length when the header
// announces more than `max_payload` bytes.
absl::Status PeekFrame(std::string_view buffer, uint32_t max_payload, FrameView* frame);

}  // namespace trainyard::jobmaster
