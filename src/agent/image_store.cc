#include "agent/image_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "api/image_ref.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"

namespace trainyard::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kComponent[] = "images";
constexpr int64_t kMaxJsonBytes = 4 << 20;
constexpr char kManifestType[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kDockerManifestType[] = "application/vnd.docker.distribution.manifest.v2+json";

// "sha256:" and 64 lowercase hex digits: the only digests read as file names.
bool ValidDigest(const std::string& d) {
  if (d.size() != 71 || !absl::StartsWith(d, "sha256:")) return false;
  return std::all_of(d.begin() + 7, d.end(), [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

absl::StatusOr<json> ReadJson(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " cannot be read: ", strerror(errno)));
  std::string text;
  text.resize(kMaxJsonBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<int64_t>(text.size()) > kMaxJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is larger than 4 MiB"));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a JSON object"));
  }
  return j;
}

std::string BlobPath(const std::string& layout, const std::string& digest) {
  return absl::StrCat(layout, "/blobs/sha256/", digest.substr(7));
}

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const json& e : *it) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

std::string DigestDir(const std::string& digest) { return absl::StrCat("sha256-", digest.substr(7)); }

}  // namespace

std::string FindOciRuntime() {
  const char* path = getenv("PATH");
  std::vector<std::string> dirs = absl::StrSplit(path ? path : "", ':', absl::SkipEmpty());
  for (const char* d : {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}) dirs.push_back(d);
  for (const char* name : {"runc", "crun"}) {
    for (const std::string& d : dirs) {
      std::string candidate = absl::StrCat(d, "/", name);
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

absl::StatusOr<PreparedImage> ReadImageLayout(const std::string& layout, const std::string& tag) {
  absl::StatusOr<json> index = ReadJson(layout + "/index.json", "the image layout's index");
  if (!index.ok()) return index.status();
  const json* found = nullptr;
  std::vector<std::string> tags;
  if (auto m = index->find("manifests"); m != index->end() && m->is_array()) {
    for (const json& desc : *m) {
      if (!desc.is_object()) continue;
      auto ann = desc.find("annotations");
      if (ann == desc.end() || !ann->is_object()) continue;
      auto name = ann->find("org.opencontainers.image.ref.name");
      if (name == ann->end() || !name->is_string()) continue;
      tags.push_back(name->get<std::string>());
      if (tags.back() == tag) found = &desc;
    }
  }
  if (found == nullptr) {
    std::string have = tags.empty() ? "it has no tags" : absl::StrCat("its tags: ", absl::StrJoin(tags, ", "));
    return absl::InvalidArgumentError(absl::StrCat("tag '", tag, "' is not in the image layout ", layout, " (", have, ")"));
  }
  std::string type = found->value("mediaType", "");
  std::string digest = found->value("digest", "");
  if (type != kManifestType && type != kDockerManifestType) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tag '", tag, "' of ", layout, " is a ", type.empty() ? "descriptor without a media type" : type,
        ", not an image manifest (for a multi-platform image, copy one platform into the layout)"));
  }
  if (!ValidDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat("tag '", tag, "' of ", layout, " has no sha256 digest"));
  }
  absl::StatusOr<json> manifest = ReadJson(BlobPath(layout, digest), "the image manifest");
  if (!manifest.ok()) return manifest.status();
  std::string config_digest;
  if (auto c = manifest->find("config"); c != manifest->end() && c->is_object()) config_digest = c->value("digest", "");
  if (!ValidDigest(config_digest)) {
    return absl::InvalidArgumentError(absl::StrCat("the manifest ", digest, " of ", layout, " names no sha256 config"));
  }
  absl::StatusOr<json> config = ReadJson(BlobPath(layout, config_digest), "the image config");
  if (!config.ok()) return config.status();
  PreparedImage image;
  image.digest = digest;
  if (auto c = config->find("config"); c != config->end() && c->is_object()) {
    image.entrypoint = Strings(*c, "Entrypoint");
    image.cmd = Strings(*c, "Cmd");
    image.env = Strings(*c, "Env");
    image.working_dir = c->value("WorkingDir", "");
  }
  return image;
}

ImageStore::ImageStore(std::string dir, CommandRunnerPtr runner)
    : dir_(std::move(dir)), runner_(runner ? std::move(runner) : NewSubprocessRunner()) {}

