// The web dashboard: the files under web/ (embedded at build time, see
// assets.h) served at / and /ui/..., each with its content type and a
// revalidating cache (an ETag; a browser asks again and gets 304 while the
// file is unchanged, so a new server's files are never shadowed by old
// ones). The pages read the REST API (/api/v1) from the browser; this side
// serves the files and one figure of the API, /api/v1/overview
// (overview.h).
#pragma once

#include <string>
#include <string_view>

#include "server/http/dashboard/assets.h"
#include "server/http/http_server.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {

// The embedded file at `path` (relative to web/), nullptr when none.
const EmbeddedAsset* FindAsset(std::string_view path);

// The Content-Type for a file named `path` (by its extension;
// application/octet-stream when unknown).
std::string ContentTypeOf(std::string_view path);

// Registers GET / (web/index.html), GET /ui/PATH (web/PATH) and GET
// /api/v1/overview (from backend's views). REQUIRES: before server.Serve();
// backend outlives server.
void AddDashboardRoutes(HttpServer& server, RestBackend* backend);

}  // namespace trainyard::server::http
