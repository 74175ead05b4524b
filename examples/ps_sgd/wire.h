// The parameter-server example's wire: length-prefixed binary frames over
// plain TCP sockets. A frame is a little-endian u32 byte count, then the
// body. Requests start with an op byte:
//   PULL (1)                                  -> the shard's values
//   PUSH (2) u32 offset, u32 count, f64[count] -> adds the deltas, answers
//                                                 the updated values
//   EPOCH (3) u32 epoch                        -> raises the job's last
//                                                 finished epoch to at least
//                                                 `epoch`, answers it
// An answer starts with a status byte: 0 then u32 offset, u32 count,
// f64[count] (EPOCH: u32 epoch); or 1 then the error text. Doubles travel as their IEEE-754
// bits in little-endian order.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainyard::examples {

enum class PsOp : uint8_t { kPull = 1, kPush = 2, kEpoch = 3 };

// A contiguous slice of the parameter vector.
struct Slice {
  uint32_t offset = 0;
  std::vector<double> values;
};

// Largest frame either side accepts (a shard of ~1M parameters).
inline constexpr uint32_t kMaxFrameBytes = 8u << 20;

// Encoders and decoders of the frame bodies.
std::string EncodePull();
std::string EncodePush(const Slice& deltas);
std::string EncodeSliceReply(const Slice& slice);
std::string EncodeErrorReply(absl::string_view message);
std::string EncodeEpoch(uint32_t epoch);
std::string EncodeEpochReply(uint32_t epoch);
// The epoch of an EPOCH request body (after the op byte) or reply.
absl::StatusOr<uint32_t> DecodeEpochBody(absl::string_view body);
absl::StatusOr<uint32_t> DecodeEpochReply(absl::string_view body);
// Decodes a reply; an error reply becomes an error status with its text.
absl::StatusOr<Slice> DecodeSliceReply(absl::string_view body);
// Decodes the slice of a PUSH body (after the op byte).
absl::StatusOr<Slice> DecodePushBody(absl::string_view body);

// "host:port" split; the port must be 1..65535.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view address);

// Listens on 0.0.0.0:`port` (0 = any free port). Returns the socket.
absl::StatusOr<int> ListenTcp(int port);
// The local port a socket is bound to.
int LocalPort(int fd);
// Connects to `address`, retrying until `deadline` (the peer may start later).
absl::StatusOr<int> ConnectTcp(absl::string_view address, absl::Time deadline);
// Writes one frame / reads one frame. Errors name the peer's trouble.
absl::Status SendFrame(int fd, absl::string_view body);
absl::StatusOr<std::string> RecvFrame(int fd);

}  // namespace trainyard::examples