absl::StatusOr<std::string> ImageStore::LayoutOf(const std::string& ref_text, int source, const std::string& path) {
  if (source == static_cast<int>(api::ImageSource::kLayout)) return path;
  // An archive: extracted once per (path, size, mtime) beside the images.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("image archive ", path, " cannot be read: ", strerror(errno)));
  }
  std::string key = absl::StrCat(std::hash<std::string>{}(path), "-", st.st_size, "-", st.st_mtim.tv_sec, ".",
                                 st.st_mtim.tv_nsec);
  std::string out = absl::StrCat(dir_, "/archives/", key);
  std::shared_ptr<absl::Mutex> lock;
  {
    absl::MutexLock l(&mu_);
    std::shared_ptr<absl::Mutex>& slot = archive_locks_[key];
    if (!slot) slot = std::make_shared<absl::Mutex>();
    lock = slot;
  }
  absl::MutexLock l(lock.get());
  std::error_code ec;
  if (fs::exists(out + "/index.json", ec)) return out;
  std::string tmp = absl::StrCat(out, ".part");
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  absl::StatusOr<std::string> ran =
      runner_->Run({"tar", "--extract", "--no-same-owner", "--no-same-permissions", "--file", path, "--directory", tmp});
  if (!ran.ok()) {
    fs::remove_all(tmp, ec);
    return absl::InvalidArgumentError(absl::StrCat("image archive ", path, " of ", ref_text,
                                                   " cannot be extracted: ", ran.status().message()));
  }
  fs::rename(tmp, out, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return out;
}

absl::Status ImageStore::Unpack(const std::string& layout, const std::string& tag, const std::string& digest,
                                const std::string& rootfs) {
  std::string final_dir = fs::path(rootfs).parent_path().string();
  std::string tmp = absl::StrCat(final_dir, ".part");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  absl::Time start = absl::Now();
  absl::StatusOr<std::string> ran =
      runner_->Run({"umoci", "raw", "unpack", "--image", absl::StrCat(layout, ":", tag), tmp + "/rootfs"});
  if (!ran.ok()) {
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat("unpacking ", layout, ":", tag, " (", digest, "): ", ran.status().message()));
  }
  // Tasks of every account read it; none writes it (the root is mounted
  // read-only in their containers).
  chmod((tmp + "/rootfs").c_str(), 0755);
  fs::rename(tmp, final_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  Log(LogLevel::kInfo, kComponent, "unpacked %s:%s (%s) in %s", layout, tag, digest,
      absl::FormatDuration(absl::Now() - start));
  return absl::OkStatus();
}

absl::StatusOr<PreparedImage> ImageStore::Prepare(const std::string& ref_text) {
  absl::StatusOr<api::ImageRef> ref = api::ParseImageRef(ref_text);
  if (!ref.ok()) return ref.status();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  chmod(dir_.c_str(), 0700);
  absl::StatusOr<std::string> layout = LayoutOf(ref_text, static_cast<int>(ref->source), ref->path);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<PreparedImage> image = ReadImageLayout(*layout, ref->tag);
  if (!image.ok()) return absl::Status(image.status().code(), absl::StrCat("image ", ref_text, ": ", image.status().message()));
  image->ref = ref_text;
  image->rootfs = absl::StrCat(dir_, "/", DigestDir(image->digest), "/rootfs");
  std::shared_ptr<absl::Mutex> unpacking;
  {
    absl::MutexLock l(&mu_);
    Entry& e = entries_[image->digest];
    if (!e.unpacking) e.unpacking = std::make_shared<absl::Mutex>();
    unpacking = e.unpacking;
  }
  {
    absl::MutexLock l(unpacking.get());
    if (!fs::is_directory(image->rootfs, ec)) {
      if (absl::Status st = Unpack(*layout, ref->tag, image->digest, image->rootfs); !st.ok()) return st;
    }
  }
  absl::MutexLock l(&mu_);
  CachedImage& c = entries_[image->digest].cached;
  c.digest = image->digest;
  if (std::find(c.refs.begin(), c.refs.end(), ref_text) == c.refs.end() && c.refs.size() < 16) c.refs.push_back(ref_text);
  c.last_used = absl::Now();
  return image;
}

std::vector<CachedImage> ImageStore::List() const {
  std::vector<CachedImage> out;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [digest, e] : entries_) {
      if (!e.cached.digest.empty()) out.push_back(e.cached);
    }
  }
  std::sort(out.begin(), out.end(), [](const CachedImage& a, const CachedImage& b) { return a.last_used > b.last_used; });
  return out;
}

}  // namespace trainyard::agent
