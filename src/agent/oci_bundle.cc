#include "agent/oci_bundle.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/process_spawn.h"
#include "nlohmann/json.hpp"

namespace trainyard::agent {
namespace {

using nlohmann::json;

bool Absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

bool RecursiveReadOnlyWorks() {
  static const bool works = [] {
#ifdef SYS_mount_setattr
    // With no such descriptor: EBADF where the call exists, ENOSYS where not.
    return syscall(SYS_mount_setattr, -1, "", 0, nullptr, 0) != 0 && errno != ENOSYS;
#else
    return false;
#endif
  }();
  return works;
}

json Mount(const std::string& dest, const std::string& type, const std::string& source,
           std::vector<std::string> options) {
  return json{{"destination", dest}, {"type", type}, {"source", source}, {"options", std::move(options)}};
}

}  // namespace

absl::StatusOr<std::string> BundleConfigJson(const BundleSpec& s) {
  if (!Absolute(s.rootfs)) return absl::InvalidArgumentError("rootfs: must be an absolute path");
  if (s.args.empty()) return absl::InvalidArgumentError("args: the image gives no entrypoint or cmd and the role no command");
  if (!Absolute(s.cwd)) return absl::InvalidArgumentError(absl::StrCat("workingDir: '", s.cwd, "' must be an absolute path"));
  // rro (read-only below too: a volume's own mounts) needs mount_setattr,
  // Linux 5.12; before, ro.
  const std::string read_only = RecursiveReadOnlyWorks() ? "rro" : "ro";
  json mounts = json::array({
      Mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
      Mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      Mount("/dev/pts", "devpts", "devpts", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}),
      Mount("/dev/shm", "bind", "/dev/shm", {"rbind", "nosuid", "nodev", "noexec"}),
      Mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
      Mount("/sys", "bind", "/sys", {"rbind", read_only, "nosuid", "noexec", "nodev"}),
      Mount("/tmp", "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=1777"}),
  });
  for (const char* f : {"/etc/hosts", "/etc/resolv.conf"}) {
    struct stat st;
    if (stat(f, &st) == 0 && S_ISREG(st.st_mode)) mounts.push_back(Mount(f, "bind", f, {"rbind", "ro", "nosuid", "nodev"}));
  }
  for (const BundleMount& b : s.binds) {
    if (!Absolute(b.source) || !Absolute(b.destination)) {
      return absl::InvalidArgumentError(absl::StrCat("volume ", b.source, " -> ", b.destination, ": paths must be absolute"));
    }
    // rro: read-only below too (the mounts under a volume).
    mounts.push_back(Mount(b.destination, "bind", b.source,
                           {"rbind", b.read_only ? read_only : "rw", "nosuid", "nodev"}));
  }
  json devices = json::array();
  json allowed = json::array({json{{"allow", false}, {"access", "rwm"}}});
  // What every container has (runc and crun make these nodes themselves).
  for (auto [major, minor] : {std::pair{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 2}, {136, -1}}) {
    allowed.push_back(json{{"allow", true}, {"type", "c"}, {"major", major}, {"access", "rwm"}});
    if (minor >= 0) allowed.back()["minor"] = minor;
  }
  for (const std::string& d : s.devices) {
    struct stat st;
    if (stat(d.c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) continue;
    std::string type = S_ISCHR(st.st_mode) ? "c" : "b";
    devices.push_back(json{{"path", d}, {"type", type}, {"major", major(st.st_rdev)}, {"minor", minor(st.st_rdev)},
                           {"fileMode", st.st_mode & 0777}, {"uid", 0}, {"gid", 0}});
    allowed.push_back(json{{"allow", true}, {"type", type}, {"major", major(st.st_rdev)},
                           {"minor", minor(st.st_rdev)}, {"access", "rwm"}});
  }
  json none = json::array();
  json config = {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        // The agent's umask, as for a task without an image.
        {"user", {{"uid", s.uid}, {"gid", s.gid}, {"additionalGids", s.groups}, {"umask", 077}}},
        {"args", s.args},
        {"env", s.env},
        {"cwd", s.cwd},
        {"noNewPrivileges", true},
        {"capabilities", {{"bounding", none}, {"effective", none}, {"permitted", none}, {"inheritable", none},
                          {"ambient", none}}}}},
      {"root", {{"path", s.rootfs}, {"readonly", true}}},
      {"mounts", mounts},
      {"linux",
       {{"namespaces", json::array({json{{"type", "mount"}}})},
        {"cgroupsPath", s.cgroups_path},
        {"devices", devices},
        {"resources", {{"devices", allowed}}},
        {"maskedPaths", {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
                         "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}},
        {"readonlyPaths", {"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}},
  };
  try {
    return config.dump(2);
  } catch (const json::exception& e) {  // a string that is not UTF-8
    return absl::InvalidArgumentError(absl::StrCat("the container's config cannot be written: ", e.what()));
  }
}

absl::StatusOr<int> ContainerInitPid(const std::string& state_root, const std::string& id,
                                     const std::string& proc_root) {
  json state;
  for (const char* file : {"state.json", "status"}) {
    std::ifstream in(absl::StrCat(state_root, "/", id, "/", file));
    if (!in) continue;
    state = json::parse(in, nullptr, /*allow_exceptions=*/false);
    break;
  }
  if (!state.is_object()) return absl::NotFoundError(absl::StrCat("no state of container ", id));
  int pid = 0;
  for (const char* key : {"init_process_pid", "pid"}) {
    if (state.contains(key) && state[key].is_number_integer()) pid = state[key].get<int>();
  }
  if (pid <= 0) return absl::NotFoundError(absl::StrCat("container ", id, " has no process"));
  absl::StatusOr<uint64_t> start = ProcessStartTime(pid, proc_root);
  if (!start.ok()) return absl::NotFoundError(absl::StrCat("the process of container ", id, " has ended"));
  // Without its start time the pid may be another process's by now.
  uint64_t recorded = 0;
  for (const char* key : {"init_process_start", "process-start-time"}) {
    if (state.contains(key) && state[key].is_number_unsigned()) recorded = state[key].get<uint64_t>();
  }
  if (recorded != *start) return absl::NotFoundError(absl::StrCat("the process of container ", id, " has ended"));
  return pid;
}

absl::StatusOr<std::string> MountOverlay(const std::string& lower, const std::string& dir) {
  for (const std::string* p : {&lower, &dir}) {
    if (p->find_first_of(",:\\") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(*p, " holds ',' ':' or '\\'"));
    }
  }
  // The layer on a tmpfs of its own: an overlay's upper layer works on it
  // whatever the data dir is on (an overlay itself, in a container), and
  // it holds only the runtime's mount points.
  std::string layer = dir + "/layer", merged = dir + "/rootfs";
  for (const std::string& d : {layer, merged}) {
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create ", d, ": ", strerror(errno)));
    }
  }
  if (mount("tmpfs", layer.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=16m") != 0) {
    return absl::InternalError(absl::StrCat("tmpfs on ", layer, ": ", strerror(errno)));
  }
  // The root of the overlay is its upper dir's: the mode of the image's
  // root (whatever the umask), so the task's account passes through it.
  struct stat root;
  bool made = stat(lower.c_str(), &root) == 0 && mkdir((layer + "/upper").c_str(), 0700) == 0 &&
              chmod((layer + "/upper").c_str(), root.st_mode & 07777) == 0 && mkdir((layer + "/work").c_str(), 0700) == 0;
  std::string options = absl::StrCat("lowerdir=", lower, ",upperdir=", layer, "/upper,workdir=", layer, "/work");
  if (!made || mount("overlay", merged.c_str(), "overlay", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    std::string why = strerror(errno);
    umount2(layer.c_str(), MNT_DETACH);
    return absl::InternalError(absl::StrCat("overlay on ", merged, ": ", why));
  }
  return merged;
}

void UnmountOverlay(const std::string& dir) {
  umount2((dir + "/rootfs").c_str(), MNT_DETACH);
  umount2((dir + "/layer").c_str(), MNT_DETACH);
}

std::vector<std::string> GpuDeviceNodes(const std::vector<int>& gpus, const std::string& dev) {
  std::vector<std::string> out;
  for (int g : gpus) out.push_back(absl::StrCat(dev, "/nvidia", g));
  for (const char* shared : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    out.push_back(absl::StrCat(dev, "/", shared));
  }
  return out;
}

}  // namespace trainyard::agent
