// The REST API's accounting routes, `trainyard history` and `trainyard
// usage` over HTTP: GET /api/v1/accounting/jobs (finished jobs, deleted ones
// too, oldest end first, in pages; filters user, queue, name, state, since,
// until) and GET /api/v1/accounting/usage (per user or queue over a period).
// Both read the published AccountBook, never the server's lock.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/service.pb.h"
#include "server/http/http_server.h"

namespace trainyard::server::http {

class RestBackend;

// The query of GET /api/v1/accounting/jobs as a HistoryRequest: user,
// queue, name, state (comma list of finished states, any case), since and
// until (Unix ms), limit (1..5000, default 500), cursor (a page's
// next_cursor). InvalidArgument names a parameter it cannot take.
absl::StatusOr<v1::HistoryRequest> ParseHistoryQuery(const std::multimap<std::string, std::string>& params);
// The query of GET /api/v1/accounting/usage: since, until, by (user or
// queue), user, queue.
absl::StatusOr<v1::UsageRequest> ParseUsageQuery(const std::multimap<std::string, std::string>& params);

// An account as the REST API shows it: states and classes by name, times in
// Unix ms.
nlohmann::json AccountJson(const v1::JobAccount& account);

// Registers both routes. REQUIRES: backend outlives server.
void AddAccountingRoutes(HttpServer& server, RestBackend* backend);

}  // namespace trainyard::server::http
