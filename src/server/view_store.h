// ViewStore: what clients see — job, node and queue views — as the control
// state last published them. The shell publishes after each event (jobs
// that changed) and from its loop (nodes and queues, at most every 5 ms);
// readers (the CLI's jobs / nodes / describe / queues, the REST API and
// /metrics, next the dashboard) take shared pointers under this store's own
// small lock, never the shell's lock and never the StateStore. The shell
// also publishes its counters here (PublishedStats), and the store keeps
// job and task counts by state as jobs are put, so /metrics reads them
// without walking every job. Each kind of view has a version that moves
// when it is published changed, which watchers wait on (the REST watch
// stream, the CLI's -w).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"
#include "server/account_book.h"
#include "server/event_list.h"
#include "server/resource_book.h"
#include "server/stats.h"

namespace trainyard::server {

class ViewStore {
 public:
  struct JobEntry {
    std::shared_ptr<const v1::JobView> view;  // without its events
    EventList events;                         // shared with the control state
    // False for a job recovered from the store whose earlier events are
    // still only there (describe reads them once).
    bool events_loaded = true;
    // How many of its tasks are in each state (set by PutJob).
    std::array<int32_t, v1::TaskState_ARRAYSIZE> task_states{};
  };
  // Published jobs by (queue, state), and their tasks by state.
  struct Counts {
    std::map<std::pair<std::string, v1::JobState>, int64_t> jobs;
    std::array<int64_t, v1::TaskState_ARRAYSIZE> tasks{};
  };
  // A node's published view, shared with the next publication while it is
  // unchanged, and its heartbeat time beside it: that changes every second
  // on every node, so building it into the view would build every view
  // again every second.
  struct NodeEntry {
    std::shared_ptr<const v1::NodeView> view;  // without last_heartbeat_unix_ms, data_free_mb
    int64_t last_heartbeat_unix_ms = 0;
    // The free disk of the agent's data dir, as its last heartbeat said (MB;
    // -1 unknown): it moves with every heartbeat too, so it sits here.
    int64_t data_free_mb = -1;
    v1::NodeView Full() const;  // what `nodes` shows: the view with both
  };
  using NodesPtr = std::shared_ptr<const std::vector<NodeEntry>>;
  using QueuesPtr = std::shared_ptr<const v1::ListQueuesResponse>;
  // Every schedule, by name (`trainyard schedule list`).
  using SchedulesPtr = std::shared_ptr<const std::vector<v1::ScheduleView>>;
  using StatsPtr = std::shared_ptr<const PublishedStats>;
  // What has been published: jobs moves with every job put or removed,
  // nodes when a node's view (not its heartbeat time or free disk) or the
  // set of nodes changed, queues with every queue publication.
  struct Versions {
    int64_t jobs = 0;
    int64_t nodes = 0;
    int64_t queues = 0;
    bool operator==(const Versions&) const = default;
  };

