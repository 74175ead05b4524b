// ViewPublisher: what clients see of the control state, built and put out
// only where something changed (view_publisher.h).
#include "server/control/view_publisher.h"

#include <algorithm>
#include <map>

#include "api/accounting.h"
#include "api/convert.h"
#include "api/restart_budgets.h"
#include "api/task_env.h"
#include "api/time_limits.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

void ViewPublisher::JobMoved(const std::string& job) {
  jobs_changed_.insert(job);
  if (all_nodes_) return;
  jobs_moved_.insert(job);
  if (MostNodes(jobs_moved_.size())) {
    all_nodes_ = true;
    jobs_moved_.clear();
  }
}

void ViewPublisher::JobDeleted(const std::string& job, v1::JobAccount account) {
  jobs_changed_.erase(job);
  unbooked_.push_back(std::move(account));  // its account stays after its view goes
  deleted_.push_back(job);
}

void ViewPublisher::PublishJobs(ViewStore* views) {
  for (const std::string& name : deleted_) views->RemoveJob(name);
  deleted_.clear();
  if (!unbooked_.empty()) views->accounts().PutMany(std::move(unbooked_));
  unbooked_.clear();
  for (const std::string& name : jobs_changed_) {
    const JobRt* job = FindJobIn(jobs_, name);
    if (!job) continue;  // a name reserved for a submission not yet durable
    views->PutJob(name, Entry(*job));
    if (api::IsTerminal(job->rec.state())) views->accounts().Put(api::AccountOf(job->rec));
  }
  jobs_changed_.clear();
}

size_t ViewPublisher::PublishRecovered(ViewStore* views, size_t max) {
  if (!unbooked_.empty()) views->accounts().PutMany(std::move(unbooked_));
  unbooked_.clear();
  for (size_t n = 0; n < max && !unpublished_.empty(); ++n) {
    const JobRt* job = FindJobIn(jobs_, unpublished_.back());
    if (job) {
      views->PutJob(unpublished_.back(), Entry(*job));
      if (api::IsTerminal(job->rec.state())) views->accounts().Put(api::AccountOf(job->rec));
    }
    unpublished_.pop_back();
  }
  return unpublished_.size();
}

bool ViewPublisher::PublishNodes(ViewStore* views, absl::Time now) {
  const bool due = now >= sweep_due_;
  // A job's change checks every node at most a second later (a task that
  // left a node may not be among the job's tasks any more); a node's own
  // change (its ports or busy GPUs) checks that node only; heartbeat times
  // alone are copied into the entries once a second, no view checked.
  if (!jobs_moved_.empty()) sweep_wanted_ = true;
  bool sweep = all_nodes_ || (due && sweep_wanted_);
  // Changes touching most nodes (a big job's, or many small ones' between
  // two publications under load) check them all: as cheap as touching them.
  size_t touched = 0;
  for (const std::string& name : jobs_moved_) {
    const JobRt* job = sweep ? nullptr : FindJobIn(jobs_, name);
    if (!job) continue;
    touched += static_cast<size_t>(job->rec.tasks_size());
    if (MostNodes(touched)) {
      sweep = true;
      continue;
    }
    for (const auto& t : job->rec.tasks()) TouchNode(t.node());
  }
  jobs_moved_.clear();
  const bool times = due && heartbeats_;
  if (sweep || touched_ || times) {
    views->PutNodes(PublishedNodes(sweep));
    touched_ = false;
  }
  if (sweep) sweep_wanted_ = false;
  if (sweep || times) {
    heartbeats_ = false;
    sweep_due_ = now + absl::Seconds(1);
  }
  all_nodes_ = false;
  bool queues = queues_;
  queues_ = false;
  return queues;
}

namespace {

// A published view and the arena it lives in: one allocation (the arena's
// first block is inside) instead of one per string and message, and one
// free when the last reader lets go. Published thousands of times a second.
// Every block (and the holder) stays under 1,000 bytes: glibc's malloc consolidates its free
// lists on each larger request.
struct ArenaView {
  static constexpr size_t kBlock = 768;
  static google::protobuf::ArenaOptions Options(char* block) {
    google::protobuf::ArenaOptions o;
    o.initial_block = block;
    o.initial_block_size = kBlock;
    o.start_block_size = kBlock;
    o.max_block_size = kBlock;
    return o;
  }
  ArenaView() : arena(Options(block)) {}
  alignas(16) char block[kBlock];
  google::protobuf::Arena arena;
};

}  // namespace

