// The fuzz target of an MPI job's rank host (jobmaster/client/rank_host_wire.h),
// both sides of its plain-TCP wire: the bytes a caller on the node's network
// sends the rank host after its challenge (AcceptCaller, which must take
// only a hello whose MAC holds the job's secret and the host's nonce), and
// the bytes a rank host, or whatever took its port, sends `trainyard rsh`
// (GreetRankHost, which must trust only a proof of the secret, then
// ReadAnswer). The nonces are fixed, so seeds can hold right MACs. The bytes
// go through a socket pair, as on the wire; nothing is started.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/check.h"
#include "fuzz/entry_points.h"
#include "jobmaster/client/rank_host_wire.h"
#include "security/crypto.h"

namespace trainyard::fuzz {
namespace {

// A socket pair whose near end reads `data` and then its end; what the near
// end writes waits unread at the far end. Large inputs are cut to what the
// pair's buffer takes without a reader.
struct Holding {
  explicit Holding(std::string_view data) {
    int fds[2];
    TY_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
    near = fds[0];
    far = fds[1];
    int size = 1 << 20;
    setsockopt(far, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    size_t n = std::min<size_t>(data.size(), 64 * 1024);
    if (n > 0) TY_CHECK(write(far, data.data(), n) == static_cast<ssize_t>(n), "write %zu bytes", n);
    shutdown(far, SHUT_WR);
  }
  ~Holding() {
    close(near);
    close(far);
  }
  int near = -1;
  int far = -1;
};

// The payload of the frame of `kind` at the start of `data`, or "" when
// another starts it.
absl::string_view FramePayload(absl::string_view data, char kind) {
  if (data.size() < 5 || data[0] != kind) return "";
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(data[1 + i])) << (8 * i);
  return data.substr(5, n);
}

// A secret no input guesses (the fuzzer finds short ones), and fixed nonces.
const std::string kRankHostSecret(32, '\x7f');
const std::string kHostNonce(jobmaster::kRankHostNonceBytes, 'h');
const std::string kCallerNonce(jobmaster::kRankHostNonceBytes, 'c');

void HostSide(absl::string_view data) {
  Holding caller(std::string_view(data.data(), data.size()));
  absl::StatusOr<std::string> command =
      jobmaster::AcceptCaller(caller.near, kRankHostSecret, kHostNonce, absl::Now() + absl::Seconds(10));
  if (!command.ok()) return;
  absl::string_view hello = FramePayload(data, 'H');
  size_t head = 2 * jobmaster::kRankHostNonceBytes;
  TY_CHECK(hello.size() > head && hello.substr(head) == *command, "a command that is not the hello's was taken");
  absl::string_view nonce = hello.substr(0, jobmaster::kRankHostNonceBytes);
  absl::string_view mac = hello.substr(jobmaster::kRankHostNonceBytes, jobmaster::kRankHostNonceBytes);
  TY_CHECK(absl::BytesToHexString(mac) ==
               security::HmacSha256Hex(kRankHostSecret, absl::StrCat(kHostNonce, nonce, *command)),
           "a hello without the secret's MAC was taken");
}

void CallerSide(absl::string_view data) {
  Holding host(std::string_view(data.data(), data.size()));
  absl::Status greeted =
      jobmaster::GreetRankHost(host.near, kRankHostSecret, "orted -mca ess env", kCallerNonce, absl::Now() + absl::Seconds(10));
  int null = open("/dev/null", O_WRONLY);
  if (greeted.ok()) {
    absl::string_view challenge = FramePayload(data, 'C');
    absl::string_view proof = FramePayload(data.substr(std::min(data.size(), 5 + challenge.size())), 'A');
    TY_CHECK(absl::BytesToHexString(proof) ==
                 security::HmacSha256Hex(kRankHostSecret, absl::StrCat(kCallerNonce, challenge)),
             "a host that did not prove the secret was trusted");
    absl::StatusOr<int> code = jobmaster::ReadAnswer(host.near, null, null);
    (void)code;  // any status: the input is a stranger's
  } else {
    Holding answer(std::string_view(data.data(), data.size()));  // the answer frames alone, for coverage
    absl::StatusOr<int> code = jobmaster::ReadAnswer(answer.near, null, null);
    (void)code;  // any status: the input is a stranger's
  }
  close(null);
}

}  // namespace

void RankHostWire(std::string_view data) {
  absl::string_view bytes(data.data(), data.size());
  HostSide(bytes);
  CallerSide(bytes);
}

}  // namespace trainyard::fuzz
