// The server's login socket (docs/security.md, "Local login"): a Unix stream
// socket, mode 0666, where a local user gets a token for their own account.
// The kernel says who connected (SO_PEERCRED): the uid's account name is the
// user; the account that runs the server and root get an admin's token. The
// answer is lines "server ADDRESS", "user NAME [admin]", "token TOKEN", and,
// when the server serves TLS, "ca" followed by the cluster CA's certificate
// (PEM) to the end; then the connection is closed. Nothing is read from it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace trainyard::server {

class LoginSocket {
 public:
  // The token of local account `user` (an admin's when `admin`).
  using TokenOf = std::function<absl::StatusOr<std::string>(const std::string& user, bool admin)>;

  // Binds `path` (a stale socket there is replaced) and serves it on a
  // thread of its own. `server_address` is what the answer names.
  static absl::StatusOr<std::unique_ptr<LoginSocket>> Start(const std::string& path, std::string server_address,
                                                            std::string ca_pem, TokenOf token_of);
  ~LoginSocket();

  const std::string& path() const { return path_; }

  // The answer for a peer of uid `uid` (public for tests).
  std::string AnswerFor(uid_t uid) const;

 private:
  LoginSocket(std::string path, std::string server_address, std::string ca_pem, TokenOf token_of, int listen_fd,
              int wake_fd);
  void Serve();

  const std::string path_;
  const std::string server_address_;
  const std::string ca_pem_;  // "" without TLS
  const TokenOf token_of_;
  const int listen_fd_;
  const int wake_fd_;  // an eventfd: written to stop the thread
  std::thread thread_;
};

}  // namespace trainyard::server
