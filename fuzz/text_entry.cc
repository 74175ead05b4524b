// The fuzz targets of text that users and nodes write: task log lines and
// `--since`, the config files (the server's, the client's, the agent's
// --task-user-map) and the job master's barrier record. Files are read the
// way their daemons read them, from a file of the scratch dir.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_split.h"
#include "agent/task_user.h"
#include "api/log_lines.h"
#include "common/check.h"
#include "fuzz/entry_points.h"
#include "fuzz/fuzz_files.h"
#include "jobmaster/barrier_record.h"
#include "security/client_config.h"
#include "server/config.h"

namespace trainyard::fuzz {
namespace {

// Accounts for the task user map: alice (uid 1000) and root.
class Accounts final : public agent::AccountDirectory {
 public:
  std::optional<agent::TaskAccount> ByName(const std::string& name) const override {
    if (name == "alice") return agent::TaskAccount{.name = "alice", .uid = 1000, .gid = 1000};
    if (name == "root") return agent::TaskAccount{.name = "root", .uid = 0, .gid = 0};
    return std::nullopt;
  }
  std::optional<agent::TaskAccount> ByUid(uid_t uid) const override {
    if (uid == 1000) return ByName("alice");
    if (uid == 0) return ByName("root");
    return agent::TaskAccount{.name = "", .uid = uid, .gid = uid};
  }
};

}  // namespace

void LogLines(std::string_view data) {
  // The first byte is the size of the chunks the log arrives in.
  if (data.empty()) return;
  size_t chunk = 1 + static_cast<unsigned char>(data[0]) % 64;
  absl::string_view log(data.data() + 1, data.size() - 1);
  api::LogSplitter splitter;
  size_t text_bytes = 0;
  auto emit = [&](const api::LogPiece& p) {
    size_t nl = p.text.find('\n');
    TY_CHECK(nl == absl::string_view::npos || nl + 1 == p.text.size(), "a piece spans lines");
    TY_CHECK(p.line_end == (nl != absl::string_view::npos), "line_end and the text disagree");
    TY_CHECK(p.unix_nanos >= 0, "a negative stamp");
    text_bytes += p.text.size();
  };
  for (size_t at = 0; at < log.size(); at += chunk) splitter.Add(log.substr(at, chunk), emit);
  splitter.Finish(emit);
  // Only stamps are taken off.
  TY_CHECK(text_bytes <= log.size() && (log.size() - text_bytes) % api::kLogStampBytes == 0,
           "%zu of %zu bytes came out", text_bytes, log.size());
  // A stamp read back is the time written; every line as a stamp.
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (std::optional<int64_t> t = api::ParseLogStamp(line)) {
      TY_CHECK(api::ParseLogStamp(api::LogStamp(*t)) == t, "stamp %lld does not round-trip", static_cast<long long>(*t));
      (void)api::FormatLogTime(*t);  // any stamp prints
    }
  }
  // `--since`, with the first line as its text.
  absl::string_view since = log.substr(0, std::min(log.find('\n'), log.size()));
  if (std::optional<int64_t> t = api::ParseLogSince(since, absl::FromUnixSeconds(1'800'000'000))) {
    (void)api::FormatLogTime(*t);
  }
}

void ServerConfigFile(std::string_view data) {
  static const std::string path = ScratchDir() + "/server.yaml";
  WriteScratchFile(path, data);
  absl::StatusOr<server::ServerConfig> config = server::LoadServerConfig(path);
  if (config.ok()) {
    // What the server does next with a config it read.
    (void)server::ValidateServerConfig(*config);  // a refusal is an answer; only a crash is not
  }
}

void ClientConfigFile(std::string_view data) {
  static const std::string path = ScratchDir() + "/client.yaml";
  WriteScratchFile(path, data);
  absl::StatusOr<security::ClientConfig> config = security::LoadClientConfig(path);
  if (config.ok()) TY_CHECK(config->path == path, "the config does not say where it came from");
}

void TaskUserMapFile(std::string_view data) {
  absl::StatusOr<agent::TaskUserMap> map = agent::TaskUserMap::Parse(absl::string_view(data.data(), data.size()), "fuzz");
  if (!map.ok()) return;
  static const Accounts accounts;
  agent::TaskUsers users({.map = *map, .allow_root = false, .switch_users = true, .accounts = &accounts});
  for (const char* user : {"alice", "bob", "root", "*", ""}) {
    absl::StatusOr<agent::TaskAccount> account = users.Resolve(user);
    // Root is never a task's account unless the agent allows it.
    TY_CHECK(!account.ok() || account->uid != 0, "cluster user '%s' runs as uid 0", user);
  }
}

void BarrierRecordFile(std::string_view data) {
  static const std::string path = ScratchDir() + "/barriers";
  WriteScratchFile(path, data);
  absl::StatusOr<int64_t> passed = jobmaster::ReadBarrierRecord(path);
  if (!passed.ok()) return;
  TY_CHECK(*passed >= 0, "a negative barrier count");
  // What the master writes it reads back the same.
  TY_CHECK(jobmaster::WriteBarrierRecord(path, *passed).ok(), "cannot rewrite the record");
  absl::StatusOr<int64_t> again = jobmaster::ReadBarrierRecord(path);
  TY_CHECK(again.ok() && *again == *passed, "barrier record %lld does not round-trip", static_cast<long long>(*passed));
}

}  // namespace trainyard::fuzz
