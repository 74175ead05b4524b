// The Prometheus exposition of the server (see metrics.h). Names follow
// Prometheus' conventions: trainyard_ prefix, base units (seconds), _total
// for counters; label sets are bounded by the cluster's shape (states,
// queues, nodes, causes, API methods and codes) and, for the user gauge, by
// the users holding GPUs now; never by jobs or tasks.
#include "server/http/metrics.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "api/states.h"
#include "httpd/prometheus_text.h"
#include "server/http/json_views.h"
#include "server/join_guard.h"

namespace trainyard::server::http {
namespace {

using Writer = httpd::PrometheusText;

std::string Escape(const std::string& v) { return httpd::EscapeLabel(v); }

void JobsAndTasks(Writer& w, const ViewStore& views) {
  ViewStore::Counts counts = views.StateCounts();
  w.Family("trainyard_jobs", "gauge", "Jobs the server knows, by queue and state (finished ones included).");
  for (const auto& [key, n] : counts.jobs) {
    w.Sample("trainyard_jobs",
             absl::StrCat("queue=\"", Escape(key.first), "\",state=\"", api::JobStateName(key.second), "\""), n);
  }
  w.Family("trainyard_tasks", "gauge", "Tasks of the jobs the server knows, by state.");
  for (int s = v1::TASK_PENDING; s < v1::TaskState_ARRAYSIZE; ++s) {
    w.Sample("trainyard_tasks", absl::StrCat("state=\"", api::TaskStateName(static_cast<v1::TaskState>(s)), "\""),
             counts.tasks[s]);
  }
}

void Nodes(Writer& w, const ViewStore& views, absl::Time now) {
  ViewStore::NodesPtr nodes = views.Nodes();
  std::string allocated, free, faults;
  allocated.reserve(nodes->size() * 48);
  free.reserve(nodes->size() * 48);
  GpuCounts sums;  // summed in thousandths, divided once below
  int64_t by_state[4] = {0, 0, 0, 0};
  double oldest = 0;
  for (const ViewStore::NodeEntry& entry : *nodes) {
    const v1::NodeView* n = entry.view.get();
    GpuCounts c = GpuCountsOf(*n);
    std::string node = Escape(n->info().name());
    absl::StrAppend(&allocated, "trainyard_node_gpus_allocated{node=\"", node, "\"} ", c.AllocatedGpus(), "\n");
    absl::StrAppend(&free, "trainyard_node_gpus_free{node=\"", node, "\"} ", c.FreeGpus(), "\n");
    sums.Add(c);
    for (const v1::GpuFault& f : n->info().gpu_faults()) {
      if (f.action() != v1::GPU_FAULT_EXCLUDE_GPU && f.action() != v1::GPU_FAULT_DRAIN_NODE) continue;
      absl::StrAppend(&faults, "trainyard_gpu_fault{node=\"", node, "\",gpu=\"", f.gpu(), "\",xid=\"", f.xid(),
                      "\",action=\"", f.action() == v1::GPU_FAULT_DRAIN_NODE ? "drain_node" : "exclude_gpu", "\"} 1\n");
    }
    int state = std::clamp(static_cast<int>(n->info().state()), 0, 3);
    ++by_state[state];
    if (n->info().state() == v1::NODE_READY && entry.last_heartbeat_unix_ms > 0) {
      oldest = std::max(oldest, absl::ToDoubleSeconds(now - absl::FromUnixMillis(entry.last_heartbeat_unix_ms)));
    }
  }
  w.Family("trainyard_node_gpus_allocated", "gauge", "GPUs of the node held by tasks, a share as its fraction.");
  w.Raw(allocated);
  w.Family("trainyard_node_gpus_free", "gauge", "GPUs of the node free for tasks, the free part of split GPUs included (excluded ones not counted).");
  w.Raw(free);
  w.Family("trainyard_gpu_fault", "gauge",
           "1 for each GPU its node's agent found faulty (an Xid that excludes the GPU or drains the node; docs/gpu-health.md).");
  w.Raw(faults);
  w.Family("trainyard_gpus", "gauge", "GPUs of the cluster by state: allocated, free, excluded (busy with processes Trainyard did not start, or faulty); a share counts as its fraction.");
  w.Sample("trainyard_gpus", "state=\"allocated\"", sums.AllocatedGpus());
  w.Sample("trainyard_gpus", "state=\"free\"", sums.FreeGpus());
  w.Sample("trainyard_gpus", "state=\"excluded\"", sums.excluded);
  w.Family("trainyard_nodes", "gauge", "Nodes by state.");
  for (v1::NodeState s : {v1::NODE_READY, v1::NODE_LOST, v1::NODE_DRAINING}) {
    w.Sample("trainyard_nodes", absl::StrCat("state=\"", NodeStateName(s), "\""), static_cast<double>(by_state[s]));
  }
  w.Gauge("trainyard_agent_heartbeat_age_max_seconds",
          "Time since the last heartbeat of the READY node heard from longest ago.", std::max(0.0, oldest));
}

void Queues(Writer& w, const ViewStore& views) {
  ViewStore::QueuesPtr queues = views.Queues();
  w.Family("trainyard_queue_gpus_allocated", "gauge", "GPUs held by the queue's running tasks, a share as its fraction.");
  for (const auto& q : queues->queues()) {
    w.Sample("trainyard_queue_gpus_allocated", absl::StrCat("queue=\"", Escape(q.name()), "\""),
             q.used().gpu_milli() / 1000.0);
  }
  w.Family("trainyard_queue_gpus_guaranteed", "gauge", "GPUs the queue's capacity share guarantees it.");
  for (const auto& q : queues->queues()) {
    w.Sample("trainyard_queue_gpus_guaranteed", absl::StrCat("queue=\"", Escape(q.name()), "\""),
             queues->cluster().gpus() * q.capacity_percent() / 100.0);
  }
}

// A user's GPUs in each queue, shares as fractions, as the queue view's
// users count them. Only pairs holding GPUs are written, so the label set is
// bounded by the users holding GPUs now, not by every user who queued a job.
void Users(Writer& w, const ViewStore& views) {
  w.Family("trainyard_user_gpus_allocated", "gauge",
           "GPUs held by a user's running tasks in a queue, a share as its fraction.");
  for (const auto& [queue, users] : UseByQueueAndUser(views.Jobs(false))) {
    for (const auto& [user, use] : users) {
      if (use.gpu_milli <= 0) continue;
      w.Sample("trainyard_user_gpus_allocated",
               absl::StrCat("queue=\"", Escape(queue), "\",user=\"", Escape(user), "\""), use.gpu_milli / 1000.0);
    }
  }
}

// What the running tasks use now (ResourceBook, each task's newest sample),
// summed per queue and user like the GPUs held above: the label set is
// bounded by the users running tasks, never by jobs or tasks (per task:
// the REST API's /api/v1/jobs/{job}/resources and the agents' /metrics).
void TaskResources(Writer& w, const ViewStore& views, absl::Time now) {
  const ResourceBook& book = views.resources();
  struct Use {
    int64_t cpu_milli = 0, memory = 0, gpu_busy_milli = 0, gpu_memory = 0;
  };
  std::map<uint64_t, std::pair<std::string, std::string>> owners;  // live job id -> (queue, user)
  for (const auto& j : views.Jobs(false)) owners[j->id()] = {j->queue(), j->user()};
  std::map<std::pair<std::string, std::string>, Use> by_owner;
  int64_t near = 0;
  for (const ResourceBook::JobNow& j : book.Now(now, book.Fresh())) {
    auto owner = owners.find(j.job_id);
    if (owner == owners.end()) continue;  // ended: its tasks' last samples no longer count
    Use& u = by_owner[owner->second];
    u.cpu_milli += j.cpu_milli;
    u.memory += j.memory_bytes;
    u.gpu_busy_milli += j.gpu_busy_milli;
    u.gpu_memory += j.gpu_memory_bytes;
    near += j.near_memory_limit;
  }
  auto family = [&](const char* name, const char* help, auto value) {
    w.Family(name, "gauge", help);
    for (const auto& [key, u] : by_owner) {
      w.Sample(name, absl::StrCat("queue=\"", Escape(key.first), "\",user=\"", Escape(key.second), "\""), value(u));
    }
  };
  family("trainyard_user_cpu_cores_used", "CPU cores a user's running tasks use in a queue, as their agents last sampled them.",
         [](const Use& u) { return u.cpu_milli / 1000.0; });
  family("trainyard_user_memory_used_bytes", "Memory a user's running tasks use in a queue (working set, or resident set without a cgroup).",
         [](const Use& u) { return static_cast<double>(u.memory); });
  family("trainyard_user_gpus_busy", "GPUs a user's running tasks keep busy in a queue (utilisation summed; a shared GPU's apportioned by share).",
         [](const Use& u) { return u.gpu_busy_milli / 1000.0; });
  family("trainyard_user_gpu_memory_used_bytes", "GPU memory a user's running tasks use in a queue.",
         [](const Use& u) { return static_cast<double>(u.gpu_memory); });
  w.Gauge("trainyard_tasks_near_memory_limit", "Running tasks whose last sample used 90 % of their memory limit or more.",
          static_cast<double>(near));
  ResourceBook::Counts c = book.counts();
  w.Gauge("trainyard_task_sample_series", "Tasks whose resource samples the server keeps (at most taskSampleMaxTasks).",
          static_cast<double>(c.tasks));
  w.Counter("trainyard_task_samples_refused_total", "Samples not kept because taskSampleMaxTasks tasks already had theirs.",
            static_cast<double>(c.refused));
}

void Counters(Writer& w, const PublishedStats& s) {
  const ManagerStats& m = s.manager;
  w.Counter("trainyard_jobs_submitted_total", "Jobs accepted (durable) since the server started.", m.submitted);
  w.Counter("trainyard_scheduling_rounds_total", "Scheduling rounds run.", m.rounds);
  w.Hist("trainyard_scheduling_round_duration_seconds", "Wall time of one scheduling round.", s.round_seconds);
  w.Counter("trainyard_placements_total", "Tasks placed on a node (by a round, or moved off a lost node).", m.placements);
  w.Counter("trainyard_preemptions_total", "Jobs chosen as preemption victims.", m.preemptions);
  w.Counter("trainyard_job_requeues_total", "Jobs sent back to the queue (preempted, or no node could take a lost task).",
            m.requeues);
  w.Family("trainyard_task_restarts_total", "counter",
           "Task restarts by cause: exit (ended, restarted by its policy), lost (its agent no longer ran it), "
           "node_lost (moved off a lost node).");
  w.Sample("trainyard_task_restarts_total", "cause=\"exit\"", m.restarts_exit);
  w.Sample("trainyard_task_restarts_total", "cause=\"lost\"", m.restarts_lost);
  w.Sample("trainyard_task_restarts_total", "cause=\"node_lost\"", m.restarts_node_lost);
  w.Family("trainyard_task_attempts_ended_total", "counter",
           "Ended task attempts by queue and class (FAILED, OOM_KILLED, NODE_LOST, PREEMPTED, LAUNCH_FAILED, "
           "DEADLINE_EXCEEDED, KILLED, SUCCEEDED, GPU_ERROR).");
  for (const auto& [key, n] : m.attempts_ended) {
    w.Sample("trainyard_task_attempts_ended_total",
             absl::StrCat("queue=\"", Escape(key.first), "\",class=\"", Escape(key.second), "\""), n);
  }
  w.Hist("trainyard_job_pending_duration_seconds",
         "Time a job waited in the queue before it was placed (from its submission or its return to the queue).",
         m.pending_seconds);
  w.Counter("trainyard_agent_heartbeats_total", "Heartbeats received from agents.", m.heartbeats);
  w.Hist("trainyard_agent_heartbeat_interval_seconds",
         "Time between two heartbeats of one node; a node with nothing new beats every quiet interval, above it is lag.", m.heartbeat_gap_seconds);
  w.Gauge("trainyard_agents_connected", "Agents with an open stream to the server.", s.agents_connected);
  w.Counter("trainyard_store_commits_total", "Durable store transactions (one fsync each with storeSync on).",
            s.store.transactions);
  w.Family("trainyard_store_batches_total", "counter", "Write batches the store was given, by outcome.");
  w.Sample("trainyard_store_batches_total", "outcome=\"committed\"", s.store.batches_committed);
  w.Sample("trainyard_store_batches_total", "outcome=\"failed\"", s.store.batches_failed);
  w.Hist("trainyard_store_commit_duration_seconds", "Time of one store transaction, BEGIN to COMMIT (fsync included).",
         s.store.commit_seconds);
  w.Hist("trainyard_store_commit_batch_size", "Write batches one store transaction held (group commit).",
         s.store.batch_size);
  // A server that serves this leads (one on SQLite always; a standby's
  // door answers 0: server/http/standby_door.h).
  w.Gauge("trainyard_server_is_leader",
          "1 when this server leads (serves the API and schedules); 0 on a standby of an etcd store.", 1);
  if (s.store.leader_revision > 0) {
    w.Gauge("trainyard_leader_revision",
            "The etcd create revision of the election key this server leads under (its write fence); "
            "a higher value after a failover.",
            s.store.leader_revision);
    w.Gauge("trainyard_leader_since_timestamp_seconds", "When this server became the leader (Unix seconds).",
            static_cast<double>(s.store.leader_since_unix_ms) / 1000.0);
    w.Gauge("trainyard_leader_terms",
            "Leaderships the cluster's etcd store has had, this one's included: 1 + the failovers so far.",
            static_cast<double>(s.store.leader_terms));
  }
}

// The job masters' figures, summed over every master (no job label:
// master_metrics.h says why).
void Masters(Writer& w, JobMasterMetrics* masters, absl::Time now) {
  JobMasterTotals t = masters ? masters->Totals(now) : JobMasterTotals();
  w.Gauge("trainyard_jobmasters_reporting",
          "Job masters that sent their figures in the last 10 s and have not stopped.", static_cast<double>(t.reporting));
  w.Family("trainyard_jobmaster_workers", "gauge", "Workers of the reporting job masters' jobs, by the masters' state.");
  for (int s = v1::UNASSIGNED; s <= v1::ERROR; ++s) {
    w.Sample("trainyard_jobmaster_workers",
             absl::StrCat("state=\"", v1::WorkerState_Name(static_cast<v1::WorkerState>(s)), "\""),
             static_cast<double>(t.workers[s]));
  }
  w.Gauge("trainyard_jobmaster_connections", "Open worker connections of the reporting job masters.",
          static_cast<double>(t.connections));
  w.Hist("trainyard_jobmaster_barrier_duration_seconds",
         "Time of one barrier of a job's workers, from the first worker in to the last (every master's, stopped ones "
         "too).",
         t.barrier_seconds);
}

// The HTTP door's connections: what it refused, closed to make room and
// timed out (httpd/http_server.h).
void HttpDoor(Writer& w, const httpd::HttpConnectionStats& h) {
  w.Gauge("trainyard_http_connections_open", "Connections to the HTTP listener open now.", static_cast<double>(h.open));
  w.Family("trainyard_http_connections_refused_total", "counter",
           "Connections or requests to the HTTP listener answered 503 and closed, by reason: peer_cap "
           "(httpMaxConnectionsPerPeer), total_cap (httpMaxConnections, none could make room), anonymous "
           "(requests without a token hold their share, httpTrustedReserve).");
  w.Sample("trainyard_http_connections_refused_total", "reason=\"peer_cap\"", static_cast<double>(h.refused_peer_cap));
  w.Sample("trainyard_http_connections_refused_total", "reason=\"total_cap\"", static_cast<double>(h.refused_total_cap));
  w.Sample("trainyard_http_connections_refused_total", "reason=\"anonymous\"", static_cast<double>(h.refused_anonymous));
  w.Sample("trainyard_http_connections_refused_total", "reason=\"proxied\"", static_cast<double>(h.refused_proxied));
  w.Family("trainyard_http_connections_evicted_total", "counter",
           "Connections closed to make room for a new one when all were taken, by what they were doing: idle "
           "(between requests) or unfinished (still sending a request).");
  w.Sample("trainyard_http_connections_evicted_total", "state=\"idle\"", static_cast<double>(h.evicted_idle));
  w.Sample("trainyard_http_connections_evicted_total", "state=\"unfinished\"", static_cast<double>(h.evicted_unfinished));
  w.Family("trainyard_http_connections_timed_out_total", "counter",
           "Connections closed at a deadline, by phase: header (httpHeaderTimeoutMs), body (httpBodyTimeoutMs), "
           "idle (httpKeepAliveMs).");
  w.Sample("trainyard_http_connections_timed_out_total", "phase=\"header\"", static_cast<double>(h.header_timeouts));
  w.Sample("trainyard_http_connections_timed_out_total", "phase=\"body\"", static_cast<double>(h.body_timeouts));
  w.Sample("trainyard_http_connections_timed_out_total", "phase=\"idle\"", static_cast<double>(h.idle_timeouts));
  w.Counter("trainyard_http_trusted_requests_total", "HTTP requests served first for a valid token.",
            static_cast<double>(h.trusted_requests));
}

void Doors(Writer& w, const MetricsSources& src);

void Requests(Writer& w, const MetricsSources& src) {
  w.Family("trainyard_grpc_requests_total", "counter", "Client gRPC calls answered, by method and status code.");
  if (src.grpc) {
    for (int m = 0; m < GrpcCounters::kMethods; ++m) {
      for (int c = 0; c < GrpcCounters::kCodes; ++c) {
        int64_t n = src.grpc->Get(m, c);
        if (n == 0 && c != 0) continue;  // OK always; other codes once seen
        w.Sample("trainyard_grpc_requests_total",
                 absl::StrCat("method=\"", GrpcCounters::MethodName(m), "\",code=\"", GrpcCounters::CodeName(c), "\""),
                 static_cast<double>(n));
      }
    }
  }
  Doors(w, src);
  JoinCounts joins = JoinGuard::Totals();
  w.Family("trainyard_join_requests_total", "counter",
           "NodeJoin.JoinNode calls by outcome: joined, refused_token (unknown, another node's, used or expired), "
           "refused_request (a request that cannot be signed), refused_rate (a peer over its rate of refusals).");
  w.Sample("trainyard_join_requests_total", "outcome=\"joined\"", static_cast<double>(joins.joined));
  w.Sample("trainyard_join_requests_total", "outcome=\"refused_token\"", static_cast<double>(joins.refused_token));
  w.Sample("trainyard_join_requests_total", "outcome=\"refused_request\"", static_cast<double>(joins.refused_request));
  w.Sample("trainyard_join_requests_total", "outcome=\"refused_rate\"", static_cast<double>(joins.refused_rate));
  HttpDoor(w, src.http_connections);
  w.Family("trainyard_http_requests_total", "counter", "HTTP requests answered, by method, route and status code.");
  for (const HttpRequestCount& r : src.http_requests) {
    w.Sample("trainyard_http_requests_total",
             absl::StrCat("method=\"", Escape(r.method), "\",route=\"", Escape(r.route), "\",code=\"", r.code, "\""),
             static_cast<double>(r.count));
  }
}

// The gRPC doors' connections and the per-user rate limits.
void Doors(Writer& w, const MetricsSources& src) {
  const ConnectionGuardStats& c = src.connections;
  w.Gauge("trainyard_grpc_connections_open", "Connections to the client gRPC listener open now (clients, masters).",
          static_cast<double>(c.open));
  w.Family("trainyard_grpc_connections_refused_total", "counter",
           "Connections to the gRPC listener closed as soon as accepted, by reason: total_cap (maxConnections), "
           "peer_cap (maxConnectionsPerPeer), no_descriptor (the process had no file descriptor left).");
  w.Sample("trainyard_grpc_connections_refused_total", "reason=\"total_cap\"", static_cast<double>(c.refused_total_cap));
  w.Sample("trainyard_grpc_connections_refused_total", "reason=\"peer_cap\"", static_cast<double>(c.refused_peer_cap));
  w.Sample("trainyard_grpc_connections_refused_total", "reason=\"no_descriptor\"", static_cast<double>(c.refused_no_fd));
  const ConnectionGuardStats& a = src.agent_connections;
  w.Gauge("trainyard_grpc_agent_connections_open", "Connections to the agent gRPC listener open now.",
          static_cast<double>(a.open));
  w.Family("trainyard_grpc_agent_connections_refused_total", "counter",
           "Connections to the agent gRPC listener closed as soon as accepted, by reason: total_cap "
           "(maxAgentConnections), peer_cap (maxAgentConnectionsPerPeer), no_descriptor.");
  w.Sample("trainyard_grpc_agent_connections_refused_total", "reason=\"total_cap\"", static_cast<double>(a.refused_total_cap));
  w.Sample("trainyard_grpc_agent_connections_refused_total", "reason=\"peer_cap\"", static_cast<double>(a.refused_peer_cap));
  w.Sample("trainyard_grpc_agent_connections_refused_total", "reason=\"no_descriptor\"", static_cast<double>(a.refused_no_fd));
  w.Family("trainyard_grpc_connections_evicted_total", "counter",
           "Connections shut down to make room for a newcomer at a cap: they had made no authenticated call "
           "(a registered node, at the agent listener) within unauthenticatedGraceMs; by listener.");
  w.Sample("trainyard_grpc_connections_evicted_total", "listener=\"clients\"", static_cast<double>(c.evicted_unauthenticated));
  w.Sample("trainyard_grpc_connections_evicted_total", "listener=\"agents\"", static_cast<double>(a.evicted_unauthenticated));
  if (src.limits == nullptr) return;
  w.Family("trainyard_user_rate_limited_total", "counter",
           "Client calls refused RESOURCE_EXHAUSTED for a per-user rate limit (rateLimits.CALL), by call.");
  for (int k = 0; k < UserRateLimiter::kCalls; ++k) {
    auto call = static_cast<UserRateLimiter::Call>(k);
    w.Sample("trainyard_user_rate_limited_total", absl::StrCat("call=\"", UserRateLimiter::KeyName(call), "\""),
             static_cast<double>(src.limits->Refused(call)));
  }
}

void LogStreams(Writer& w, const LogHubStats& l) {
  w.Gauge("trainyard_log_streams_open", "`logs` streams (gRPC and REST) open now.", static_cast<double>(l.followers));
  w.Gauge("trainyard_log_subscriptions", "Log subscriptions the server holds on agents now.",
          static_cast<double>(l.subscriptions));
  w.Family("trainyard_log_streams_refused_total", "counter",
           "`logs` streams refused at their start, by reason: total_cap (maxLogFollowers), user_cap "
           "(logStreams.perUser); and task logs of a stream refused a node's subscription: node_cap "
           "(logStreams.perNode), user_node_cap (logStreams.perUserPerNode).");
  w.Sample("trainyard_log_streams_refused_total", "reason=\"total_cap\"", static_cast<double>(l.refused_total));
  w.Sample("trainyard_log_streams_refused_total", "reason=\"user_cap\"", static_cast<double>(l.refused_user));
  w.Sample("trainyard_log_streams_refused_total", "reason=\"node_cap\"", static_cast<double>(l.refused_node));
  w.Sample("trainyard_log_streams_refused_total", "reason=\"user_node_cap\"",
           static_cast<double>(l.refused_user_node));
  w.Counter("trainyard_log_streams_cut_off_total",
            "`logs` streams cut off because their reader took nothing for logFollowerStallMs.",
            static_cast<double>(l.cut_off));
}

void ExecSessions(Writer& w, const ExecRelayStats& e) {
  w.Gauge("trainyard_exec_sessions_open", "`exec` sessions (commands run in tasks) the server relays now.",
          static_cast<double>(e.open));
  w.Counter("trainyard_exec_sessions_total", "`exec` sessions opened since the server started.",
            static_cast<double>(e.opened));
  w.Counter("trainyard_exec_sessions_refused_total",
            "`exec` sessions refused for the server's limit or the user's.", static_cast<double>(e.refused));
}

// With etcd: the leaders deposed over the cluster's life, by reason (the
// server lists every reason, 0 until one happens: server/depositions.h).
void Depositions(Writer& w, const v1::ClusterStatus& c) {
  if (c.store() != "etcd" || c.depositions().empty()) return;
  w.Family("trainyard_leader_depositions_total", "counter",
           "Leaders deposed over the cluster's life, by reason: fenced (etcd refused a write of the old leader: "
           "a fencing refusal), write_unknown, lease_lost, paused; each counted when the deposed server starts again.");
  for (const v1::LeaderDeposition& d : c.depositions()) {
    w.Sample("trainyard_leader_depositions_total", absl::StrCat("reason=\"", Escape(d.reason()), "\""),
             static_cast<double>(d.count()));
  }
}

}  // namespace

std::string RenderMetrics(const MetricsSources& src) {
  std::string out;
  ViewStore::NodesPtr nodes = src.views->Nodes();
  out.reserve(16384 + nodes->size() * 100);
  Writer w(&out);
  JobsAndTasks(w, *src.views);
  Nodes(w, *src.views, src.now);
  Queues(w, *src.views);
  Users(w, *src.views);
  TaskResources(w, *src.views, src.now);
  Counters(w, *src.views->Stats());
  Masters(w, src.masters, src.now);
  Requests(w, src);
  LogStreams(w, src.logs);
  ExecSessions(w, src.exec);
  if (src.control_plane) Depositions(w, *src.control_plane);
  return out;
}

void AddMetricsRoute(HttpServer& server, RestBackend* backend, const GrpcCounters* grpc,
                     JobMasterMetrics* masters, const UserRateLimiter* limits) {
  server.Handle("GET", "/metrics", "/metrics",
                [&server, backend, grpc, masters, limits](const httplib::Request&, httplib::Response& res, const Principal&) {
                  MetricsSources src;
                  src.views = &backend->Views();
                  src.grpc = grpc;
                  src.masters = masters;
                  src.http_requests = server.RequestCounts();
                  src.now = absl::Now();
                  src.connections = ConnectionGuard::Stats(Door::kClients);
                  src.agent_connections = ConnectionGuard::Stats(Door::kAgents);
                  src.limits = limits;
                  src.http_connections = server.ConnectionStats();
                  src.logs = backend->LogStats();
                  src.exec = backend->ExecStats();
                  src.control_plane = backend->ControlPlane();
                  res.set_content(RenderMetrics(src), kMetricsContentType);
                });
}

}  // namespace trainyard::server::http
