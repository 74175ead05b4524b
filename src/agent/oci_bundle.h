// The OCI runtime bundle of a task that runs in an image (docs/images.md):
// the config.json an OCI runtime (runc, crun) reads. The task shares the
// node's network, PID, IPC and UTS namespaces (its ports, peers' addresses,
// NCCL's shared memory and `trainyard exec` work as for a task without an
// image) and has a mount namespace of its own: the image's root file system
// read-only, a private /tmp, /dev and /dev/shm, the node's /etc/hosts and
// /etc/resolv.conf, its task and checkpoint directories and the role's
// volumes at their paths, and its GPUs' device nodes. It runs as its account
// with no capabilities and no_new_privs, in a cgroup under the runtime's own
// (the attempt's, so the attempt's limits hold it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::agent {

struct BundleMount {
  std::string source;       // on the node
  std::string destination;  // in the container
  bool read_only = false;
  bool operator==(const BundleMount&) const = default;
};

struct BundleSpec {
  std::string rootfs;  // absolute
  std::vector<std::string> args;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string cwd;               // absolute, in the container
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
  std::vector<BundleMount> binds;
  // Relative: the runtime makes it under its own cgroup (the attempt's).
  std::string cgroups_path;
  // Device nodes of the node the task may use (its GPUs); those that do not
  // exist are left out.
  std::vector<std::string> devices;
};

// config.json's text. InvalidArgument when a field is not one the runtime
// takes (a relative path, no args).
absl::StatusOr<std::string> BundleConfigJson(const BundleSpec& spec);

// The pid of the first process of container `id`, from the state the
// runtime keeps under `state_root` (runc's ID/state.json, crun's ID/status),
// checked against the process's start time where the runtime records it
// (a pid reused since is not the container's). An error when there is no
// state or the process is gone.
absl::StatusOr<int> ContainerInitPid(const std::string& state_root, const std::string& id,
                                     const std::string& proc_root = "/proc");

// Mounts an overlay of `lower` (read-only) under a layer of its own at
// DIR/rootfs (the layer on a small tmpfs at DIR/layer) and returns
// DIR/rootfs; an error when a path holds ',' ':' or '\\' or a mount fails.
absl::StatusOr<std::string> MountOverlay(const std::string& lower, const std::string& dir);
// Undoes MountOverlay (lazily: a process still in it keeps it until it goes).
void UnmountOverlay(const std::string& dir);

// The device nodes of `gpus` (NVIDIA minor numbers) and the driver's shared
// ones, under `dev` ("/dev").
std::vector<std::string> GpuDeviceNodes(const std::vector<int>& gpus, const std::string& dev = "/dev");

}  // namespace trainyard::agent
