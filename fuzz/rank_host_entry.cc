// The fuzz target of an MPI job's rank host (jobmaster/client/rank_host.h),
// both sides of its plain-TCP wire: the bytes a caller on the node's network
// sends the rank host (ReadHello, which must refuse all but the job's
// secret), and the bytes a rank host sends back to `trainyard rsh`
// (ReadAnswer). The bytes go through a socket pair, as on the wire; nothing
// is started.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "common/check.h"
#include "fuzz/entry_points.h"
#include "jobmaster/client/rank_host.h"

namespace trainyard::fuzz {
namespace {

// The read side of a socket pair that holds `data` and then its end. Large
// inputs are cut to what the pair's buffer takes without a reader.
int Holding(std::string_view data) {
  int fds[2];
  TY_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
  int size = 1 << 20;
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  size_t n = std::min<size_t>(data.size(), 64 * 1024);
  if (n > 0) TY_CHECK(write(fds[1], data.data(), n) == static_cast<ssize_t>(n), "write %zu bytes", n);
  close(fds[1]);
  return fds[0];
}

}  // namespace

void RankHostWire(std::string_view data) {
  // A secret no input guesses (the fuzzer finds short ones).
  const std::string secret(32, '\x7f');
  int conn = Holding(data);
  std::string command;
  bool proven = jobmaster::ReadHello(conn, secret, &command);
  close(conn);
  TY_CHECK(!proven || data.find(secret) != std::string_view::npos, "a hello without the secret was taken");
  int answer = Holding(data);
  int null = open("/dev/null", O_WRONLY);
  absl::StatusOr<int> code = jobmaster::ReadAnswer(answer, null, null);
  close(null);
  close(answer);
  (void)code;  // any status: the input is a stranger's
}

}  // namespace trainyard::fuzz
