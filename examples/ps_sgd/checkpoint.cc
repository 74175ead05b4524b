// Atomic checkpoint files of the parameter-server example (text: a header
// line, the epoch, the parameter count, then one parameter per line with
// full double precision).
#include "ps_sgd/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard::examples {
namespace {

constexpr char kHeader[] = "trainyard-ps-sgd-checkpoint 1";

absl::Status Errno(absl::string_view what, absl::string_view path) {
  return absl::FailedPreconditionError(absl::StrFormat("cannot %s %s: %s", what, path, std::strerror(errno)));
}

absl::Status WriteAll(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("write", path);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointPath(const std::string& dir) { return dir + "/ps_sgd.ckpt"; }

absl::Status WriteCheckpoint(const std::string& dir, const Checkpoint& ckpt) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Errno("create the checkpoint dir", dir);
  std::string text = absl::StrCat(kHeader, "\nepoch ", ckpt.epoch, "\nparams ", ckpt.params.size(), "\n");
  for (double p : ckpt.params) absl::StrAppendFormat(&text, "%.17g\n", p);
  std::string path = CheckpointPath(dir);
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create", tmp);
  absl::Status s = WriteAll(fd, text, tmp);
  if (s.ok() && fsync(fd) != 0) s = Errno("fsync", tmp);
  close(fd);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) s = Errno("rename into", path);
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

absl::StatusOr<std::optional<Checkpoint>> ReadCheckpoint(const std::string& dir) {
  std::string path = CheckpointPath(dir);
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<Checkpoint>();
    return Errno("read", path);
  }
  std::string header, epoch_word, params_word;
  Checkpoint ckpt;
  size_t count = 0;
  std::getline(in, header);
  if (header != kHeader || !(in >> epoch_word >> ckpt.epoch >> params_word >> count) ||
      epoch_word != "epoch" || params_word != "params" || ckpt.epoch < 0 || count > (1u << 24)) {
    return absl::DataLossError(absl::StrCat(path, " is not a ps_sgd checkpoint (bad header)"));
  }
  ckpt.params.resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (!(in >> ckpt.params[i])) {
      return absl::DataLossError(absl::StrFormat("%s: parameter %d of %d is missing or not a number", path, i, count));
    }
  }
  return std::optional<Checkpoint>(std::move(ckpt));
}

}  // namespace trainyard::examples
