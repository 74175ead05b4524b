// The REST API's node routes: GET /api/v1/nodes (the whole list, or a page
// of it filtered by state, label, GPU model, name and free GPUs),
// /api/v1/nodes/{node}, and /api/v1/node-summary (counts by state, GPUs by
// model, and one compact GPU-use vector over every node for a heat map).
// All read the published views (ViewStore), never the server's lock; a
// page at 10,000 nodes renders only its own nodes (bench/http_bench.cc).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/http/http_server.h"
#include "server/http/shared_answers.h"

namespace trainyard::server::http {

class RestBackend;

// What a paged GET /api/v1/nodes asks for: the filters (all must hold) and
// the page. Parsed from the query by ParseNodeQuery.
struct NodeQuery {
  std::set<v1::NodeState> states;  // empty: any
  // label=KEY (has the label) or label=KEY=VALUE; every one must match.
  std::vector<std::pair<std::string, std::optional<std::string>>> labels;
  std::string model;       // the GPU model, any case ("" = any)
  std::string name;        // a part of the node's name ("" = any)
  int min_free_gpus = 0;   // whole free GPUs at least this many
  int limit = 0;           // nodes per page (kDefaultNodePage when not given)
  std::string after;       // the page starts after this node name ("" = first page)
};

// The page size when a query gives none, and the most a query may ask.
inline constexpr int kDefaultNodePage = 100;
inline constexpr int kMaxNodePage = 500;

// The query of a paged GET /api/v1/nodes: state (comma list: READY, LOST,
// DRAINING, CORDONED, DEGRADED, any case), label (repeatable), model, name,
// min_free_gpus (0..64), limit (1..kMaxNodePage), cursor (a page's
// next_cursor). InvalidArgument naming the parameter for a value it cannot
// take, or for a parameter it does not know.
absl::StatusOr<NodeQuery> ParseNodeQuery(const std::multimap<std::string, std::string>& params);

// The opaque cursor of the page that starts after node `name`, and back.
std::string NodeCursor(const std::string& after);
absl::StatusOr<std::string> NodeCursorAfter(const std::string& cursor);

// Registers GET /api/v1/nodes, /api/v1/nodes/{node} and
// /api/v1/node-summary. The whole list (no query) and the summary are made
// once for every reader through `shared`. REQUIRES: backend outlives server.
void AddNodeRoutes(HttpServer& server, RestBackend* backend, std::shared_ptr<SharedAnswers> shared);

}  // namespace trainyard::server::http
