// The REST API's node routes (see node_routes.h).
#include "server/http/node_routes.h"

#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "server/http/json_views.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

using nlohmann::json;

constexpr v1::NodeState kNodeStates[] = {v1::NODE_READY, v1::NODE_LOST, v1::NODE_DRAINING, v1::NODE_CORDONED,
                                         v1::NODE_DEGRADED};
constexpr char kCursorTag[] = "after:";

absl::Status ParseStates(const std::string& value, std::set<v1::NodeState>* out) {
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    std::string upper = absl::AsciiStrToUpper(part);
    if (absl::StartsWith(upper, "NODE_")) upper = upper.substr(5);
    bool found = false;
    for (v1::NodeState s : kNodeStates) {
      if (upper == NodeStateName(s)) out->insert(s), found = true;
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("state: '", part, "' is not one of READY, LOST, DRAINING, CORDONED, DEGRADED"));
    }
  }
  return absl::OkStatus();
}

// An integer parameter within [lo, hi].
absl::Status ParseInt(const std::string& key, const std::string& value, int lo, int hi, int* out) {
  if (!absl::SimpleAtoi(value, out) || *out < lo || *out > hi) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": '", value, "' is not a whole number in ", lo, "..", hi));
  }
  return absl::OkStatus();
}

absl::Status ParseParam(const std::string& key, const std::string& value, NodeQuery* q) {
  if (key == "state") return ParseStates(value, &q->states);
  if (key == "limit") return ParseInt(key, value, 1, kMaxNodePage, &q->limit);
  if (key == "min_free_gpus") return ParseInt(key, value, 0, 64, &q->min_free_gpus);
  if (key == "model" || key == "name") {
    if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(key, ": must not be empty"));
    (key == "model" ? q->model : q->name) = value;
    return absl::OkStatus();
  }
  if (key == "label") {
    std::pair<std::string, std::string> kv = absl::StrSplit(value, absl::MaxSplits('=', 1));
    if (kv.first.empty()) return absl::InvalidArgumentError("label: give KEY or KEY=VALUE");
    bool has_value = value.find('=') != std::string::npos;
    q->labels.emplace_back(kv.first, has_value ? std::optional<std::string>(kv.second) : std::nullopt);
    return absl::OkStatus();
  }
  if (key == "cursor") {
    absl::StatusOr<std::string> after = NodeCursorAfter(value);
    if (!after.ok()) return after.status();
    q->after = *after;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(key, ": not a parameter of /api/v1/nodes (state, label, model, name, min_free_gpus, limit, cursor)"));
}

bool Matches(const NodeQuery& q, const v1::NodeView& n) {
  const v1::NodeInfo& info = n.info();
  if (!q.states.empty() && !q.states.count(info.state())) return false;
  if (!q.model.empty() && !absl::EqualsIgnoreCase(info.gpu_model(), q.model)) return false;
  if (!q.name.empty() && !absl::StrContains(info.name(), q.name)) return false;
  for (const auto& [key, value] : q.labels) {
    auto it = info.labels().find(key);
    if (it == info.labels().end() || (value && it->second != *value)) return false;
  }
  return q.min_free_gpus == 0 || GpuCountsOf(n).free >= q.min_free_gpus;
}

// Which task holds each GPU of the nodes in `only`, from the live jobs: a
// page looks up its own nodes' holders, not every node's.
GpuHolders HoldersOf(const ViewStore& views, const absl::flat_hash_set<std::string>& only) {
  GpuHolders out;
  if (only.empty()) return out;
  for (const auto& j : views.Jobs(false)) {
    for (const auto& t : j->tasks()) {
      if (t.gpu_mask() != 0 && only.contains(t.node())) AddGpuHolders(t, j->name(), &out);
    }
  }
  return out;
}

json NodeWithHolders(const ViewStore::NodeEntry& n, const GpuHolders& holders) {
  static const NodeGpuHolders kNone;
  auto h = holders.find(n.view->info().name());
  return NodeJson(n.Full(), h == holders.end() ? kNone : h->second);
}

// A page of the nodes matching `q` (views list nodes by name), the count of
// all that match, and the cursor of the next page ("" after the last).
json PageJson(const ViewStore& views, const NodeQuery& q) {
  ViewStore::NodesPtr nodes = views.Nodes();
  const int limit = q.limit > 0 ? q.limit : kDefaultNodePage;
  std::vector<const ViewStore::NodeEntry*> page;
  int64_t total = 0;
  bool more = false;
  for (const ViewStore::NodeEntry& n : *nodes) {
    if (!Matches(q, *n.view)) continue;
    ++total;
    if (!q.after.empty() && n.view->info().name() <= q.after) continue;
    if (static_cast<int>(page.size()) < limit) {
      page.push_back(&n);
    } else {
      more = true;
    }
  }
  absl::flat_hash_set<std::string> names;
  for (const ViewStore::NodeEntry* n : page) names.insert(n->view->info().name());
  GpuHolders holders = HoldersOf(views, names);
  json out = json::array();
  for (const ViewStore::NodeEntry* n : page) out.push_back(NodeWithHolders(*n, holders));
  std::string next = more ? NodeCursor(page.back()->view->info().name()) : "";
  return json{{"nodes", std::move(out)}, {"total", total}, {"next_cursor", next}};
}

