// Resource: an amount of memory, CPU, GPUs and ports, as a request, an
// allocation or what a node has free. Integer quantities only; arithmetic
// never yields a negative quantity silently.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/resources/gpu_set.h"
#include "core/resources/port_ranges.h"

namespace trainyard::core {

struct Resource {
  int64_t memory_mb = 0;
  int64_t vcores_milli = 0;
  int32_t gpus = 0;
  // Exact GPUs wanted (a locality request) or held; 0 in a count-only request.
  uint64_t gpu_mask = 0;
  // Exact ports wanted or held.
  PortRanges ports;
  // Number of ports wanted, any free ones; only in requests.
  int32_t port_count = 0;
  // A share of one GPU in thousandths (1..999), with gpus == 0: in a request,
  // part of any one GPU; in an allocation, the share held of the one GPU that
  // gpu_mask names. A share never spans GPUs; 1000 or more is whole GPUs.
  int32_t gpu_milli = 0;
  // GPU memory wanted with a share (MB), or held; 0 = none asked.
  int64_t gpu_memory_mb = 0;

  // True when this asks for (or holds) a share of one GPU.
  bool IsGpuShare() const { return gpu_milli > 0 && gpus == 0; }

  bool operator==(const Resource&) const = default;
  // "memory=1024MB vcores=1.5 gpus=2 mask=0-1 ports=3000-3001" (a share adds
  // "gpu_share=0.25", and "gpu_memory=8192MB" when asked).
  std::string ToString() const;
};

// Returns a + b: scalars add, masks and port sets unite.
Resource Add(const Resource& a, const Resource& b);

// Returns a - b, or an error naming the first quantity that would go
// negative (or a GPU / port in b that a does not hold).
absl::StatusOr<Resource> Subtract(const Resource& a, const Resource& b);

// True when every quantity of `request` fits in `available`: scalars <=,
// the mask (if any) inside available's mask, explicit ports inside
// available's ports, and port_count ports free beyond the explicit ones.
bool FitsIn(const Resource& request, const Resource& available);

// Component-wise comparison of the scalar quantities (memory, vcores, gpus):
// true when every one of a is <= b's.
bool AllLessOrEqual(const Resource& a, const Resource& b);

// "1.5" for 1500 milli-vcores, "2" for 2000, "0.25" for 250.
std::string FormatVcores(int64_t milli);

// True when no scalar quantity is negative.
bool NonNegative(const Resource& r);

}  // namespace trainyard::core