  void PutJob(const std::string& name, JobEntry entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes a deleted job's view down.
  void RemoveJob(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  void PutNodes(NodesPtr nodes) ABSL_LOCKS_EXCLUDED(mu_);
  void PutQueues(QueuesPtr queues) ABSL_LOCKS_EXCLUDED(mu_);
  void PutSchedules(SchedulesPtr schedules) ABSL_LOCKS_EXCLUDED(mu_);
  void PutStats(StatsPtr stats) ABSL_LOCKS_EXCLUDED(mu_);

  // The job's entry; nullopt for a job never published (unknown).
  // FullView(entry) is what describe shows: the view with its events.
  std::optional<JobEntry> Job(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // Every published job (live ones only unless include_finished), by id.
  std::vector<std::shared_ptr<const v1::JobView>> Jobs(bool include_finished) const ABSL_LOCKS_EXCLUDED(mu_);
  // The user of the live (unfinished) job with id `id`; nullopt when no
  // live job has it.
  std::optional<std::string> LiveJobUser(uint64_t id) const ABSL_LOCKS_EXCLUDED(mu_);
  NodesPtr Nodes() const ABSL_LOCKS_EXCLUDED(mu_);
  QueuesPtr Queues() const ABSL_LOCKS_EXCLUDED(mu_);
  SchedulesPtr Schedules() const ABSL_LOCKS_EXCLUDED(mu_);
  StatsPtr Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  Counts StateCounts() const ABSL_LOCKS_EXCLUDED(mu_);

  static v1::JobView FullView(const JobEntry& entry);

  // Finished jobs' accounts, published with their views (and kept after a
  // job is deleted): history and usage read them. Its own lock.
  AccountBook& accounts() { return accounts_; }
  const AccountBook& accounts() const { return accounts_; }
  // The running tasks' resource samples, as their agents send them.
  ResourceBook& resources() { return resources_; }
  const ResourceBook& resources() const { return resources_; }

  Versions CurrentVersions() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the versions differ from `seen` or `deadline` passes; what
  // they are then.
  Versions AwaitChange(const Versions& seen, absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Bump(int64_t* version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The unfinished jobs' views by id, kept by PutJob and RemoveJob: Jobs(false)
  // (the dashboard's lists, every REST list of live jobs) reads these
  // without walking the finished jobs kept, which outnumber them on a
  // cluster that has run a while.
  using LiveMap = std::map<uint64_t, std::shared_ptr<const v1::JobView>>;
  // A queue's published jobs by state, and which states it has had (a state
  // once counted stays listed in StateCounts, at 0 when none are left).
  struct QueueCounts {
    std::array<int64_t, v1::JobState_ARRAYSIZE> jobs{};
    uint32_t seen = 0;  // bit s: state s was counted
  };
  // A job's entry and, while it is live, its place in live_ (std::map
  // iterators stay valid): a live job's new view replaces its old one there
  // without a search. `listed` means `live` points at an element of live_
  // that holds this job's view: whoever erases or takes over an element
  // clears the flag of the slot that pointed there.
  struct Slot {
    JobEntry entry;
    LiveMap::iterator live;
    bool listed = false;
    QueueCounts* counted = nullptr;  // the cell entry is counted in
  };
  // Puts `view` in live_ at its id for `slot` (taking the place over from
  // another job's view of the same id).
  void List(Slot& slot, const std::shared_ptr<const v1::JobView>& view) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the slot's view out of live_ when live_ still holds it there (not
  // another job's view of the same id).
  void Unlist(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cell of `queue` in queue_counts_ (made when new). Cells stay where
  // they are (a std::map), so a slot keeps a pointer to the one its job is
  // counted in and a put that keeps the queue looks nothing up.
  QueueCounts* QueueCell(const std::string& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds (sign +1) or takes away (-1) the job and tasks of `entry`, counted
  // in `cell`, in the counts.
  void Count(const JobEntry& entry, QueueCounts* cell, int64_t sign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AccountBook accounts_;
  ResourceBook resources_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Slot> jobs_ ABSL_GUARDED_BY(mu_);
  LiveMap live_ ABSL_GUARDED_BY(mu_);
  NodesPtr nodes_ ABSL_GUARDED_BY(mu_) = std::make_shared<const std::vector<NodeEntry>>();
  QueuesPtr queues_ ABSL_GUARDED_BY(mu_) = std::make_shared<const v1::ListQueuesResponse>();
  SchedulesPtr schedules_ ABSL_GUARDED_BY(mu_) = std::make_shared<const std::vector<v1::ScheduleView>>();
  StatsPtr stats_ ABSL_GUARDED_BY(mu_) = std::make_shared<const PublishedStats>();
  std::map<std::string, QueueCounts, std::less<>> queue_counts_ ABSL_GUARDED_BY(mu_);
  std::array<int64_t, v1::TaskState_ARRAYSIZE> task_counts_ ABSL_GUARDED_BY(mu_){};
  Versions versions_ ABSL_GUARDED_BY(mu_);
  mutable absl::CondVar changed_;  // versions_ moved
};

}  // namespace trainyard::server
