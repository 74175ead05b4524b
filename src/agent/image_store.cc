#include "agent/image_store.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/task_user.h"
#include "api/image_ref.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"

namespace trainyard::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kImagesLog[] = "images";
constexpr int64_t kMaxJsonBytes = 4 << 20;
constexpr char kManifestType[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kDockerManifestType[] = "application/vnd.docker.distribution.manifest.v2+json";

// "sha256:" and 64 lowercase hex digits: the only digests read as file names.
bool ValidDigest(const std::string& d) {
  if (d.size() != 71 || !absl::StartsWith(d, "sha256:")) return false;
  return std::all_of(d.begin() + 7, d.end(), [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

// A small file of a layout, read as root: no link followed and only a
// regular file (a FIFO would block the launch), at most 4 MiB.
absl::StatusOr<std::string> ReadLayoutFile(const std::string& path, const std::string& what) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " cannot be read: ", strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a regular file"));
  }
  if (st.st_size > kMaxJsonBytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is larger than 4 MiB"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  return text;
}

absl::StatusOr<json> ParseObject(const std::string& text, const std::string& path, const std::string& what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a JSON object"));
  }
  return j;
}

std::string Sha256Digest(const std::string& bytes) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), md);
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), sizeof(md))));
}

// `key` of `j` as a string; "" when absent or of another type.
std::string StringAt(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
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

bool WriteWhole(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out.flush());
}

// What a layer may bring that no task may use: device nodes (the node's
// disks, reachable through /proc/PID/root of a container) are removed, and
// setuid and setgid bits and file capabilities are taken off.
absl::Status Sanitize(const std::string& rootfs) {
  std::error_code ec;
  int removed = 0;
  for (auto it = fs::recursive_directory_iterator(rootfs, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string path = it->path().string();
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode)) {
      if (unlink(path.c_str()) != 0) return absl::InternalError(absl::StrCat("cannot remove device ", path));
      ++removed;
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    if ((st.st_mode & (S_ISUID | S_ISGID)) != 0 && chmod(path.c_str(), st.st_mode & 0777) != 0) {
      return absl::InternalError(absl::StrCat("cannot take the setuid bit off ", path));
    }
    lremovexattr(path.c_str(), "security.capability");
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot walk ", rootfs, ": ", ec.message()));
  if (removed > 0) Log(LogLevel::kInfo, kImagesLog, "removed %d device nodes from %s", removed, rootfs);
  return absl::OkStatus();
}

}  // namespace

