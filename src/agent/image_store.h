// ImageStore: the OCI images an agent has unpacked for its tasks
// (docs/images.md). A role's `image:` names an OCI image layout on the node
// ("oci:PATH[:TAG]") or a tar of one ("oci-archive:PATH[:TAG]"); the store
// reads the tag's manifest and config, unpacks the image's layers once per
// manifest digest (umoci) into DIR/sha256-HEX/rootfs, and hands every task
// of that image the same root file system, which tasks see read-only
// (oci_bundle.h). An archive is extracted once per (path, size, mtime).
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/gpu_discovery.h"
#include "agent/task.h"

namespace trainyard::agent {

// One image, ready to run.
struct PreparedImage {
  std::string ref;     // as the role gave it
  std::string digest;  // the manifest's, "sha256:HEX"
  std::string rootfs;  // the unpacked root file system (shared)
  // From the image's config: what runs when the role gives no command, and
  // the environment and working directory a task starts with.
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string working_dir;
  // As read and checked against their digests (what is unpacked).
  std::string media_type;
  std::string manifest;
  std::string config_digest;
  std::string config;
  std::vector<std::string> layers;  // digests
};

// An image the store holds, for the agent's report.
struct CachedImage {
  std::string digest;
  std::vector<std::string> refs;  // the references it was prepared for
  absl::Time last_used;
};

class ImageStore {
 public:
  // `dir`: where unpacked images live (created 0700). `runner` runs umoci
  // and tar; nullptr: real processes.
  // An image of a registry ("docker://REF") is pulled with skopeo into a
  // layout of the agent's (DIR/pulled/...), once per reference while the
  // agent runs; from `insecure_registries` (HOST[:PORT]) without TLS checks.
  explicit ImageStore(std::string dir, CommandRunnerPtr runner = nullptr,
                      std::vector<std::string> insecure_registries = {});

  // The image of `ref`, unpacked if it was not. Safe from many threads: two
  // tasks of one image wait for one unpack. InvalidArgument when the
  // reference, its layout, tag, manifest or config is wrong (the task's
  // fault: named, with the reason), as when its layers cannot be unpacked
  // (umoci's error); FailedPrecondition when this node has no umoci, Internal
  // when it cannot write its files (the node's).
  // With `account`, a layout's manifest, config and layers must each be a
  // file the account may read, by its path (no link; CheckReadableBy).
  absl::StatusOr<PreparedImage> Prepare(const std::string& ref, const TaskAccount* account = nullptr);

  // The images unpacked here, newest use first.
  std::vector<CachedImage> List() const;

  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    std::shared_ptr<absl::Mutex> unpacking;  // held while it unpacks
    CachedImage cached;
  };
  absl::StatusOr<std::string> LayoutOf(const std::string& ref_text, int source, const std::string& path);
  // Unpacks `image` (read from `layout`) into image.rootfs, its device
  // nodes, setuid bits and file capabilities taken away.
  absl::Status Unpack(const std::string& layout, const PreparedImage& image);

  absl::StatusOr<std::string> Pull(const std::string& reference);

  const std::string dir_;
  CommandRunnerPtr runner_;
  const std::vector<std::string> insecure_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by digest
  std::map<std::string, std::shared_ptr<absl::Mutex>> archive_locks_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> pulled_ ABSL_GUARDED_BY(mu_);  // references pulled since the agent started
};

// The OCI runtime found on this node: runc, else crun, from PATH and then
// /usr/local/sbin, /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin; "" when
// neither is there.
std::string FindOciRuntime();
// `name`'s path in those directories; "" when it is in none.
std::string FindProgram(const std::string& name);

// The manifest digest and config of `tag` in the OCI image layout at
// `layout`, without unpacking anything (what Prepare reads first): the
// manifest and config read as regular files only (no link followed) and
// checked against their digests, each layer a regular file. InvalidArgument
// naming what is missing or wrong.
absl::StatusOr<PreparedImage> ReadImageLayout(const std::string& layout, const std::string& tag,
                                              const TaskAccount* account = nullptr);

}  // namespace trainyard::agent
