// The REST API's log routes (docs/api.md): one attempt of one task as
// plain text, a byte range of it or followed as it is written, and every
// attempt of every task of a job as one streamed tar.gz. They read through
// the RestBackend's LogReader, the server's log hub: the same streams as
// `trainyard logs`, from the agents that keep the logs.
#pragma once

#include "server/http/http_server.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {

// The most one range answer carries, and what it carries without ?limit.
inline constexpr int64_t kMaxLogRangeBytes = 8 << 20;
inline constexpr int64_t kDefaultLogRangeBytes = 1 << 20;

// Registers GET /api/v1/jobs/{job}/tasks/{task}/logs and
// GET /api/v1/jobs/{job}/logs.tar.gz. REQUIRES: backend outlives server.
void AddLogRoutes(HttpServer& server, RestBackend* backend);

}  // namespace trainyard::server::http
