// Depositions noted in the data dir and counted in etcd (depositions.h): the
// note's format (a line per deposition), its write by a process about to
// exit, and its report at the next start.
#include "server/depositions.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "security/files.h"
#include "store/etcd_client.h"

namespace trainyard::server {
namespace {

constexpr char kFile[] = "/deposed";
constexpr char kKeys[] = "leader-depositions/";
// More than any number of notes a server leaves between two starts.
constexpr size_t kMaxNoteBytes = 64 << 10;

// One field: no tab or line break of a reason's text breaks the format.
std::string Field(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

bool KnownReason(absl::string_view reason) {
  for (Deposition d : kAllDepositions) {
    if (reason == DepositionReason(d)) return true;
  }
  return false;
}

// The whole note file ("" when there is none); a link or a file past the
// cap is not read.
absl::StatusOr<std::string> ReadNotes(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", strerror(errno)));
  }
  std::string text(kMaxNoteBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got > kMaxNoteBytes) return absl::FailedPreconditionError(absl::StrCat(path, ": larger than any note"));
  text.resize(got);
  return text;
}

// Replaces the note file by `lines` (removes it when there are none).
void KeepNotes(const std::string& path, const std::vector<std::string>& lines) {
  if (lines.empty()) {
    unlink(path.c_str());
    return;
  }
  absl::Status kept = security::WritePrivateFile(path, absl::StrCat(absl::StrJoin(lines, "\n"), "\n"));
  if (!kept.ok()) {
    Log(LogLevel::kWarning, "leader", "cannot keep the depositions not yet counted: %s", kept.message());
  }
}

}  // namespace

const char* DepositionReason(Deposition reason) {
  switch (reason) {
    case Deposition::kFenced: return "fenced";
    case Deposition::kWriteUnknown: return "write_unknown";
    case Deposition::kLeaseLost: return "lease_lost";
    case Deposition::kPaused: return "paused";
  }
  return "unknown";
}

void NoteDeposition(const std::string& data_dir, Deposition reason, const std::string& server,
                    const std::string& why) {
  // A line per deposition, appended: one not yet counted (etcd was away at
  // the next start) is not overwritten by the next.
  std::string line = absl::StrCat(DepositionReason(reason), "\t", absl::ToUnixMillis(absl::Now()), "\t",
                                  Field(server), "\t", Field(why), "\n");
  std::string path = data_dir + kFile;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    Log(LogLevel::kWarning, "leader", "cannot note the deposition in %s: %s", path, strerror(errno));
    return;
  }
  ssize_t n;
  do {
    n = write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size()) || fdatasync(fd) != 0) {
    Log(LogLevel::kWarning, "leader", "cannot note the deposition in %s: %s", path,
        n < 0 ? strerror(errno) : "a short write");
  }
  close(fd);
}

absl::Status ReportDeposition(EtcdClient* client, const std::string& prefix, const std::string& data_dir) {
  const std::string path = data_dir + kFile;
  absl::StatusOr<std::string> text = ReadNotes(path);
  if (!text.ok()) {
    Log(LogLevel::kWarning, "leader", "%s; removing it", text.status().message());
    unlink(path.c_str());
    return absl::OkStatus();
  }
  std::vector<std::string> left;
  absl::Status failed;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\t', 3));
    if (f.size() != 4 || !KnownReason(f[0])) {
      Log(LogLevel::kWarning, "leader", "%s: a line that is not a deposition this server noted; dropped", path);
      continue;
    }
    if (!failed.ok()) {
      left.emplace_back(line);
      continue;
    }
    etcdserverpb::TxnRequest txn;
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(absl::StrCat(prefix, kKeys, f[0]));
    put->set_value(absl::StrCat(f[1], "\n", f[2], "\n", f[3]));
    absl::StatusOr<etcdserverpb::TxnResponse> done = client->Txn(txn);
    if (!done.ok()) {
      failed = done.status();
      left.emplace_back(line);
      continue;
    }
    Log(LogLevel::kInfo, "leader", "this server was deposed as the leader (%s: %s); counted in etcd", f[0], f[3]);
  }
  KeepNotes(path, left);
  if (!failed.ok()) {
    return absl::UnavailableError(absl::StrCat(left.size(), " deposition(s) noted in ", path, " are not in etcd yet (",
                                               failed.message(), "); they are put there once etcd answers"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DepositionCount>> ReadDepositions(EtcdClient* client, const std::string& prefix) {
  std::vector<DepositionCount> out;
  for (Deposition d : kAllDepositions) out.push_back(DepositionCount{DepositionReason(d)});
  const std::string keys = prefix + kKeys;
  absl::StatusOr<int64_t> read = client->RangePrefix(keys, [&](const mvccpb::KeyValue& kv) {
    std::string reason = kv.key().substr(keys.size());
    auto known = std::find_if(out.begin(), out.end(), [&](const DepositionCount& c) { return c.reason == reason; });
    // A reason a newer server puts, kept as it is.
    DepositionCount& d = known != out.end() ? *known : out.emplace_back(DepositionCount{reason});
    d.count = kv.version();
    std::vector<std::string> parts = absl::StrSplit(kv.value(), absl::MaxSplits('\n', 2));
    if (parts.size() == 3) {
      if (!absl::SimpleAtoi(parts[0], &d.last_unix_ms)) d.last_unix_ms = 0;
      d.last_server = parts[1];
      d.last_why = parts[2];
    }
  });
  if (!read.ok()) return read.status();
  return out;
}

}  // namespace trainyard::server
