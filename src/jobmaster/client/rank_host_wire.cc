// The rank host's frames and handshake (see rank_host_wire.h), with
// OpenSSL's libcrypto for the nonces and the HMACs.
#include "jobmaster/client/rank_host_wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/check.h"

namespace trainyard::jobmaster {
namespace {

constexpr uint32_t kMaxFrame = 1 << 20;
constexpr size_t kMacBytes = 32;  // SHA-256
constexpr absl::string_view kRefusal = "refused: not this job's secret (TRAINYARD_JOB_SECRET)";

enum class Read { kOk, kEnd, kLate };

// Reads n bytes, waiting until `deadline` at most (InfiniteFuture: as long
// as it takes).
Read ReadAllBy(int fd, char* data, size_t n, absl::Time deadline) {
  while (n > 0) {
    if (deadline != absl::InfiniteFuture()) {
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return Read::kLate;
      pollfd p{fd, POLLIN, 0};
      int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
                                                  1 << 30));
      int ready = poll(&p, 1, ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return Read::kEnd;
      if (ready == 0) continue;  // the deadline is checked above
    }
    ssize_t r = read(fd, data, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Read::kEnd;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Read::kOk;
}

// A frame of at most kMaxFrame bytes (kEnd above that).
Read ReadFrameBy(int fd, absl::Time deadline, char* kind, std::string* payload) {
  unsigned char head[5];
  if (Read r = ReadAllBy(fd, reinterpret_cast<char*>(head), 5, deadline); r != Read::kOk) return r;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(head[1 + i]) << (8 * i);
  if (n > kMaxFrame) return Read::kEnd;
  *kind = static_cast<char>(head[0]);
  payload->resize(n);
  return n == 0 ? Read::kOk : ReadAllBy(fd, payload->data(), n, deadline);
}

std::string Mac(absl::string_view secret, absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  TY_CHECK(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len) != nullptr &&
               len == kMacBytes,
           "HMAC-SHA256");
  return std::string(reinterpret_cast<const char*>(md), len);
}

bool SameMac(absl::string_view a, absl::string_view b) {
  return a.size() == kMacBytes && b.size() == kMacBytes && CRYPTO_memcmp(a.data(), b.data(), kMacBytes) == 0;
}

}  // namespace

absl::StatusOr<std::string> RankHostNonce() {
  std::string nonce(kRankHostNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    return absl::InternalError("cannot read random bytes (OpenSSL RAND_bytes)");
  }
  return nonce;
}

bool SendFrame(int fd, char kind, absl::string_view payload) {
  std::string frame(5 + payload.size(), '\0');
  frame[0] = kind;
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) frame[1 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::copy(payload.begin(), payload.end(), frame.begin() + 5);
  for (size_t at = 0; at < frame.size();) {
    ssize_t w = send(fd, frame.data() + at, frame.size() - at, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    at += static_cast<size_t>(w);
  }
  return true;
}

absl::StatusOr<std::string> AcceptCaller(int conn, absl::string_view secret, absl::string_view host_nonce,
                                         absl::Time deadline) {
  TY_CHECK(!secret.empty() && host_nonce.size() == kRankHostNonceBytes, "a rank host needs a secret and a nonce");
  if (!SendFrame(conn, 'C', host_nonce)) return absl::InvalidArgumentError("went away before its hello");
  char kind = 0;
  std::string hello;
  Read r = ReadFrameBy(conn, deadline, &kind, &hello);
  if (r == Read::kLate) return absl::DeadlineExceededError("sent no hello in time");
  constexpr size_t kHead = kRankHostNonceBytes + kMacBytes;
  if (r != Read::kOk || kind != 'H' || hello.size() <= kHead) {
    return absl::InvalidArgumentError("sent no hello (another frame, a malformed one or none)");
  }
  absl::string_view caller_nonce = absl::string_view(hello).substr(0, kRankHostNonceBytes);
  absl::string_view mac = absl::string_view(hello).substr(kRankHostNonceBytes, kMacBytes);
  absl::string_view command = absl::string_view(hello).substr(kHead);
  if (!SameMac(mac, Mac(secret, absl::StrCat(host_nonce, caller_nonce, command)))) {
    SendFrame(conn, 'R', kRefusal);  // a caller gone meanwhile changes nothing: refused either way
    return absl::PermissionDeniedError("not this job's secret");
  }
  if (!SendFrame(conn, 'A', Mac(secret, absl::StrCat(caller_nonce, host_nonce)))) {
    return absl::InvalidArgumentError("went away after its hello");
  }
  return std::string(command);
}

absl::Status GreetRankHost(int conn, absl::string_view secret, absl::string_view command,
                           absl::string_view caller_nonce, absl::Time deadline) {
  TY_CHECK(!command.empty() && caller_nonce.size() == kRankHostNonceBytes, "a caller needs a command and a nonce");
  char kind = 0;
  std::string host_nonce;
  Read r = ReadFrameBy(conn, deadline, &kind, &host_nonce);
  if (r == Read::kLate) return absl::DeadlineExceededError("sent no challenge in time");
  if (r != Read::kOk) return absl::UnavailableError("closed the connection");
  if (kind != 'C' || host_nonce.size() != kRankHostNonceBytes) {
    return absl::UnauthenticatedError("sent no challenge: not a rank host of this Trainyard");
  }
  std::string mac = Mac(secret, absl::StrCat(host_nonce, caller_nonce, command));
  if (!SendFrame(conn, 'H', absl::StrCat(caller_nonce, mac, command))) {
    return absl::UnavailableError("closed the connection");
  }
  std::string proof;
  r = ReadFrameBy(conn, deadline, &kind, &proof);
  if (r == Read::kLate) return absl::DeadlineExceededError("did not answer the hello in time");
  if (r != Read::kOk) return absl::UnavailableError("closed the connection");
  if (kind == 'R') return absl::PermissionDeniedError(proof);
  if (kind != 'A' || !SameMac(proof, Mac(secret, absl::StrCat(caller_nonce, host_nonce)))) {
    return absl::UnauthenticatedError(
        "did not prove it holds the job's secret: it is not this job's rank host (another process may hold the "
        "port)");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ReadAnswer(int conn, int out_fd, int err_fd) {
  char kind = 0;
  std::string payload;
  while (ReadFrameBy(conn, absl::InfiniteFuture(), &kind, &payload) == Read::kOk) {
    if (kind == 'O' || kind == 'E') {
      const char* data = payload.data();
      size_t n = payload.size();
      int fd = kind == 'O' ? out_fd : err_fd;
      while (n > 0) {  // a closed stdout loses the output, not the exit status
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        data += w;
        n -= static_cast<size_t>(w);
      }
      continue;
    }
    int code = 0;
    if (kind == 'X' && absl::SimpleAtoi(payload, &code)) return code;
    if (kind == 'R') return absl::PermissionDeniedError(payload);
    return absl::UnavailableError("sent a frame that is not an answer");
  }
  return absl::UnavailableError("went away before the command ended");
}

}  // namespace trainyard::jobmaster
