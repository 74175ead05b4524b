// Serving the embedded dashboard files (see dashboard.h).
#include "server/http/dashboard/dashboard.h"

#include <algorithm>

#include "httplib.h"
#include "server/http/dashboard/overview.h"
#include "server/http/shared_answers.h"

namespace trainyard::server::http {
namespace {

// Every page is one document (index.html) whose script draws the page that
// the URL's fragment names, so the files are few and all of them static.
void ServeAsset(const httplib::Request& req, httplib::Response& res, std::string_view path) {
  const EmbeddedAsset* a = FindAsset(path);
  if (a == nullptr) return SetJsonError(res, 404, "no such dashboard file");
  // Revalidate every time: a few bytes per file against a page that mixes
  // the files of two server versions after an upgrade.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", std::string(a->etag));
  res.set_header("X-Content-Type-Options", "nosniff");
  if (path.ends_with(".html")) {
    // Nothing but this server's own files and API: no inline script, no
    // other origin (the dashboard needs no CDN and gets none).
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'");
    res.set_header("Referrer-Policy", "no-referrer");
  }
  if (req.get_header_value("If-None-Match") == a->etag) {
    res.status = 304;
    return;
  }
  res.set_content(std::string(a->data), ContentTypeOf(path));
}

}  // namespace

const EmbeddedAsset* FindAsset(std::string_view path) {
  std::span<const EmbeddedAsset> all = EmbeddedAssets();
  auto it = std::lower_bound(all.begin(), all.end(), path,
                             [](const EmbeddedAsset& a, std::string_view p) { return a.path < p; });
  return it != all.end() && it->path == path ? &*it : nullptr;
}

std::string ContentTypeOf(std::string_view path) {
  struct Type {
    std::string_view extension;
    std::string_view type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},  {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},    {".svg", "image/svg+xml"},
      {".json", "application/json"},          {".png", "image/png"},
      {".ico", "image/x-icon"},               {".txt", "text/plain; charset=utf-8"},
  };
  for (const Type& t : kTypes) {
    if (path.ends_with(t.extension)) return std::string(t.type);
  }
  return "application/octet-stream";
}

void AddDashboardRoutes(HttpServer& s, RestBackend* b) {
  s.Handle("GET", "/", "/",
           [](const httplib::Request& req, httplib::Response& res, const Principal&) {
             ServeAsset(req, res, "index.html");
           });
  // No "..": a path names an embedded file or nothing, never the disk.
  s.Handle("GET", "/ui/([A-Za-z0-9_./-]+)", "/ui/{file}",
           [](const httplib::Request& req, httplib::Response& res, const Principal&) {
             ServeAsset(req, res, std::string(req.matches[1]));
           });
  // The same for every reader: made at most once a second (shared_answers.h).
  auto shared = std::make_shared<SharedAnswers>(&b->Views());
  s.Handle("GET", "/api/v1/overview", "/api/v1/overview",
           [b, shared](const httplib::Request& req, httplib::Response& res, const Principal&) {
             shared->Serve("/api/v1/overview", req, res, [b] {
               std::optional<v1::ClusterStatus> control_plane = b->ControlPlane();
               return OverviewJson(b->Views(), control_plane ? &*control_plane : nullptr);
             });
           });
}

}  // namespace trainyard::server::http
