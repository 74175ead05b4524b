// A role's `image:` and `volumes:` (docs/images.md): what the server checks
// at submission and the agent reads again before it runs the task.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// Where an image comes from.
enum class ImageSource {
  kLayout,   // "oci:PATH[:TAG]": an OCI image layout directory on the node
  kArchive,  // "oci-archive:PATH[:TAG]": a tar of an OCI image layout
};

struct ImageRef {
  ImageSource source = ImageSource::kLayout;
  std::string path;  // absolute, normalized
  std::string tag;   // the layout's org.opencontainers.image.ref.name
};

inline constexpr int kMaxVolumes = 32;
inline constexpr char kDefaultImageTag[] = "latest";

// Parses `text`. The tag follows the last ':' after the path's last '/'
// ("latest" when none). InvalidArgument says what is wrong with it: not
// one of the forms, a relative path, ".." or a NUL, a tag of characters
// other than [A-Za-z0-9._-] (at most 128), or a registry name (registry
// pulls are not done by the agent: pull onto the node and give its path).
absl::StatusOr<ImageRef> ParseImageRef(absl::string_view text);

// "" when `v` can be mounted; else the reason ("hostPath: must be an
// absolute path", "path: /proc is the container's own").
std::string VolumeProblem(const v1::Volume& v);

}  // namespace trainyard::api
