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
  kRegistry,  // "docker://REFERENCE": pulled from a registry the nodes reach
};

struct ImageRef {
  ImageSource source = ImageSource::kLayout;
  std::string path;  // absolute, normalized; a registry's: the reference (HOST/NAME:TAG)
  std::string tag;   // the layout's org.opencontainers.image.ref.name ("" for a registry's)
};

// The registry host of a reference ("docker.io" when its first part names
// none: no '.' or ':' and not "localhost").
std::string RegistryHost(absl::string_view reference);

inline constexpr int kMaxVolumes = 32;
inline constexpr char kDefaultImageTag[] = "latest";

// Parses `text`. The tag follows the last ':' after the path's last '/'
// ("latest" when none). InvalidArgument says what is wrong with it: not
// one of the forms, a relative path, ".." or a NUL, a tag of characters
// other than [A-Za-z0-9._-] (at most 128), a registry reference of other
// characters than [A-Za-z0-9._:/@-] or longer than 255.
absl::StatusOr<ImageRef> ParseImageRef(absl::string_view text);

// "" when `v` can be mounted; else the reason ("hostPath: must be an
// absolute path", "path: /proc is the container's own").
std::string VolumeProblem(const v1::Volume& v);

}  // namespace trainyard::api