ViewStore::JobEntry ViewPublisher::Entry(const JobRt& job) const {
  auto holder = std::make_shared<ArenaView>();
  v1::JobView* v = google::protobuf::Arena::CreateMessage<v1::JobView>(&holder->arena);
  FillView(job, v);
  return ViewStore::JobEntry{std::shared_ptr<const v1::JobView>(holder, v), job.events, job.events_loaded};
}

v1::JobView ViewPublisher::View(const JobRt& job, bool with_events) const {
  v1::JobView v;
  FillView(job, &v);
  if (with_events) job.events.AppendTo(v.mutable_events());
  return v;
}

void ViewPublisher::FillView(const JobRt& job, v1::JobView* out) const {
  v1::JobView& v = *out;
  const v1::JobRecord& r = job.rec;
  v.set_name(r.name());
  v.set_id(r.id());
  v.set_user(r.spec().user());
  v.set_queue(r.spec().queue());
  v.set_priority(r.spec().priority());
  v.set_framework(r.spec().framework());
  v.set_state(r.state());
  // A placed job may still have tasks waiting for room (minAvailable below
  // count): their reason shows until they are placed.
  bool waiting = r.state() == v1::JOB_QUEUED || (!api::IsTerminal(r.state()) && !r.pending_reason().empty());
  v.set_reason(waiting ? r.pending_reason() : r.message());
  v.set_submit_time_unix_ms(r.submit_time_ms());
  v.set_start_time_unix_ms(r.start_time_ms());
  v.set_end_time_unix_ms(r.end_time_ms());
  v.set_active_deadline_ms(r.spec().active_deadline_ms());
  v.set_deadline_unix_ms(api::DeadlineMs(r));
  v.set_job_master(job.job_master);
  v.set_held(r.held());
  if (job.checkpoint.id() > 0) *v.mutable_checkpoint_order() = job.checkpoint;
  if (r.has_resume_step()) v.set_resume_step(r.resume_step());
  v.set_checkpoint_dir(api::JobCheckpointDir(config_.checkpoint_root, r.name(), r.id()));
  v.set_membership_epoch(r.membership_epoch());
  v.set_array_job(r.array_job());
  v.set_array_index(r.array_index());
  *v.mutable_after_ok() = r.spec().dependencies().after_ok();
  *v.mutable_after_any() = r.spec().dependencies().after_any();
  int gpus = 0;
  for (const auto& t : r.tasks()) {
    FillTaskView(r, t, v.add_tasks());
    if (!t.node().empty() && !api::IsTerminal(t.state())) gpus += t.allocation().gpus();
  }
  v.set_gpus(gpus);
}

void ViewPublisher::FillTaskView(const v1::JobRecord& r, const v1::TaskRecord& t, v1::TaskView* tv) const {
  tv->set_name(api::TaskName(r.name(), t.role(), t.index()));
  tv->set_role(t.role());
  tv->set_index(t.index());
  tv->set_worker_id(t.worker_id());
  tv->set_node(t.node());
  if (const NodeRt* n = t.node().empty() ? nullptr : nodes_.Find(t.node())) {
    tv->set_node_address(n->info.address());
    tv->set_node_gpu_count(n->info.topology().gpu_count());
  }
  tv->set_gpu_mask(t.allocation().gpu_mask());
  tv->set_gpu_milli(t.allocation().gpu_milli());
  tv->set_gpu_memory_mb(t.allocation().gpu_memory_mb());
  *tv->mutable_ports() = t.allocation().ports();
  tv->set_state(t.state());
  tv->set_restarts(t.restart_count());
  tv->set_attempt(t.attempt());
  *tv->mutable_last_exit() = t.exit();
  if (t.has_limits()) *tv->mutable_limits() = t.limits();
  *tv->mutable_attempts() = t.attempts();
  for (const v1::ReplicaSpec& rs : r.spec().replicas()) {
    if (rs.role() != t.role()) continue;
    tv->set_service(rs.kind() == v1::ROLE_KIND_SERVICE);
    for (v1::RestartBudgetView& b : api::BudgetViews(rs, t.restarts_by_class())) *tv->add_budgets() = std::move(b);
  }
  // What the task holds once placed, else what it asks (with the server's
  // defaults), so describe shows a pending task's request too.
  bool placed = t.allocation().memory_mb() != 0 || t.allocation().vcores_milli() != 0;
  const v1::Resource* asked = nullptr;
  for (int k = 0; !placed && !asked && k < r.spec().replicas_size(); ++k) {
    if (r.spec().replicas(k).role() == t.role()) asked = &r.spec().replicas(k).resources();
  }
  tv->set_memory_mb(asked ? asked->memory_mb() : t.allocation().memory_mb());
  tv->set_vcores_milli(asked ? asked->vcores_milli() : t.allocation().vcores_milli());
}