// Every node, each with its GPUs' holders.
json AllNodesJson(const ViewStore& views) {
  ViewStore::NodesPtr nodes = views.Nodes();
  GpuHolders holders = GpuHoldersOf(views.Jobs(false));
  json out = json::array();
  for (const ViewStore::NodeEntry& n : *nodes) out.push_back(NodeWithHolders(n, holders));
  return out;
}

void GetNode(RestBackend* b, httplib::Response& res, const std::string& name) {
  const ViewStore& views = b->Views();
  ViewStore::NodesPtr nodes = views.Nodes();
  for (const ViewStore::NodeEntry& n : *nodes) {
    if (n.view->info().name() == name) return SetJson(res, NodeWithHolders(n, HoldersOf(views, {name})));
  }
  SetStatusError(res, absl::NotFoundError(absl::StrCat("node '", name, "' is not known")));
}

// GPUs by use; used and free count shares as fractions (a 0.25 share is
// 0.25 used, the rest of its GPU free).
struct GpuTally {
  int64_t nodes = 0;
  GpuCounts gpus;  // summed in thousandths (GpuCounts::Add)
  void Add(const GpuCounts& c) {
    ++nodes;
    gpus.Add(c);
  }
  json Json() const {
    return {{"total", gpus.total}, {"used", gpus.AllocatedGpus()}, {"free", gpus.FreeGpus()}, {"excluded", gpus.excluded}};
  }
};

// The summary: node counts by state, GPUs overall and by model, and per
// node (by name) its GPU count, GPUs used and excluded, and state.
json SummaryJson(const ViewStore& views) {
  ViewStore::NodesPtr nodes = views.Nodes();
  std::map<std::string, int64_t> states;
  std::map<std::string, GpuTally> models;
  GpuTally all;
  json names = json::array(), gpus = json::array(), used = json::array(), excluded = json::array(),
       node_states = json::array();
  for (const ViewStore::NodeEntry& n : *nodes) {
    const v1::NodeInfo& info = n.view->info();
    GpuCounts c = GpuCountsOf(*n.view);
    std::string state = NodeStateName(info.state());
    ++states[state];
    all.Add(c);
    models[info.gpu_model()].Add(c);
    names.push_back(info.name());
    gpus.push_back(c.total);
    used.push_back(c.AllocatedGpus());
    excluded.push_back(c.excluded);
    node_states.push_back(std::move(state));
  }
  json by_model = json::array();
  for (const auto& [model, t] : models) {
    json m = t.Json();
    m["model"] = model;
    m["nodes"] = t.nodes;
    by_model.push_back(std::move(m));
  }
  return json{{"nodes", static_cast<int64_t>(nodes->size())},
              {"states", states},
              {"gpus", all.Json()},
              {"models", std::move(by_model)},
              {"heat",
               {{"names", std::move(names)},
                {"gpus", std::move(gpus)},
                {"used", std::move(used)},
                {"excluded", std::move(excluded)},
                {"states", std::move(node_states)}}}};
}

void ListNodes(RestBackend* b, SharedAnswers* shared, const httplib::Request& req, httplib::Response& res) {
  const ViewStore& views = b->Views();
  if (req.params.empty()) {  // the whole list, as before paging
    shared->Serve("/api/v1/nodes", req, res, [&views] { return json{{"nodes", AllNodesJson(views)}}; });
    return;
  }
  absl::StatusOr<NodeQuery> q = ParseNodeQuery(req.params);
  if (!q.ok()) return SetStatusError(res, q.status());
  SetJson(res, PageJson(views, *q));
}

}  // namespace

absl::StatusOr<NodeQuery> ParseNodeQuery(const std::multimap<std::string, std::string>& params) {
  NodeQuery q;
  for (const auto& [key, value] : params) {
    if (absl::Status st = ParseParam(key, value, &q); !st.ok()) return st;
  }
  return q;
}

std::string NodeCursor(const std::string& after) { return absl::WebSafeBase64Escape(absl::StrCat(kCursorTag, after)); }

absl::StatusOr<std::string> NodeCursorAfter(const std::string& cursor) {
  std::string text;
  if (!absl::WebSafeBase64Unescape(cursor, &text) || !absl::StartsWith(text, kCursorTag) ||
      text.size() == sizeof(kCursorTag) - 1) {
    return absl::InvalidArgumentError("cursor: not a next_cursor this API gave");
  }
  return text.substr(sizeof(kCursorTag) - 1);
}

void AddNodeRoutes(HttpServer& s, RestBackend* b, std::shared_ptr<SharedAnswers> shared) {
  s.Handle("GET", "/api/v1/nodes", "/api/v1/nodes",
           [b, shared](const httplib::Request& req, httplib::Response& res, const Principal&) {
             ListNodes(b, shared.get(), req, res);
           });
  s.Handle("GET", "/api/v1/nodes/([^/]+)", "/api/v1/nodes/{node}",
           [b](const httplib::Request& req, httplib::Response& res, const Principal&) {
             GetNode(b, res, req.matches[1]);
           });
  s.Handle("GET", "/api/v1/node-summary", "/api/v1/node-summary",
           [b, shared](const httplib::Request& req, httplib::Response& res, const Principal&) {
             if (!req.params.empty()) {
               return SetStatusError(res, absl::InvalidArgumentError(absl::StrCat(
                                              req.params.begin()->first, ": /api/v1/node-summary takes no parameters")));
             }
             const ViewStore& views = b->Views();
             shared->Serve("/api/v1/node-summary", req, res, [&views] { return SummaryJson(views); });
           });
}

}  // namespace trainyard::server::http
