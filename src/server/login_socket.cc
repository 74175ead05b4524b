// The login socket (see login_socket.h).
#include "server/login_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "security/tokens.h"

namespace trainyard::server {
namespace {

// The account name of `uid`; "" when it has none.
std::string AccountName(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return "";
  return found->pw_name;
}

// Makes the socket bind made at `path` 0666, never what a symlink put in
// its place meanwhile points to: fchmodat refuses a symlink with NOFOLLOW;
// where the C library cannot do that (glibc before 2.32, or no /proc) the
// path must still be a socket right before the chmod. False with errno set.
bool MakeReachable(const std::string& path) {
  if (fchmodat(AT_FDCWD, path.c_str(), 0666, AT_SYMLINK_NOFOLLOW) == 0) return true;
  if (errno != ENOTSUP && errno != EOPNOTSUPP) return false;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  if (!S_ISSOCK(st.st_mode)) {
    errno = ELOOP;
    return false;
  }
  return chmod(path.c_str(), 0666) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoginSocket>> LoginSocket::Start(const std::string& path, std::string server_address,
                                                                 std::string ca_pem, TokenOf token_of) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("loginSocket: '", path, "' is longer than a Unix socket path may be (",
                                                   sizeof(addr.sun_path) - 1, " bytes)"));
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat("loginSocket: ", path, " exists and is not a socket"));
    }
    unlink(path.c_str());  // left by a server that stopped
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("loginSocket: socket: ", strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (!bound || listen(fd, 128) != 0 || !MakeReachable(path)) {
    std::string why = strerror(errno);
    close(fd);
    if (bound) unlink(path.c_str());
    return absl::FailedPreconditionError(absl::StrCat("loginSocket: cannot serve ", path, ": ", why));
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    std::string why = strerror(errno);
    close(fd);
    unlink(path.c_str());
    return absl::InternalError(absl::StrCat("loginSocket: eventfd: ", why));
  }
  std::unique_ptr<LoginSocket> s(
      new LoginSocket(path, std::move(server_address), std::move(ca_pem), std::move(token_of), fd, wake));
  s->thread_ = std::thread([p = s.get()] { p->Serve(); });
  return s;
}

LoginSocket::LoginSocket(std::string path, std::string server_address, std::string ca_pem, TokenOf token_of,
                         int listen_fd, int wake_fd)
    : path_(std::move(path)),
      server_address_(std::move(server_address)),
      ca_pem_(std::move(ca_pem)),
      token_of_(std::move(token_of)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd) {}

LoginSocket::~LoginSocket() {
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // Cannot fail for an eventfd below its maximum; the join would hang, so say it.
    Log(LogLevel::kError, "server", "login socket: cannot wake its thread: %s", strerror(errno));
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  unlink(path_.c_str());
}

std::string LoginSocket::AnswerFor(uid_t uid) const {
  std::string user = AccountName(uid);
  if (user.empty()) return absl::StrCat("error uid ", uid, " has no account name on the server's host\n");
  if (absl::Status st = security::ValidateUserName(user, "account"); !st.ok()) {
    return absl::StrCat("error ", st.message(), "\n");
  }
  bool admin = uid == 0 || uid == geteuid();
  absl::StatusOr<std::string> token = token_of_(user, admin);
  if (!token.ok()) return absl::StrCat("error ", token.status().message(), "\n");
  return absl::StrCat("server ", server_address_, "\nuser ", user, admin ? " admin" : "", "\ntoken ", *token, "\n",
                      ca_pem_.empty() ? "" : "ca\n", ca_pem_);
}

void LoginSocket::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    for (;;) {
      int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0 && (errno == EMFILE || errno == ENFILE)) {
        // Out of descriptors: wait a little (or for the stop) instead of
        // polling a listener that stays readable.
        pollfd wake = {wake_fd_, POLLIN, 0};
        if (poll(&wake, 1, 100) > 0) return;
      }
      if (c < 0) break;  // EAGAIN: the queue is empty
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        std::string answer = AnswerFor(cred.uid);
        // A few hundred bytes (and a CA certificate) into an empty socket
        // buffer: one send, never blocking (a peer that does not read loses
        // nothing of ours).
        if (send(c, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
          Log(LogLevel::kDebug, "server", "login socket: answer not sent: %s", strerror(errno));
        }
      }
      close(c);
    }
  }
}

}  // namespace trainyard::server
