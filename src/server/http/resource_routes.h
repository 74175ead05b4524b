// The REST API's task resources, `trainyard top` over HTTP:
// GET /api/v1/jobs/{job}/resources[?since=UNIX_MS] — each task of the job
// with its samples of the last 15 minutes (or since `since`) and whether it
// is near its memory limit, and the job's sums per sample interval; what
// the job page charts. Samples are arrays in the order `sample_fields`
// names, so a large job's answer stays small.
#pragma once

#include <string>

#include "proto/service.pb.h"
#include "server/http/http_server.h"

namespace trainyard::server::http {

class RestBackend;

// The answer as the REST API shows it, JSON text.
std::string JobResourcesJson(const v1::JobResourcesResponse& resources);

// Registers the route. REQUIRES: backend outlives server.
void AddResourceRoutes(HttpServer& server, RestBackend* backend);

}  // namespace trainyard::server::http
