// The agent's HTTP endpoint: GET /metrics and /healthz (see agent_metrics.h).
// Public, as the server's /metrics is: counts and sizes of this node, no
// task's command, environment or logs (docs/security.md).
#include "agent/agent_metrics.h"
#include "httpd/prometheus_text.h"
#include "httplib.h"

namespace trainyard::agent {

absl::StatusOr<std::unique_ptr<httpd::HttpServer>> ServeAgentMetrics(const std::string& listen,
                                                                     const AgentCore* core) {
  // Scrapes and health checks only: a few threads, no streams.
  absl::StatusOr<std::unique_ptr<httpd::HttpServer>> bound =
      httpd::HttpServer::Bind({.listen = listen, .threads = 2, .max_connections = 32, .max_body_bytes = 64 << 10,
                               .max_log_streams = 0, .max_watchers = 0});
  if (!bound.ok()) return bound.status();
  httpd::HttpServer* server = bound->get();
  server->Handle("GET", "/metrics", "/metrics", [server, core](const httplib::Request&, httplib::Response& res) {
    AgentMetricsInput in = GatherAgentMetrics(*core);
    in.http_requests = server->RequestCounts();
    res.set_content(RenderAgentMetrics(in), httpd::kMetricsContentType);
  });
  server->Handle("GET", "/healthz", "/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  (*bound)->Serve();
  return bound;
}

}  // namespace trainyard::agent