std::string FindProgram(const std::string& name) {
  const char* path = getenv("PATH");
  std::vector<std::string> dirs = absl::StrSplit(path ? path : "", ':', absl::SkipEmpty());
  for (const char* d : {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}) dirs.push_back(d);
  for (const std::string& d : dirs) {
    std::string candidate = absl::StrCat(d, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string FindOciRuntime() {
  std::string runc = FindProgram("runc");
  return runc.empty() ? FindProgram("crun") : runc;
}

absl::StatusOr<PreparedImage> ReadImageLayout(const std::string& layout, const std::string& tag,
                                              const TaskAccount* account) {
  // A blob read (or unpacked) as root for `account`: one it could read, at
  // its own path.
  auto readable = [&](const std::string& path) -> absl::Status {
    if (account == nullptr) return absl::OkStatus();
    absl::StatusOr<std::string> real = CheckReadableBy(path, *account);
    if (!real.ok()) return absl::InvalidArgumentError(real.status().message());
    if (*real != path) return absl::InvalidArgumentError(absl::StrCat(path, " is reached through a link"));
    return absl::OkStatus();
  };
  const std::string index_path = layout + "/index.json";
  absl::StatusOr<std::string> index_text = ReadLayoutFile(index_path, "the image layout's index");
  if (!index_text.ok()) return index_text.status();
  absl::StatusOr<json> index = ParseObject(*index_text, index_path, "the image layout's index");
  if (!index.ok()) return index.status();
  const json* found = nullptr;
  std::vector<std::string> tags;
  if (auto m = index->find("manifests"); m != index->end() && m->is_array()) {
    for (const json& desc : *m) {
      if (!desc.is_object()) continue;
      auto ann = desc.find("annotations");
      if (ann == desc.end() || !ann->is_object()) continue;
      std::string name = StringAt(*ann, "org.opencontainers.image.ref.name");
      if (name.empty()) continue;
      tags.push_back(name);
      if (name == tag) found = &desc;
    }
  }
  if (found == nullptr) {
    std::string have = tags.empty() ? "it has no tags" : absl::StrCat("its tags: ", absl::StrJoin(tags, ", "));
    return absl::InvalidArgumentError(absl::StrCat("tag '", tag, "' is not in the image layout ", layout, " (", have, ")"));
  }
  PreparedImage image;
  image.media_type = StringAt(*found, "mediaType");
  std::string digest = StringAt(*found, "digest");
  if (image.media_type != kManifestType && image.media_type != kDockerManifestType) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tag '", tag, "' of ", layout, " is a ",
        image.media_type.empty() ? "descriptor without a media type" : image.media_type,
        ", not an image manifest (for a multi-platform image, copy one platform into the layout)"));
  }
  if (!ValidDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat("tag '", tag, "' of ", layout, " has no sha256 digest"));
  }
  // What is read is what the digests say: the manifest names the config and
  // the layers by theirs, so the digest stands for the whole image.
  // The blob of `d` as `what`: one `account` may read, its bytes its digest,
  // a JSON object.
  auto read_blob = [&](const std::string& d, const std::string& what, std::string* text) -> absl::StatusOr<json> {
    const std::string path = BlobPath(layout, d);
    if (absl::Status st = readable(path); !st.ok()) return st;
    absl::StatusOr<std::string> bytes = ReadLayoutFile(path, what);
    if (!bytes.ok()) return bytes.status();
    if (Sha256Digest(*bytes) != d) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not ", d));
    *text = *std::move(bytes);
    return ParseObject(*text, path, what);
  };
  absl::StatusOr<json> manifest = read_blob(digest, "the image manifest", &image.manifest);
  if (!manifest.ok()) return manifest.status();
  std::string config_digest;
  if (auto c = manifest->find("config"); c != manifest->end() && c->is_object()) config_digest = StringAt(*c, "digest");
  if (!ValidDigest(config_digest)) {
    return absl::InvalidArgumentError(absl::StrCat("the manifest ", digest, " of ", layout, " names no sha256 config"));
  }
  if (auto layers = manifest->find("layers"); layers != manifest->end() && layers->is_array()) {
    for (const json& layer : *layers) {
      std::string d = layer.is_object() ? StringAt(layer, "digest") : "";
      if (!ValidDigest(d)) {
        return absl::InvalidArgumentError(absl::StrCat("the manifest ", digest, " of ", layout, " names a layer without a sha256 digest"));
      }
      struct stat st;
      std::string path = BlobPath(layout, d);
      if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat("layer ", path, " of ", layout, " is missing or not a regular file"));
      }
      if (absl::Status st = readable(path); !st.ok()) return st;
      image.layers.push_back(d);
    }
  }
  absl::StatusOr<json> config = read_blob(config_digest, "the image config", &image.config);
  if (!config.ok()) return config.status();
  image.digest = digest;
  image.config_digest = config_digest;
  if (auto c = config->find("config"); c != config->end() && c->is_object()) {
    image.entrypoint = Strings(*c, "Entrypoint");
    image.cmd = Strings(*c, "Cmd");
    image.env = Strings(*c, "Env");
    image.working_dir = StringAt(*c, "WorkingDir");
  }
  return image;
}

ImageStore::ImageStore(std::string dir, CommandRunnerPtr runner, std::vector<std::string> insecure_registries)
    : dir_(std::move(dir)),
      runner_(runner ? std::move(runner) : NewSubprocessRunner()),
      insecure_(std::move(insecure_registries)) {}

absl::StatusOr<std::string> ImageStore::Pull(const std::string& reference) {
  const std::string skopeo = FindProgram("skopeo");
  if (skopeo.empty()) return absl::FailedPreconditionError("this node has no skopeo to pull images with");
  // Named by the reference's SHA-256: no other reference can find (and
  // write over) this one's layout.
  std::string out = absl::StrCat(dir_, "/pulled/", Sha256Digest(reference).substr(7));
  std::shared_ptr<absl::Mutex> lock;
  {
    absl::MutexLock l(&mu_);
    std::shared_ptr<absl::Mutex>& slot = archive_locks_[out];
    if (!slot) slot = std::make_shared<absl::Mutex>();
    lock = slot;
    if (pulled_.count(reference) > 0) return out;
  }
  absl::MutexLock l(lock.get());
  {
    absl::MutexLock m(&mu_);
    if (pulled_.count(reference) > 0) return out;
  }
  std::error_code ec;
  fs::create_directories(dir_ + "/pulled", ec);
  std::string host = api::RegistryHost(reference);
  bool insecure = std::any_of(insecure_.begin(), insecure_.end(),
                              [&](const std::string& h) { return absl::EqualsIgnoreCase(h, host); });
  // Into the agent's layout for this reference (the blobs it has already
  // stay); bounded (5 minutes), as a launch worker waits on it.
  std::vector<std::string> argv = {"timeout", "-s", "KILL", "300", skopeo, "copy", "--quiet"};
  if (insecure) argv.push_back("--src-tls-verify=false");
  argv.push_back(absl::StrCat("docker://", reference));
  argv.push_back(absl::StrCat("oci:", out, ":image"));
  absl::Time start = absl::Now();
  absl::StatusOr<std::string> ran = runner_->Run(argv);
  if (!ran.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("image docker://", reference, " cannot be pulled from ", host, ": ",
                                                   ran.status().message()));
  }
  Log(LogLevel::kInfo, kImagesLog, "pulled docker://%s in %s", reference, absl::FormatDuration(absl::Now() - start));
  absl::MutexLock m(&mu_);
  pulled_.insert(reference);
  archive_locks_.erase(out);  // pulled: later launches return at the first look
  return out;
}

