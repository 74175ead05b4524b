// Frame encoding and the blocking socket helpers of the parameter-server
// example.
#include "ps_sgd/wire.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/time/clock.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trainyard::examples {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutF64(std::string* out, double d) {
  uint64_t v = std::bit_cast<uint64_t>(d);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U32(uint32_t* v) {
    if (data_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    data_.remove_prefix(4);
    return true;
  }
  bool F64(double* d) {
    if (data_.size() < 8) return false;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    *d = std::bit_cast<double>(v);
    data_.remove_prefix(8);
    return true;
  }
  size_t left() const { return data_.size(); }

 private:
  absl::string_view data_;
};

void EncodeSlice(const Slice& s, std::string* out) {
  PutU32(out, s.offset);
  PutU32(out, static_cast<uint32_t>(s.values.size()));
  for (double v : s.values) PutF64(out, v);
}

absl::StatusOr<Slice> DecodeSlice(absl::string_view body) {
  Reader r(body);
  Slice s;
  uint32_t count = 0;
  if (!r.U32(&s.offset) || !r.U32(&count) || r.left() != static_cast<size_t>(count) * 8) {
    return absl::DataLossError(absl::StrCat("malformed slice: ", body.size(), " bytes"));
  }
  s.values.resize(count);
  for (double& v : s.values) r.F64(&v);
  return s;
}

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

std::string EncodePull() { return std::string(1, static_cast<char>(PsOp::kPull)); }

std::string EncodePush(const Slice& deltas) {
  std::string out(1, static_cast<char>(PsOp::kPush));
  EncodeSlice(deltas, &out);
  return out;
}

std::string EncodeSliceReply(const Slice& slice) {
  std::string out(1, '\0');
  EncodeSlice(slice, &out);
  return out;
}

std::string EncodeErrorReply(absl::string_view message) {
  std::string out(1, '\1');
  out.append(message.data(), message.size());
  return out;
}

std::string EncodeEpoch(uint32_t epoch) {
  std::string out(1, static_cast<char>(PsOp::kEpoch));
  PutU32(&out, epoch);
  return out;
}

std::string EncodeEpochReply(uint32_t epoch) {
  std::string out(1, '\0');
  PutU32(&out, epoch);
  return out;
}

absl::StatusOr<uint32_t> DecodeEpochBody(absl::string_view body) {
  Reader r(body);
  uint32_t epoch = 0;
  if (!r.U32(&epoch) || r.left() != 0) return absl::DataLossError("malformed EPOCH frame");
  return epoch;
}

absl::StatusOr<uint32_t> DecodeEpochReply(absl::string_view body) {
  if (body.empty()) return absl::DataLossError("empty reply from the parameter server");
  if (body[0] != 0) {
    return absl::FailedPreconditionError(absl::StrCat("parameter server refused: ", body.substr(1)));
  }
  return DecodeEpochBody(body.substr(1));
}

absl::StatusOr<Slice> DecodeSliceReply(absl::string_view body) {
  if (body.empty()) return absl::DataLossError("empty reply from the parameter server");
  if (body[0] != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("parameter server refused: ", body.substr(1)));
  }
  return DecodeSlice(body.substr(1));
}

absl::StatusOr<Slice> DecodePushBody(absl::string_view body) { return DecodeSlice(body); }

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not host:port with a port in 1..65535"));
  }
  return std::make_pair(std::string(address.substr(0, colon)), port);
}

absl::StatusOr<int> ListenTcp(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 128) != 0) {
    absl::Status s = Errno(absl::StrCat("cannot listen on port ", port));
    close(fd);
    return s;
  }
  return fd;
}

int LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

absl::StatusOr<int> ConnectTcp(absl::string_view address, absl::Time deadline) {
  auto hp = SplitHostPort(address);
  if (!hp.ok()) return hp.status();
  absl::Status last = absl::UnavailableError("no attempt");
  for (absl::Duration pause = absl::Milliseconds(10);; pause = std::min(pause * 2, absl::Milliseconds(500))) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(hp->first.c_str(), absl::StrCat(hp->second).c_str(), &hints, &res);
    if (rc != 0) {
      last = absl::UnavailableError(absl::StrCat("cannot resolve ", hp->first, ": ", gai_strerror(rc)));
    } else {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        freeaddrinfo(res);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
      }
      last = Errno(absl::StrCat("cannot connect to ", address));
      if (fd >= 0) close(fd);
      freeaddrinfo(res);
    }
    if (absl::Now() + pause > deadline) return last;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(pause));
  }
}

absl::Status SendFrame(int fd, absl::string_view body) {
  std::string frame;
  PutU32(&frame, static_cast<uint32_t>(body.size()));
  frame.append(body.data(), body.size());
  size_t done = 0;
  while (done < frame.size()) {
    ssize_t n = send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("send");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

namespace {
absl::Status RecvAll(int fd, char* buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = recv(fd, buf + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return absl::UnavailableError("connection closed by the peer");
    if (n < 0) return Errno("recv");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::string> RecvFrame(int fd) {
  char head[4];
  if (absl::Status s = RecvAll(fd, head, 4); !s.ok()) return s;
  uint32_t size = 0;
  Reader(absl::string_view(head, 4)).U32(&size);
  if (size > kMaxFrameBytes) {
    return absl::DataLossError(absl::StrCat("frame of ", size, " bytes is above the limit ", kMaxFrameBytes));
  }
  std::string body(size, '\0');
  if (absl::Status s = RecvAll(fd, body.data(), size); !s.ok()) return s;
  return body;
}

}  // namespace trainyard::examples
