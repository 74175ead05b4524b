// A deposed leader's account, kept where the cluster can count it. A leader
// that learns it may no longer lead exits at once (it must not act: it
// writes nothing more to etcd), so it leaves its reason in a file of its data
// dir (`deposed`, mode 0600; NoteDeposition) and, when a supervisor starts it
// again, puts it in etcd under <prefix>leader-depositions/<reason> before it
// campaigns, or once etcd answers (ReportDeposition; not fenced: it leads
// nothing). A key's version
// counts its reason's depositions over the cluster's life; the leader shows
// them (ReadDepositions: ClusterStatus.depositions, /metrics, the dashboard).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainyard {
class EtcdClient;
}

namespace trainyard::server {

// Why a leader stopped leading.
enum class Deposition {
  kFenced,        // etcd refused a write of it: the election key is another's (a fencing refusal)
  kWriteUnknown,  // a write's outcome is unknown (etcd unreachable or slow past the call timeout)
  kLeaseLost,     // its lease ended in etcd, or no renewal succeeded within the TTL
  kPaused,        // about to act, it found by its own clock that the lease may have ended
};
// "fenced", "write_unknown", "lease_lost", "paused": the key's last part and
// the metric's label.
const char* DepositionReason(Deposition reason);
inline constexpr Deposition kAllDepositions[] = {Deposition::kFenced, Deposition::kWriteUnknown,
                                                 Deposition::kLeaseLost, Deposition::kPaused};

// Appends to `<data_dir>/deposed` a line: the reason, the time, `server`
// (its address) and `why`. Plain system calls and no lock, for a process
// about to _Exit from any thread.
void NoteDeposition(const std::string& data_dir, Deposition reason, const std::string& server,
                    const std::string& why);

// Puts each deposition `<data_dir>/deposed` notes under
// <prefix>leader-depositions/<reason>, then removes it; those etcd did not
// take are kept for the next call (Unavailable). OK when there is none.
absl::Status ReportDeposition(EtcdClient* client, const std::string& prefix, const std::string& data_dir);

struct DepositionCount {
  std::string reason;
  int64_t count = 0;  // since the cluster's store began
  // The latest one's.
  int64_t last_unix_ms = 0;
  std::string last_server;
  std::string last_why;
};
// Every reason: the four above first (0 until one happens), then any other
// found in etcd (put by a newer server).
absl::StatusOr<std::vector<DepositionCount>> ReadDepositions(EtcdClient* client, const std::string& prefix);

}  // namespace trainyard::server
