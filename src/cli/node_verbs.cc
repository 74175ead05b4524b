// The node verbs: `nodes` (the list with GPU bitmaps), `status` (the
// server, its store and leadership), and the admin verbs `cordon`,
// `uncordon`, `drain` and `node remove`. Admin verbs: once users
// are authenticated, the server refuses them to anyone but a cluster admin
// (see ClientService).
#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "api/gpu_faults.h"
#include "cli/text.h"
#include "cli/verb_common.h"
#include "core/resources/gpu_set.h"
#include "core/resources/resource.h"

namespace trainyard::cli {
namespace {

std::string NodeStateText(v1::NodeState s) {
  std::string name = v1::NodeState_Name(s);
  return name.rfind("NODE_", 0) == 0 ? name.substr(5) : name;
}

// The node's split GPUs: "3:0.75 (train-worker-0 train-worker-1)", one per
// GPU, so who shares which GPU shows next to the whole-GPU bitmap.
std::string SharesText(const v1::NodeView& n) {
  std::vector<std::string> parts;
  for (const auto& s : n.gpu_shares()) {
    parts.push_back(absl::StrCat(s.gpu(), ":", core::FormatVcores(s.used_milli()), " (",
                                 absl::StrJoin(s.tasks(), " "), ")"));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

// "3 Xid 48, 5 Xid 79": each faulty GPU and its fault's Xid.
std::string FaultsText(const v1::NodeInfo& info) {
  std::vector<std::string> parts;
  for (const auto& f : info.gpu_faults()) {
    if (f.action() != v1::GPU_FAULT_IGNORE) parts.push_back(absl::StrCat(f.gpu(), " Xid ", f.xid()));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

// ■ used, ✗ faulty, ⊘ cordoned, □ free, one per GPU.
std::string NodeGpuBitmap(uint64_t used, uint64_t faulty, uint64_t cordoned, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    out += ((faulty >> i) & 1) ? "✗" : ((cordoned >> i) & 1) ? "⊘" : ((used >> i) & 1) ? "■" : "□";
  }
  return out;
}

// One row of `nodes`. A LOST node's free resources are not known (its agent
// is silent): drawn as ? rather than as a full node.
std::vector<std::string> NodeRow(const v1::NodeView& n) {
  const auto& info = n.info();
  int count = info.topology().gpu_count();
  std::vector<std::string> labels;
  for (const auto& [k, v] : info.labels()) labels.push_back(Printable(k + "=" + v));
  std::sort(labels.begin(), labels.end());
  std::string label_text = labels.empty() ? "-" : absl::StrJoin(labels, ",");
  std::string reason = n.reason().empty() ? "-" : Printable(n.reason());
  std::string model = info.gpu_model().empty() ? "-" : Printable(info.gpu_model());
  if (info.state() == v1::NODE_LOST) {
    std::string unknown;
    for (int i = 0; i < count; ++i) unknown += "?";
    return {info.name(), "LOST", model, count ? unknown : "-", "?", "?", FaultsText(info),
            absl::StrCat("?/", info.capacity().memory_mb(), " MB"),
            absl::StrFormat("?/%.1f", info.capacity().vcores_milli() / 1000.0), "?", "?", label_text,
            n.reason().empty() ? absl::StrCat("no heartbeat since ", TimeText(n.last_heartbeat_unix_ms())) : reason};
  }
  uint64_t all = count >= 64 ? ~0ull : ((1ull << count) - 1);
  uint64_t faulty = all & api::FaultyGpus(info);
  uint64_t cordoned = all & n.cordoned_gpus();
  // Out of service is not "used" (a task on a GPU cordoned under it runs on).
  uint64_t used = all & ~n.free_gpu_mask() & ~faulty & ~cordoned;
  return {info.name(), NodeStateText(info.state()), model, NodeGpuBitmap(used, faulty, cordoned, count),
          used ? core::GpuSet(used).ToString() : "-", SharesText(n), FaultsText(info),
          absl::StrCat(n.free_memory_mb(), "/", info.capacity().memory_mb(), " MB"),
          absl::StrFormat("%.1f/%.1f", n.free_vcores_milli() / 1000.0, info.capacity().vcores_milli() / 1000.0),
          absl::StrCat(n.ports_in_use()), absl::StrCat(n.tasks_size()), label_text, reason};
}

int Nodes(Common& f) {
  return RunListing("nodes", f, &v1::Trainyard::Stub::ListNodes, v1::ListNodesRequest(),
                    [](const v1::ListNodesResponse& resp) {
                      Table t({"NODE", "STATE", "MODEL", "GPUS (■ used, ✗ faulty, ⊘ cordoned)", "USED", "SHARED", "GPU FAULTS",
                               "MEMORY FREE/ALL",
                               "VCORES FREE/ALL", "PORTS USED", "TASKS", "LABELS", "REASON"});
                      for (const auto& n : resp.nodes()) t.Add(NodeRow(n));
                      return t;
                    });
}

std::string MsText(double ms) {
  if (ms < 0) return "above 10 s";
  return absl::StrFormat("<= %g ms", ms);
}

// The leaders deposed so far, by reason, and the latest one.
void PrintDepositions(const v1::ClusterStatus& st, int64_t now) {
  std::vector<std::string> counts;
  const v1::LeaderDeposition* last = nullptr;
  for (const v1::LeaderDeposition& d : st.depositions()) {
    if (d.count() == 0) continue;
    counts.push_back(absl::StrCat(d.count(), " ", Printable(d.reason())));
    if (last == nullptr || d.last_unix_ms() > last->last_unix_ms()) last = &d;
  }
  if (last == nullptr) {
    std::cout << "Deposed:    none\n";
    return;
  }
  // What etcd holds is shown as text, never as terminal controls.
  std::cout << "Deposed:    " << absl::StrJoin(counts, ", ") << "; the latest " << Printable(last->last_server()) << " "
            << Age(now - last->last_unix_ms()) << " ago (" << Printable(last->reason()) << ": "
            << Printable(last->last_why()) << ")\n";
}

// `trainyard status`: who serves, on which store, since when; the nodes and
// jobs in a line each.
int Status(Common& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::ClusterStatus st;
  auto ctx = Context();
  grpc::Status called = stub->GetClusterStatus(ctx.get(), v1::ClusterStatusRequest(), &st);
  if (!called.ok()) return ReportError("status", address, called);
  if (f.output == "json") {
    std::cout << ToJson(st) << "\n";
    return kExitOk;
  }
  int64_t now = absl::ToUnixMillis(absl::Now());
  std::cout << "Server:     " << st.server_address() << " (leads since " << TimeText(st.leader_since_unix_ms()) << ", "
            << Age(now - st.leader_since_unix_ms()) << ")\n";
  if (st.store() == "etcd") {
    std::cout << "Store:      etcd " << absl::StrJoin(st.etcd_endpoints(), ",") << "\n";
    std::cout << "Leadership: lease " << st.leader_lease_ms() << " ms, fence revision " << st.leader_revision();
    if (st.leader_terms() > 0) {
      std::cout << ", leadership " << st.leader_terms() << " of the cluster (" << st.leader_terms() - 1
                << (st.leader_terms() == 2 ? " failover)" : " failovers)");
    }
    std::cout << "\n";
    std::cout << "Standbys:   " << (st.standbys().empty() ? "none" : absl::StrJoin(st.standbys(), ", ")) << "\n";
    PrintDepositions(st, now);
  } else {
    std::cout << "Store:      " << st.store() << " (the server's data dir; no standby can take over)\n";
  }
  std::cout << "Nodes:      " << st.nodes_ready() << " of " << st.nodes() << " ready\n";
  std::cout << "Jobs:       " << st.jobs_running() << " running, " << st.jobs_queued() << " queued\n";
  std::cout << "Writes:     median " << MsText(st.store_commit_p50_ms()) << ", p99 " << MsText(st.store_commit_p99_ms())
            << " (store transactions since it leads)\n";
  return kExitOk;
}

struct AdminFlags : Common {
  std::string node;
  std::string reason;
  std::vector<int> gpus;  // cordon, uncordon: these GPUs, not the node
};

using AdminRpc = grpc::Status (v1::Trainyard::Stub::*)(grpc::ClientContext*, const v1::NodeAdminRequest&,
                                                       v1::NodeAdminResponse*);

int Administer(const char* verb, AdminRpc rpc, const AdminFlags& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::NodeAdminRequest req;
  req.set_node(f.node);
  req.set_reason(f.reason);
  for (int g : f.gpus) req.add_gpus(g);
  v1::NodeAdminResponse resp;
  auto ctx = Context();
  grpc::Status st = ((*stub).*rpc)(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError(verb, address, st);
  if (f.output == "json") {
    std::cout << ToJson(resp) << "\n";
    return kExitOk;
  }
  if (std::string(verb) == "node remove") {
    std::cout << "node " << f.node << " removed\n";
  } else {
    std::cout << "node " << f.node << ": " << NodeStateText(resp.node().info().state());
    if (std::string(verb) == "drain") std::cout << " (" << Count(resp.evicted(), "task") << " leaving it)";
    if (resp.node().cordoned_gpus() != 0) {
      std::cout << " (GPUs " << core::GpuSet(resp.node().cordoned_gpus()).ToString() << " cordoned)";
    }
    std::cout << "\n";
  }
  return kExitOk;
}

void AddAdmin(CLI::App* parent, const char* name, const char* verb, const char* help, AdminRpc rpc, bool reason,
              int* exit_code) {
  auto* f = new AdminFlags();  // lives as long as the app (verbs are registered once)
  auto* c = parent->add_subcommand(name, help);
  c->add_option("node", f->node, "node name")->required();
  if (reason) c->add_option("--reason", f->reason, "why (shown in trainyard nodes)");
  if (std::string(verb) == "cordon" || std::string(verb) == "uncordon") {
    c->add_option("--gpu", f->gpus, "only these GPUs of the node (e.g. 3 or 3,5): no task is placed on them")
        ->delimiter(',');
  }
  AddCommon(c, f, true);
  c->callback([exit_code, verb, rpc, f] { *exit_code = Administer(verb, rpc, *f); });
}

// `node describe NAME`: one node, and each GPU's use and health.
int DescribeNode(const AdminFlags& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::ListNodesResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->ListNodes(ctx.get(), v1::ListNodesRequest(), &resp);
  if (!st.ok()) return ReportError("node describe", address, st);
  auto it = std::find_if(resp.nodes().begin(), resp.nodes().end(),
                         [&](const v1::NodeView& n) { return n.info().name() == f.node; });
  if (it == resp.nodes().end()) {
    std::cerr << "node describe: node " << Printable(f.node) << " is unknown\n";
    return kExitFailure;
  }
  const v1::NodeView& n = *it;
  if (f.output == "json") {
    std::cout << ToJson(n) << "\n";
    return kExitOk;
  }
  const v1::NodeInfo& info = n.info();
  std::cout << "Node:       " << Printable(info.name()) << "\n"
            << "State:      " << NodeStateText(info.state()) << (n.reason().empty() ? "" : " (" + Printable(n.reason()) + ")")
            << "\n"
            << "Address:    " << Printable(info.address()) << "\n"
            << "Model:      " << (info.gpu_model().empty() ? "-" : Printable(info.gpu_model())) << "\n"
            << "Heartbeat:  " << TimeText(n.last_heartbeat_unix_ms()) << "\n"
            << "Tasks:      " << (n.tasks().empty() ? "-" : absl::StrJoin(n.tasks(), " ")) << "\n";
  int count = info.topology().gpu_count();
  if (count == 0) return kExitOk;
  Table t({"GPU", "STATE", "FAULT"});
  for (int g = 0; g < count && g < 64; ++g) {
    const v1::GpuFault* fault = nullptr;
    for (const auto& x : info.gpu_faults()) {
      if (x.gpu() == g) fault = &x;
    }
    std::string state = "free";
    if (info.state() == v1::NODE_LOST) {
      state = "?";
    } else if ((info.excluded_gpus() >> g) & 1) {
      state = "busy (others' processes)";
    } else if (!((n.free_gpu_mask() >> g) & 1)) {
      state = "in use";
    }
    if ((n.cordoned_gpus() >> g) & 1) state = "cordoned";
    if (fault && fault->action() == v1::GPU_FAULT_EXCLUDE_GPU) state = "faulty: excluded";
    if (fault && fault->action() == v1::GPU_FAULT_DRAIN_NODE) state = "faulty: node drained";
    t.Add({absl::StrCat(g), state,
           fault ? absl::StrCat(Printable(fault->message()), " (", TimeText(fault->time_unix_ms()), ")") : "-"});
  }
  std::cout << "\n";
  std::cout << t.Render();
  return kExitOk;
}

}  // namespace

void RegisterNodeVerbs(CLI::App& app, int* exit_code) {
  static Common nodes;
  auto* c = app.add_subcommand("nodes", "List nodes with their GPU bitmaps, state and why one takes no tasks");
  AddCommon(c, &nodes, true);
  c->callback([exit_code] { *exit_code = Nodes(nodes); });

  static Common status;
  c = app.add_subcommand("status", "The server that answers: its store, since when it leads, the standbys; nodes and jobs");
  AddCommon(c, &status, true);
  c->callback([exit_code] { *exit_code = Status(status); });

  AddAdmin(&app, "cordon", "cordon", "Admin: no new tasks on a node (its tasks stay)",
           &v1::Trainyard::Stub::CordonNode, true, exit_code);
  AddAdmin(&app, "uncordon", "uncordon",
           "Admin: a cordoned, drained or degraded node takes tasks again",
           &v1::Trainyard::Stub::UncordonNode, false, exit_code);
  AddAdmin(&app, "drain", "drain",
           "Admin: no new tasks on a node, and its tasks are moved elsewhere (not counted as restarts)",
           &v1::Trainyard::Stub::DrainNode, true, exit_code);
  auto* node = app.add_subcommand("node", "Admin: node commands");
  node->require_subcommand(1);
  AddAdmin(node, "remove", "node remove", "Forget a LOST node", &v1::Trainyard::Stub::RemoveNode, false, exit_code);
  static AdminFlags describe;
  auto* d = node->add_subcommand("describe", "One node: its state, tasks, and each GPU's use and health");
  d->add_option("node", describe.node, "node name")->required();
  AddCommon(d, &describe, true);
  d->callback([exit_code] { *exit_code = DescribeNode(describe); });
}

}  // namespace trainyard::cli