uint64_t ViewPublisher::NodeViewSig(const NodeRt& node) const {
  // Everything NodeViewOf shows, folded into one number (FNV-1a). The
  // registration (session, time) stands for the node's info and capacity.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(node.session);
  mix(static_cast<uint64_t>(ToMs(node.registered)));
  mix(static_cast<uint64_t>(node.state));
  mix(node.ports_in_use.Count());
  mix(node.in_scheduler);
  mix(static_cast<uint64_t>(NodeTable::ShownState(node)));
  mix(std::hash<std::string>()(NodeTable::ShownReason(node)));
  mix(node.cordoned);
  mix(node.draining);
  mix(node.faulty_gpus);
  mix(node.cordoned_gpus);
  for (const v1::GpuFault& f : node.info.gpu_faults()) {
    mix(static_cast<uint64_t>(f.gpu()));
    mix(static_cast<uint64_t>(f.xid()));
    mix(static_cast<uint64_t>(f.time_unix_ms()));
  }
  const core::ClusterState& cs = scheduler_->state();
  if (auto id = cs.FindNode(node.info.name()); id && node.in_scheduler) {
    const core::NodeState& ns = cs.node(*id);
    mix(ns.free.gpu_mask);
    mix(ns.shared);
    for (uint64_t m = ns.shared; m != 0; m &= m - 1) {
      int g = __builtin_ctzll(m);
      mix(static_cast<uint64_t>(ns.share_used[g]));
      mix(static_cast<uint64_t>(ns.share_memory_used[g]));
    }
    mix(static_cast<uint64_t>(ns.free.memory_mb));
    mix(static_cast<uint64_t>(ns.free.vcores_milli));
    for (const core::NodeTask& nt : ns.tasks) {
      mix(static_cast<uint64_t>(nt.job));
      mix(static_cast<uint64_t>(nt.pos));
    }
  }
  return h;
}

// Every field set here must be folded into NodeViewSig, or a published view
// would keep an old value (the heartbeat time and free disk, which move with
// every heartbeat, are published beside it).
v1::NodeView ViewPublisher::NodeViewOf(const NodeRt& node, bool with_heartbeat) const {
  v1::NodeView v;
  FillNodeView(node, with_heartbeat, &v);
  return v;
}

void ViewPublisher::FillNodeView(const NodeRt& node, bool with_heartbeat, v1::NodeView* out) const {
  const core::ClusterState& cs = scheduler_->state();
  v1::NodeView& v = *out;
  *v.mutable_info() = node.info;
  v.mutable_info()->set_state(NodeTable::ShownState(node));
  v.set_reason(NodeTable::ShownReason(node));
  v.set_cordoned(node.cordoned || node.draining);
  v.set_cordoned_gpus(node.cordoned_gpus);
  v.set_ports_in_use(static_cast<int>(node.ports_in_use.Count()));
  if (with_heartbeat) {
    v.set_last_heartbeat_unix_ms(ToMs(node.last_heartbeat));
    v.set_data_free_mb(node.data_free_mb);
  }
  if (auto id = cs.FindNode(node.info.name()); id && node.in_scheduler) {
    const core::NodeState& ns = cs.node(*id);
    v.set_free_gpu_mask(ns.free.gpu_mask);
    v.set_free_memory_mb(ns.free.memory_mb);
    v.set_free_vcores_milli(ns.free.vcores_milli);
    std::map<int, v1::GpuShareView> shares;
    for (const core::NodeTask& nt : ns.tasks) {
      const core::JobState& js = cs.job(nt.job);
      const core::PlacedTask& pt = js.tasks[nt.pos];
      std::string name = api::TaskName(js.request.id, js.request.roles[pt.role].name, pt.index);
      if (pt.allocation.IsGpuShare()) {
        v1::GpuShareView& share = shares[__builtin_ctzll(pt.allocation.gpu_mask)];
        share.add_tasks(name);
      }
      v.add_tasks(std::move(name));
    }
    for (auto& [g, share] : shares) {
      share.set_gpu(g);
      share.set_used_milli(ns.share_used[g]);
      share.set_used_memory_mb(ns.share_memory_used[g]);
      std::sort(share.mutable_tasks()->begin(), share.mutable_tasks()->end());
      *v.add_gpu_shares() = std::move(share);
    }
  }
}