absl::StatusOr<std::string> ImageStore::LayoutOf(const std::string& ref_text, int source, const std::string& path) {
  if (source == static_cast<int>(api::ImageSource::kLayout)) return path;
  if (source == static_cast<int>(api::ImageSource::kRegistry)) return Pull(path);
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
  struct stat index;
  if (lstat((tmp + "/index.json").c_str(), &index) != 0 || !S_ISREG(index.st_mode)) {
    fs::remove_all(tmp, ec);
    return absl::InvalidArgumentError(absl::StrCat("image archive ", path, " of ", ref_text,
                                                   " has no index.json at its top (make it with tar -C LAYOUT .)"));
  }
  fs::remove_all(out, ec);
  fs::rename(tmp, out, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  }
  return out;
}

absl::Status ImageStore::Unpack(const std::string& layout, const PreparedImage& image) {
  const std::string umoci = FindProgram("umoci");
  if (umoci.empty()) return absl::FailedPreconditionError("this node has no umoci to unpack images with");
  std::string final_dir = fs::path(image.rootfs).parent_path().string();
  std::string tmp = absl::StrCat(final_dir, ".part");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // umoci reads a layout of the agent's own that names only the digest
  // read: the manifest and config as verified, the layers from the role's
  // layout (umoci checks each layer's digest as it reads it).
  std::string stage = tmp + "/layout";
  fs::create_directories(stage + "/blobs/sha256", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", stage, ": ", ec.message()));
  json index = {{"schemaVersion", 2},
                {"manifests", json::array({json{{"mediaType", image.media_type},
                                                 {"digest", image.digest},
                                                 {"size", image.manifest.size()},
                                                 {"annotations", {{"org.opencontainers.image.ref.name", "image"}}}}})}};
  bool written = WriteWhole(stage + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})") &&
                 WriteWhole(stage + "/index.json", index.dump()) &&
                 WriteWhole(BlobPath(stage, image.digest), image.manifest) &&
                 WriteWhole(BlobPath(stage, image.config_digest), image.config);
  for (const std::string& layer : image.layers) {
    if (!written) break;
    fs::create_symlink(BlobPath(layout, layer), BlobPath(stage, layer), ec);
    written = !ec || ec == std::errc::file_exists;
  }
  if (!written) {
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot write the layout to unpack ", image.digest, " in ", stage));
  }
  absl::Time start = absl::Now();
  // Directories a layer leaves out are made 0755, not the agent's 0700.
  absl::StatusOr<std::string> ran = runner_->Run({"/bin/sh", "-c", "umask 022 && exec \"$0\" \"$@\"", umoci, "raw",
                                                   "unpack", "--image", stage + ":image", tmp + "/rootfs"});
  if (!ran.ok()) {
    fs::remove_all(tmp, ec);
    // With the manifest and config verified, what fails is the layers'.
    return absl::InvalidArgumentError(
        absl::StrCat("image ", image.ref, " (", image.digest, ") cannot be unpacked: ", ran.status().message()));
  }
  fs::remove_all(stage, ec);
  if (absl::Status st = Sanitize(tmp + "/rootfs"); !st.ok()) {
    fs::remove_all(tmp, ec);
    return st;
  }
  // Tasks of every account read it; none writes it (the root is mounted
  // read-only in their containers).
  chmod((tmp + "/rootfs").c_str(), 0755);
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  }
  Log(LogLevel::kInfo, kImagesLog, "unpacked %s (%s) in %s", image.ref, image.digest,
      absl::FormatDuration(absl::Now() - start));
  return absl::OkStatus();
}

absl::StatusOr<PreparedImage> ImageStore::Prepare(const std::string& ref_text, const TaskAccount* account) {
  absl::StatusOr<api::ImageRef> ref = api::ParseImageRef(ref_text);
  if (!ref.ok()) return ref.status();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  chmod(dir_.c_str(), 0700);
  absl::StatusOr<std::string> layout = LayoutOf(ref_text, static_cast<int>(ref->source), ref->path);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<PreparedImage> image = absl::InternalError("not read");
  try {
    // An archive's extraction is the agent's own; a layout is the user's.
    image = ReadImageLayout(*layout, ref->source == api::ImageSource::kRegistry ? "image" : ref->tag,
                            ref->source == api::ImageSource::kLayout ? account : nullptr);
  } catch (const std::exception& e) {  // a JSON value of a type not looked for: the image's
    image = absl::InvalidArgumentError(absl::StrCat("the layout ", *layout, " cannot be read: ", e.what()));
  }
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
      if (absl::Status st = Unpack(*layout, *image); !st.ok()) return st;
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
