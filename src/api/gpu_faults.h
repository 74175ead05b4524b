// The GPUs a node's faults take out of service (docs/gpu-health.md): one
// rule for the server's control state, its views and the CLI.
#pragma once

#include <cstdint>

#include "proto/trainyard.pb.h"

namespace trainyard::api {

// GPUs 0..63 of `info` with a fault whose action is not IGNORE.
inline uint64_t FaultyGpus(const v1::NodeInfo& info) {
  uint64_t m = 0;
  for (const v1::GpuFault& f : info.gpu_faults()) {
    if (f.gpu() >= 0 && f.gpu() < 64 && f.action() != v1::GPU_FAULT_IGNORE &&
        f.action() != v1::GPU_FAULT_ACTION_UNSPECIFIED) {
      m |= uint64_t{1} << f.gpu();
    }
  }
  return m;
}

}  // namespace trainyard::api
