// ViewPublisher: what clients see of the control state (jobs with their
// tasks, nodes with their free resources) and when it goes out to the
// ViewStore. The control state's handlers say what changed (JobChanged,
// TouchNode, ...); the shell asks for publication (ControlState::PublishJobs,
// PublishNodesAndQueues), and only what changed is built again: a job's
// view when the job changed, a node's when its signature (NodeViewSig)
// moved. Part of the control state (single-threaded, sans-IO); it reads the
// jobs, nodes and scheduler it is given and writes only the views' cache in
// each node's record (NodeRt::view, view_sig, view_touched).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "core/scheduler/scheduler.h"
#include "proto/service.pb.h"
#include "server/config.h"
#include "server/control/job_counts.h"
#include "server/control/job_map.h"
#include "server/control/node_table.h"
#include "server/view_store.h"

namespace trainyard::server {

class ViewPublisher {
 public:
  // REQUIRES: all five outlive this object (they are the control state's).
  ViewPublisher(const ServerConfig& config, const JobMap& jobs, NodeTable& nodes,
                const std::unique_ptr<core::Scheduler>& scheduler, const JobCounts& counts)
      : config_(config), jobs_(jobs), nodes_(nodes), scheduler_(scheduler), counts_(counts) {}

  // ---- what changed ----
  // The job's own view (its state, events, tasks).
  void JobChanged(const std::string& job) { jobs_changed_.insert(job); }
  // The job's view, and what it did on the nodes its tasks are on (their
  // free resources and task lists): those nodes are checked at the next
  // publication. Once the jobs changed meanwhile are more than half the
  // nodes, every node is (as cheap), and they need not be gathered further.
  void JobMoved(const std::string& job);
  // A job's task on `node` changed: that node's view is checked.
  void TouchNode(const std::string& node);
  // A change of the node's own (its ports, busy GPUs, admin state): its view
  // is checked at the next publication, no other node's.
  void TouchOwnView(NodeRt& node);
  // Every node's view is checked (nodes came or went, placement changed).
  void NodesChanged() { all_nodes_ = true; }
  void QueuesChanged() { queues_ = true; }
  // Heartbeat times moved: copied into the published entries at most once
  // a second, no node's view checked.
  void HeartbeatsMoved() { heartbeats_ = true; }
  // A deleted job: its view is taken down, its account (`account`, which
  // outlives the view) kept in the book.
  void JobDeleted(const std::string& job, v1::JobAccount account);
  // The account of a finished job recovered without a view (deleted).
  void Unbooked(v1::JobAccount account) { unbooked_.push_back(std::move(account)); }
  // A job recovered from the store, published by PublishRecovered.
  void Recovered(std::string job) { unpublished_.push_back(std::move(job)); }

  bool NodeViewsChanged() const { return all_nodes_ || queues_ || !jobs_moved_.empty() || touched_; }
  bool JobViewsChanged() const { return !jobs_changed_.empty() || !deleted_.empty() || !unbooked_.empty(); }

  // ---- publication ----
  // The views of the jobs that changed since the last call.
  void PublishJobs(ViewStore* views);
  // Up to `max` of the recovered jobs not out yet; returns how many are left.
  size_t PublishRecovered(ViewStore* views, size_t max);
  // The node views when anything changed since the last call. A change of
  // heartbeat times alone goes out at most once a second and checks no
  // node's view. Returns whether the queue view is due (the caller builds
  // it); that flag is cleared.
  bool PublishNodes(ViewStore* views, absl::Time now);
  // Every node's view, built again only for the nodes that changed (all are
  // checked when `sweep`, else only those touched since the last one).
  ViewStore::NodesPtr PublishedNodes(bool sweep = true);
  // PublishNodes, and the queue view (QueuesView) when it is due.
  void PublishNodesAndQueues(ViewStore* views, absl::Time now);

  // ---- the views ----
  v1::JobView View(const JobRt& job, bool with_events) const;
  ViewStore::JobEntry Entry(const JobRt& job) const;  // to publish, in an arena
  // Every field set here must be folded into NodeViewSig, or a published
  // view would keep an old value (the heartbeat time and free disk, which
  // move with every heartbeat, are published beside it).
  v1::NodeView NodeViewOf(const NodeRt& node, bool with_heartbeat) const;
  // Every job's view (finished ones only when `include_finished`), by id,
  // without events.
  std::vector<v1::JobView> JobViews(bool include_finished) const;
  // Every node's view, by name.
  std::vector<v1::NodeView> NodeViews() const;
  // The leaf queues with their share of the cluster (absolute percents),
  // their use and their jobs, by name.
  v1::ListQueuesResponse QueuesView() const;

 private:
  void FillView(const JobRt& job, v1::JobView* v) const;  // without events
  // One task's part of its job's view: where it is, what it holds (or asks
  // for, while pending), its attempts and budgets.
  void FillTaskView(const v1::JobRecord& r, const v1::TaskRecord& t, v1::TaskView* tv) const;
  void FillNodeView(const NodeRt& node, bool with_heartbeat, v1::NodeView* out) const;
  // Everything NodeViewOf shows, folded into one number (FNV-1a).
  uint64_t NodeViewSig(const NodeRt& node) const;
  // True when touching `n` nodes' views one by one would cost as much as
  // checking every node (more than half of them).
  bool MostNodes(size_t n) const { return n > nodes_.size() / 2; }

  const ServerConfig& config_;
  const JobMap& jobs_;
  NodeTable& nodes_;
  const std::unique_ptr<core::Scheduler>& scheduler_;
  const JobCounts& counts_;

  // What changed since views were last published.
  absl::flat_hash_set<std::string> jobs_changed_;
  std::vector<std::string> deleted_;  // views to take down
  // Accounts of jobs that have no view to publish them with (deleted, and
  // deleted ones recovered from the store), put in the book at the next
  // publication.
  std::vector<v1::JobAccount> unbooked_;
  std::vector<std::string> unpublished_;  // recovered, not yet published
  bool all_nodes_ = true;
  bool queues_ = true;
  // Node views: all_nodes_ checks every node at the next publication; a
  // job's change checks only the nodes its tasks are on (jobs_moved_, then
  // NodeRt::view_touched), with every node checked at most a second later
  // all the same; heartbeat times alone go out at most once a second.
  absl::flat_hash_set<std::string> jobs_moved_;
  bool touched_ = false;
  bool sweep_wanted_ = false;  // a job changed: check every node when the second is up
  bool heartbeats_ = false;
  absl::Time sweep_due_ = absl::InfinitePast();
};

}  // namespace trainyard::server
