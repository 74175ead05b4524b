// The dashboard's files (web/ in the source tree), compiled into the binary
// by cmake/EmbedFiles.cmake, so a server serves them with nothing on disk.
#pragma once

#include <span>
#include <string_view>

namespace trainyard::server::http {

struct EmbeddedAsset {
  std::string_view path;  // relative to web/, e.g. "index.html", "js/nodes.js"
  std::string_view data;
  std::string_view etag;  // a quoted content hash, as an HTTP ETag
};

// Every embedded file, sorted by path.
std::span<const EmbeddedAsset> EmbeddedAssets();

}  // namespace trainyard::server::http
