// GPU health on one node: the NVIDIA driver's Xid events, read as it logs
// them ("NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the
// bus") from the kernel's log (/dev/kmsg) or from a file of such lines (the
// simulated GPUs' event file, a recorded stream); what each Xid asks of the
// scheduler (the table in gpu_health.cc, after NVIDIA's Xid catalog); and
// the faults the agent reports, the latest per GPU (docs/gpu-health.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/gpu_discovery.h"
#include "common/clock.h"
#include "proto/trainyard.pb.h"

namespace trainyard::agent {

// What the table says of one Xid: the action and a short description.
struct XidRule {
  int xid = 0;
  v1::GpuFaultAction action = v1::GPU_FAULT_IGNORE;
  const char* what = "";
};

// The rule of `xid`; an Xid not in the table is IGNORE ("not in the table").
XidRule RuleOfXid(int xid);

// One Xid line of the driver.
struct XidEvent {
  std::string pci;   // PciKey of its GPU's address
  int xid = 0;
  std::string text;  // the line from "Xid", at most 512 bytes
};

// Reads an Xid event out of one line of the kernel log (with or without
// /dev/kmsg's "PRI,SEQ,TIME,FLAGS;" prefix or a syslog time stamp);
// nullopt for any other line.
std::optional<XidEvent> ParseXidLine(absl::string_view line);

// A PCI address in one form, "dddd:bb:dd" in lower case, from the kernel's
// "0000:3b:00" and NVML's and nvidia-smi's "00000000:3B:00.0"; "" when the
// text is not one.
std::string PciKey(absl::string_view address);

// Follows an Xid source and keeps each GPU's latest fault that excludes the
// GPU or drains the node. Thread-safe.
class GpuHealth {
 public:
  // Opens `path` (a character device is read as /dev/kmsg, record by record;
  // anything else as a file of lines that grows) at its end: what was
  // logged before the agent started is not read again. `gpus` gives each
  // GPU's PCI address (GpuInfo::pci_bus_id). An error names the path.
  static absl::StatusOr<std::unique_ptr<GpuHealth>> Open(const std::string& path, const std::vector<GpuInfo>& gpus);
  ~GpuHealth();

  // Reads what the source gained since the last call (never blocks) and
  // returns whether the faults changed. Lines of GPUs not on this node and
  // IGNORE Xids are logged and left.
  bool Poll(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // The faults now, by GPU index.
  std::vector<v1::GpuFault> Faults() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the source may have gained something (the kernel's log is
  // readable; the file was written, told by inotify), `stop_fd` is
  // readable, or `timeout` passed. A file replaced at the path (rotated) is
  // noticed by Poll, which watches the new one; the timeout bounds the wait
  // until then.
  void WaitForMore(int stop_fd, absl::Duration timeout);
  const std::string& path() const { return path_; }

 private:
  GpuHealth() = default;
  // Reads what the source gained (at most 1 MiB of a file, 4096 kernel
  // records) into `events`.
  void ReadSource(std::vector<XidEvent>* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Apply(const XidEvent& event, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string path_;
  int fd_ = -1;
  bool kmsg_ = false;
  int inotify_fd_ = -1;  // file mode: IN_MODIFY of the file opened; -1 when inotify failed
  int watch_ ABSL_GUARDED_BY(mu_) = -1;  // inotify's watch of the file now open
  std::vector<std::pair<std::string, int>> gpu_of_pci_;  // (PciKey, index)
  mutable absl::Mutex mu_;
  int64_t offset_ ABSL_GUARDED_BY(mu_) = 0;  // file mode: bytes read
  std::string partial_ ABSL_GUARDED_BY(mu_);  // file mode: a line not yet ended
  std::vector<v1::GpuFault> faults_ ABSL_GUARDED_BY(mu_);
};

// A thread that reads the Xid source as soon as it gains something, rather
// than at the next heartbeat's look, and calls `on_change` when a GPU gained
// a fault or a worse one (the agent then beats at once; a fault repeated is
// no news). It looks at most every 50 ms, so a source that is always
// readable (a device that is not a log) costs little. Stops and joins when
// destroyed.
class GpuHealthWatch {
 public:
  // `health` and `clock` outlive the watch. `fallback`: the longest wait
  // between looks when the source says nothing (a rotated file).
  GpuHealthWatch(GpuHealth* health, const Clock* clock, std::function<void()> on_change,
                 absl::Duration fallback = absl::Seconds(1));
  ~GpuHealthWatch();
  GpuHealthWatch(const GpuHealthWatch&) = delete;
  GpuHealthWatch& operator=(const GpuHealthWatch&) = delete;

 private:
  GpuHealth* health_;
  const Clock* clock_;
  std::function<void()> on_change_;
  absl::Duration fallback_;
  int stop_[2] = {-1, -1};  // a pipe: a byte written wakes the thread to stop
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace trainyard::agent
