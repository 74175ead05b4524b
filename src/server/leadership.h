// Leadership among servers that share one etcd store: only the leader
// serves, schedules and writes. A server campaigns by creating the election
// key (<etcd prefix>leader) bound to a lease of its own; the key's create
// revision is its fence (EtcdStateStore::SetFence), so once the key is gone
// (lease expired: the leader died, hung or was cut off from etcd) every write
// of the old leader is refused by etcd itself. A standby waits until the key
// is gone, then campaigns. The leader renews its lease every third of its
// TTL; when a renewal finds the lease gone, or none succeeded for a whole
// TTL by its own clock (a process paused past its lease), it is deposed and
// on_lost runs: the server then exits and a supervisor starts it again as a
// standby (crash-only: a deposed leader keeps no state to undo).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/etcd_client.h"

namespace trainyard::server {

struct LeadershipOptions {
  std::string key;        // the election key
  std::string identity;   // the value a standby reads: this server's address
  // A standby waits with <standby_prefix><identity>#<lease> bound to a lease
  // of its own: the leader lists who waits (ClusterStatus.standbys).
  std::string standby_prefix;
  // Each win puts this key again: its version counts the leaderships.
  std::string terms_key;
  // Where the leader puts its HTTP API's URL (PublishHttpUrl), bound to its
  // lease, for the standbys to send callers to ("" = nowhere).
  std::string http_key;
  absl::Duration ttl = absl::Seconds(2);
  // Called once, on the renewal thread, with the reason, when leadership is lost.
  std::function<void(const std::string&)> on_lost;
  // Called while waiting as a standby, on the campaigning thread, with the
  // current leader's identity and the HTTP URL it published ("" when none
  // yet), whenever either changes.
  std::function<void(const std::string& leader, const std::string& http_url)> on_standby;
};

class Leadership {
 public:
  // Blocks until this server leads (or `stop` becomes true: Cancelled).
  static absl::StatusOr<std::unique_ptr<Leadership>> Campaign(EtcdClient* client,
                                                              LeadershipOptions options,
                                                              const std::atomic<bool>* stop = nullptr);
  // Stops renewing and revokes the lease, so a standby takes over at once.
  ~Leadership();

  // The election key's create revision: the fence of every write.
  int64_t revision() const { return revision_; }
  // Leaderships the cluster has had, this one's included (0: unknown).
  int64_t terms() const { return terms_; }
  // When it won (Unix ms).
  int64_t since_unix_ms() const { return since_unix_ms_; }
  const LeadershipOptions& options() const { return options_; }
  // False once the lease may have expired by this server's own clock.
  bool Valid() const;
  // Puts `url` under options().http_key, bound to the lease (so it goes
  // with this leadership) and fenced by the election key (a deposed
  // leader's put fails).
  absl::Status PublishHttpUrl(const std::string& url);

 private:
  Leadership(EtcdClient* client, LeadershipOptions options, int64_t lease, int64_t revision);
  void Renew();

  EtcdClient* client_;
  LeadershipOptions options_;
  const int64_t lease_;
  const int64_t revision_;
  int64_t terms_ = 0;
  int64_t since_unix_ms_ = 0;
  // Until when the lease is surely held, by the steady clock (which runs on
  // while the process is stopped), in nanoseconds since its epoch.
  std::atomic<int64_t> valid_until_ns_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread renewer_;
};

}  // namespace trainyard::server
