// CUDA MPS for shared GPUs. The tasks that share a GPU are, without MPS,
// time-sliced by the driver and trusted to keep to their share. With MPS they
// run as clients of one MPS server per GPU, which caps each client's share of
// the GPU's threads (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and its device memory
// (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). The agent starts one MPS control daemon
// per GPU that holds shares, with its own pipe and log directories (so the
// daemons of two GPUs, or of two agents on one machine, never meet), when
// the GPU's first share starts, and stops it when the GPU's last share ends.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace trainyard::agent {

struct MpsOptions {
  // The control program (nvidia-cuda-mps-control): a path, or a name looked
  // up in PATH. "" = MPS off.
  std::string control;
  // GPU N's daemon uses DIR/gpu-N/pipe and DIR/gpu-N/log (the agent passes
  // DATA/mps).
  std::string dir;
  // How long one run of the control program may take (starting a daemon
  // returns once it is in the background; "quit" once it is told).
  absl::Duration command_timeout = absl::Seconds(10);
};

// Where the clients of one GPU's daemon find it.
struct MpsGpu {
  std::string pipe_dir;
  std::string log_dir;
};

// Thread-safe.
class MpsDaemons {
 public:
  explicit MpsDaemons(MpsOptions options);

  // Records `holder` (a task) as holding a share of GPU `gpu`. The GPU's
  // first holder starts its daemon (`control -d` with CUDA_VISIBLE_DEVICES
  // set to the GPU), unless one already runs there: an earlier agent's,
  // whose re-adopted tasks are its clients. An error, with the control
  // program's output, when the daemon does not start; the holder is then
  // not recorded.
  absl::StatusOr<MpsGpu> Join(const std::string& holder, int gpu) ABSL_LOCKS_EXCLUDED(mu_);
  // The holder's share ended. The GPU's last holder stops its daemon ("quit"
  // on the control program's input). Nothing for a holder not recorded.
  void Leave(const std::string& holder) ABSL_LOCKS_EXCLUDED(mu_);
  // GPUs whose daemon this agent holds open, ascending.
  std::vector<int> Gpus() const ABSL_LOCKS_EXCLUDED(mu_);

  MpsGpu DirsOf(int gpu) const;

 private:
  // Runs the control program for GPU `gpu` with `args`, `input` on its
  // standard input and its output appended to the GPU's log dir.
  absl::Status RunControl(int gpu, const std::vector<std::string>& args, const std::string& input) const;
  // True when the GPU's pipe dir names a control daemon that still runs.
  bool DaemonRuns(int gpu) const;

  const MpsOptions options_;
  mutable absl::Mutex mu_;
  std::map<int, std::set<std::string>> holders_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> gpu_of_ ABSL_GUARDED_BY(mu_);
};

// Sets what a client of a GPU's daemon needs: the daemon's dirs, its share
// of the GPU's threads in percent (rounded up) and, when the share asked
// for GPU memory, its device memory limit. The daemon sees only its GPU, so
// CUDA_VISIBLE_DEVICES becomes 0 (MPS renumbers the devices it serves).
void SetMpsClientEnv(int32_t gpu_milli, int64_t gpu_memory_mb, const MpsGpu& dirs,
                     std::map<std::string, std::string>* env);

// The control program to use for `mode` (--mps): "off" gives "" (MPS off);
// "auto" gives `control` (default nvidia-cuda-mps-control) where it is found
// and the GPUs are real, else ""; "on" gives it, or an error naming --mps
// when it is not found. A `control` with a '/' must be an executable file;
// a bare name is looked up in PATH.
absl::StatusOr<std::string> ChooseMpsControl(const std::string& mode, const std::string& control,
                                             bool simulated_gpus);

}  // namespace trainyard::agent
