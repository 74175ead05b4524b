// Private files (see files.h).
#include "security/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "security/crypto.h"

namespace trainyard::security {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(path, ": cannot ", what, ": ", std::strerror(errno)));
}

absl::Status MakeParent(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return absl::OkStatus();
  std::error_code ec;
  if (std::filesystem::exists(parent, ec)) return absl::OkStatus();
  std::filesystem::create_directories(parent, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(parent.string(), ": cannot create: ", ec.message()));
  chmod(parent.c_str(), 0700);
  return absl::OkStatus();
}

}  // namespace

absl::Status WritePrivateFile(const std::string& path, const std::string& content) {
  if (absl::Status s = MakeParent(path); !s.ok()) return s;
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  // Never through a link someone left under the temporary's name (in a
  // directory others may write): made anew or not at all.
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", tmp);
  fchmod(fd, 0600);  // whatever the umask
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status err = Errno("write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return err;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(tmp.c_str());
    return Errno("write", tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status err = Errno("replace", path);
    unlink(tmp.c_str());
    return err;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return Errno("read", path);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status err = Errno("read", path);
      close(fd);
      return err;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::StatusOr<std::string> LoadOrCreateSecret(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (text.ok()) {
    std::string secret(absl::StripAsciiWhitespace(*text));
    if (secret.size() < 32) return absl::FailedPreconditionError(absl::StrCat(path, ": holds no secret; remove it"));
    return secret;
  }
  if (!absl::IsNotFound(text.status())) return text.status();
  absl::StatusOr<std::string> secret = RandomHex(32);
  if (!secret.ok()) return secret.status();
  if (absl::Status s = WritePrivateFile(path, *secret + "\n"); !s.ok()) return s;
  return secret;
}

}  // namespace trainyard::security
