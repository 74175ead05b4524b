#include "server/depositions.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "store/etcd_client.h"

namespace trainyard::server {
namespace {

constexpr char kFile[] = "/deposed";
constexpr char kKeys[] = "leader-depositions/";

// One line each: a reason's text never breaks the format.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

bool KnownReason(const std::string& reason) {
  for (Deposition d : kAllDepositions) {
    if (reason == DepositionReason(d)) return true;
  }
  return false;
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
  // The file says: reason, Unix ms, server, why; a line each.
  std::string text = absl::StrCat(DepositionReason(reason), "\n", absl::ToUnixMillis(absl::Now()), "\n",
                                  OneLine(server), "\n", OneLine(why), "\n");
  std::string path = data_dir + kFile;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    Log(LogLevel::kWarning, "leader", "cannot note the deposition in %s: %s", path, strerror(errno));
    return;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
}

absl::Status ReportDeposition(EtcdClient* client, const std::string& prefix, const std::string& data_dir) {
  std::string path = data_dir + kFile;
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n');
  if (lines.size() < 4 || !KnownReason(lines[0])) {
    // Not ours to read: say so once and go on without it.
    Log(LogLevel::kWarning, "leader", "%s is not a deposition this server noted; removing it", path);
    unlink(path.c_str());
    return absl::OkStatus();
  }
  etcdserverpb::TxnRequest txn;
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(absl::StrCat(prefix, kKeys, lines[0]));
  put->set_value(absl::StrCat(lines[1], "\n", lines[2], "\n", lines[3]));
  absl::StatusOr<etcdserverpb::TxnResponse> done = client->Txn(txn);
  if (!done.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the deposition noted in ", path, " is not in etcd yet (", done.status().message(),
                     "); it is put there at the next start"));
  }
  unlink(path.c_str());
  Log(LogLevel::kInfo, "leader", "this server was deposed as the leader (%s: %s); counted in etcd", lines[0], lines[3]);
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
