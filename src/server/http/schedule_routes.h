// The REST API's schedules (`trainyard schedule list` / `describe` over
// HTTP): GET /api/v1/schedules and GET /api/v1/schedules/{name}, read from
// the published views. Changes go through the gRPC API (the CLI).
#pragma once

#include "nlohmann/json.hpp"
#include "proto/service.pb.h"
#include "server/http/http_server.h"

namespace trainyard::server::http {

class RestBackend;

// A schedule as the REST API shows it: its record's fields (the spec's
// queue, not the spec), next run, running jobs and runs.
nlohmann::json ScheduleJson(const v1::ScheduleView& view);

// Registers both routes. REQUIRES: backend outlives server.
void AddScheduleRoutes(HttpServer& server, RestBackend* backend);

}  // namespace trainyard::server::http
