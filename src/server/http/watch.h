// GET /api/v1/watch: server-sent events that say when a published view
// changed, so the dashboard reads the lists again instead of polling them
// (docs/api.md). An event names a topic (jobs, nodes, queues) and the
// version of its views now; the client then GETs the list. Sent on connect
// and whenever a watched topic's version moves, at most one event per
// topic per coalescing period (a burst of changes is one event), with a
// comment line as keep-alive when nothing else was sent for a while. The
// number of watchers is bounded (HttpOptions::max_watchers; one more is
// answered 503).
#pragma once

#include <string>

#include "absl/time/time.h"
#include "server/http/http_server.h"
#include "server/view_store.h"

namespace trainyard::server::http {

struct WatchOptions {
  absl::Duration coalesce = absl::Milliseconds(500);
  absl::Duration keep_alive = absl::Seconds(15);
};

// The SSE text of one event: "event: TOPIC\ndata: {\"version\": N}\n\n".
std::string WatchEventText(const std::string& topic, int64_t version);

// Registers GET /api/v1/watch?topics=jobs,nodes,queues (default: all).
// REQUIRES: views outlives server.
void AddWatchRoute(HttpServer& server, const ViewStore* views, WatchOptions options = {});

}  // namespace trainyard::server::http