void ViewPublisher::TouchNode(const std::string& name) {
  if (name.empty()) return;
  NodeRt* n = nodes_.Find(name);
  if (!n) return;
  n->view_touched = true;
  touched_ = true;
  sweep_wanted_ = true;
}

void ViewPublisher::TouchOwnView(NodeRt& node) {
  node.view_touched = true;
  touched_ = true;
}

ViewStore::NodesPtr ViewPublisher::PublishedNodes(bool sweep) {
  auto out = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  out->reserve(nodes_.size());
  for (auto& [name, node] : nodes_) {
    if (sweep || node->view_touched || !node->view) {
      uint64_t sig = NodeViewSig(*node);
      if (!node->view || sig != node->view_sig) {
        // In an arena, as a job's view is (Entry): one allocation, not one per field.
        auto holder = std::make_shared<ArenaView>();
        v1::NodeView* view = google::protobuf::Arena::CreateMessage<v1::NodeView>(&holder->arena);
        FillNodeView(*node, /*with_heartbeat=*/false, view);
        node->view = std::shared_ptr<const v1::NodeView>(holder, view);
        node->view_sig = sig;
      }
      node->view_touched = false;
    }
    out->push_back({node->view, ToMs(node->last_heartbeat), node->data_free_mb});
  }
  return out;
}

void ViewPublisher::PublishNodesAndQueues(ViewStore* views, absl::Time now) {
  if (PublishNodes(views, now)) views->PutQueues(std::make_shared<const v1::ListQueuesResponse>(QueuesView()));
}

std::vector<v1::JobView> ViewPublisher::JobViews(bool include_finished) const {
  std::vector<v1::JobView> out;
  for (auto& [name, job] : jobs_) {
    if (!job || (!include_finished && api::IsTerminal(job->rec.state()))) continue;
    out.push_back(View(*job, false));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id() < b.id(); });
  return out;
}

std::vector<v1::NodeView> ViewPublisher::NodeViews() const {
  std::vector<v1::NodeView> out;
  for (auto& [name, node] : nodes_) out.push_back(NodeViewOf(*node, /*with_heartbeat=*/true));
  return out;
}

v1::ListQueuesResponse ViewPublisher::QueuesView() const {
  v1::ListQueuesResponse resp;
  const core::ClusterState& cs = scheduler_->state();
  *resp.mutable_cluster() = api::ToProto(cs.ClusterCapacity());
  std::vector<std::pair<const core::QueueConfig*, double>> stack = {{&scheduler_->options().queues.root, 100.0}};
  while (!stack.empty()) {
    auto [q, parent_abs] = stack.back();
    stack.pop_back();
    double abs_cap = parent_abs * q->capacity_percent / 100.0;
    double abs_max = parent_abs * q->max_capacity_percent / 100.0;
    for (const auto& c : q->children) stack.push_back({&c, abs_cap});
    if (!q->children.empty()) continue;
    v1::QueueView* v = resp.add_queues();
    v->set_name(q->name);
    v->set_capacity_percent(abs_cap);
    v->set_max_capacity_percent(abs_max);
    v->set_weight(q->weight);
    v->set_max_time_ms(absl::ToInt64Milliseconds(q->max_time));
    v->set_default_time_ms(absl::ToInt64Milliseconds(q->default_time));
    const auto& names = cs.queue_names();
    auto it = std::find(names.begin(), names.end(), q->name);
    if (it != names.end()) {
      auto queue = static_cast<int32_t>(it - names.begin());
      *v->mutable_used() = api::ToProto(cs.QueueUsed(queue));
      v->mutable_used()->set_gpu_milli(int64_t{1000} * v->used().gpus() + cs.QueueShareMilli(queue));
    }
    if (const JobCounts::Queue* counted = counts_.queue(q->name)) {
      v->set_running_jobs(counted->running);
      v->set_pending_jobs(counted->pending);
    }
  }
  std::sort(resp.mutable_queues()->begin(), resp.mutable_queues()->end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return resp;
}

}  // namespace trainyard::server
