#include "api/image_ref.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace trainyard::api {
namespace {

// "" when `path` is absolute, has no "." or ".." part and no NUL; else why.
std::string PathProblem(absl::string_view path) {
  if (path.empty() || path[0] != '/') return "must be an absolute path";
  if (path.size() > 4096) return "is longer than 4096 bytes";
  if (absl::StrContains(path, '\0')) return "holds a NUL";
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == ".." || part == ".") return "must not hold '.' or '..' parts";
  }
  return "";
}

bool TagChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; }

std::string Normalized(absl::string_view path) {
  std::string out;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) absl::StrAppend(&out, "/", part);
  return out.empty() ? "/" : out;
}

}  // namespace

absl::StatusOr<ImageRef> ParseImageRef(absl::string_view text) {
  ImageRef ref;
  absl::string_view rest;
  if (absl::StartsWith(text, "oci:")) {
    ref.source = ImageSource::kLayout;
    rest = text.substr(4);
  } else if (absl::StartsWith(text, "oci-archive:")) {
    ref.source = ImageSource::kArchive;
    rest = text.substr(12);
  } else if (absl::StartsWith(text, "docker://")) {
    absl::string_view reference = text.substr(9);
    size_t at = reference.find('@');
    bool digest_ok = at == absl::string_view::npos ||
                     (reference.find('@', at + 1) == absl::string_view::npos && reference.size() - at - 1 == 71 &&
                      absl::StartsWith(reference.substr(at + 1), "sha256:") &&
                      std::all_of(reference.begin() + at + 8, reference.end(),
                                  [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); }));
    bool plain = digest_ok && !reference.empty() && reference.size() <= 255 && reference[0] != '-' && reference[0] != '/' &&
                 !absl::StrContains(reference, "//") && !absl::StrContains(reference, "..") &&
                 std::all_of(reference.begin(), reference.end(), [](char c) {
                   return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
                          c == ':' || c == '/' || c == '@';
                 });
    if (!plain) {
      return absl::InvalidArgumentError(absl::StrCat("'", text.substr(0, 200),
                                                     "' is not docker://[HOST/]NAME[:TAG|@sha256:HEX] (at most 255 "
                                                     "of A-Z a-z 0-9 . _ - : / @, a digest of 64 hex digits)"));
    }
    ref.source = ImageSource::kRegistry;
    ref.path = std::string(reference);
    return ref;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text.substr(0, 200),
        "' is not oci:PATH[:TAG], oci-archive:PATH[:TAG] or docker://[HOST/]NAME[:TAG] (an image of a registry)"));
  }
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  absl::string_view path = rest;
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    path = rest.substr(0, colon);
    absl::string_view tag = rest.substr(colon + 1);
    if (tag.empty() || tag.size() > 128 || !std::all_of(tag.begin(), tag.end(), TagChar)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tag '", tag.substr(0, 130), "' must be 1 to 128 of A-Z a-z 0-9 . _ -"));
    }
    ref.tag = std::string(tag);
  } else {
    ref.tag = kDefaultImageTag;
  }
  if (std::string why = PathProblem(path); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("path '", path.substr(0, 200), "' ", why));
  }
  ref.path = Normalized(path);
  return ref;
}

std::string RegistryHost(absl::string_view reference) {
  absl::string_view first = reference.substr(0, reference.find('/'));
  if (first.size() == reference.size()) return "docker.io";
  // As Docker reads a reference: a first part with '.', ':' or an upper-
  // case letter, or "localhost", names the registry.
  bool host = absl::StrContains(first, '.') || absl::StrContains(first, ':') || first == "localhost" ||
              std::any_of(first.begin(), first.end(), [](char c) { return absl::ascii_isupper(static_cast<unsigned char>(c)); });
  return host ? absl::AsciiStrToLower(first) : "docker.io";
}

std::string VolumeProblem(const v1::Volume& v) {
  if (std::string why = PathProblem(v.host_path()); !why.empty()) return absl::StrCat("hostPath: ", why);
  if (std::string why = PathProblem(v.path()); !why.empty()) return absl::StrCat("path: ", why);
  std::string path = Normalized(v.path());
  if (path == "/") return "path: / is the container's root";
  for (const char* own : {"/proc", "/sys", "/dev"}) {
    if (path == own || absl::StartsWith(path, absl::StrCat(own, "/"))) {
      return absl::StrCat("path: ", own, " is the container's own");
    }
  }
  return "";
}

}  // namespace trainyard::api
