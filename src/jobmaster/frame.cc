// Length-prefixed framing for job-master messages (see frame.h).
#include "jobmaster/frame.h"

#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace trainyard::jobmaster {
namespace {

using google::protobuf::internal::WireFormatLite;

// Field numbers of JobMasterResponse used by the hand-built list frame.
constexpr int kResponseRequestIdField = 1;
constexpr int kResponseWorkersField = 4;

void PutHeader(uint32_t length, char* out) {
  out[0] = static_cast<char>((length >> 24) & 0xff);
  out[1] = static_cast<char>((length >> 16) & 0xff);
  out[2] = static_cast<char>((length >> 8) & 0xff);
  out[3] = static_cast<char>(length & 0xff);
}

}  // namespace

void AppendFrame(const google::protobuf::MessageLite& message, std::string* out) {
  size_t length = message.ByteSizeLong();
  size_t start = out->size();
  out->resize(start + kFrameHeaderBytes + length);
  PutHeader(static_cast<uint32_t>(length), out->data() + start);
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(out->data() + start + kFrameHeaderBytes));
}

std::string WorkerListFramePrefix(uint64_t request_id, size_t list_bytes) {
  return SharedBodyFramePrefix(request_id, kResponseWorkersField, list_bytes);
}

std::string SharedBodyFramePrefix(uint64_t request_id, int body_field, size_t list_bytes) {
  std::string prefix(kFrameHeaderBytes, '\0');
  {
    google::protobuf::io::StringOutputStream stream(&prefix);
    google::protobuf::io::CodedOutputStream coded(&stream);
    if (request_id != 0) WireFormatLite::WriteUInt64(kResponseRequestIdField, request_id, &coded);
    coded.WriteTag(WireFormatLite::MakeTag(body_field,
                                           WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint32(static_cast<uint32_t>(list_bytes));
  }
  PutHeader(static_cast<uint32_t>(prefix.size() - kFrameHeaderBytes + list_bytes), prefix.data());
  return prefix;
}

void AppendWorkerListFrame(uint64_t request_id, std::string_view serialized_list,
                           std::string* out) {
  out->append(WorkerListFramePrefix(request_id, serialized_list.size()));
  out->append(serialized_list);
}

absl::Status PeekFrame(std::string_view buffer, uint32_t max_payload, FrameView* frame) {
  *frame = FrameView{};
  if (buffer.size() < kFrameHeaderBytes) return absl::OkStatus();
  const auto* p = reinterpret_cast<const uint8_t*>(buffer.data());
  uint32_t length = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) |
                    uint32_t{p[3]};
  if (length > max_payload) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "frame length %u exceeds the limit of %u bytes (is the peer speaking the job-master "
        "protocol: 4-byte big-endian length + protobuf?)",
        length, max_payload));
  }
  if (buffer.size() - kFrameHeaderBytes < length) return absl::OkStatus();
  frame->payload = buffer.substr(kFrameHeaderBytes, length);
  frame->consumed = kFrameHeaderBytes + length;
  frame->complete = true;
  return absl::OkStatus();
}

}  // namespace trainyard::jobmaster
