// Resource arithmetic. Subtract refuses to go negative and names the quantity
// that would; masks and port sets behave as sets, scalars as integers.
#include "core/resources/resource.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace trainyard::core {

std::string FormatVcores(int64_t milli) {
  std::string out = absl::StrCat(milli / 1000);
  int64_t frac = milli % 1000;
  if (milli < 0 && out[0] != '-') out = "-" + out;
  if (frac < 0) frac = -frac;
  if (frac == 0) return out;
  std::string digits = absl::StrCat(1000 + frac).substr(1);
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return absl::StrCat(out, ".", digits);
}

namespace {

absl::Status Shortfall(absl::string_view name, int64_t have, int64_t take) {
  return absl::FailedPreconditionError(
      absl::StrCat(name, ": cannot take ", take, " from ", have, "; it would go negative"));
}

}  // namespace

std::string Resource::ToString() const {
  std::string out = absl::StrCat("memory=", memory_mb, "MB vcores=", FormatVcores(vcores_milli),
                                 " gpus=", gpus);
  if (gpu_mask != 0) absl::StrAppend(&out, " mask=", GpuSet(gpu_mask).ToString());
  if (!ports.Empty()) absl::StrAppend(&out, " ports=", ports.ToString());
  if (port_count != 0) absl::StrAppend(&out, " port_count=", port_count);
  if (gpu_milli != 0) absl::StrAppend(&out, " gpu_share=", FormatVcores(gpu_milli));
  if (gpu_memory_mb != 0) absl::StrAppend(&out, " gpu_memory=", gpu_memory_mb, "MB");
  return out;
}

Resource Add(const Resource& a, const Resource& b) {
  Resource out;
  out.memory_mb = a.memory_mb + b.memory_mb;
  out.vcores_milli = a.vcores_milli + b.vcores_milli;
  out.gpus = a.gpus + b.gpus;
  out.gpu_mask = a.gpu_mask | b.gpu_mask;
  out.ports = a.ports.Union(b.ports);
  out.port_count = a.port_count + b.port_count;
  out.gpu_milli = a.gpu_milli + b.gpu_milli;
  out.gpu_memory_mb = a.gpu_memory_mb + b.gpu_memory_mb;
  return out;
}

absl::StatusOr<Resource> Subtract(const Resource& a, const Resource& b) {
  if (b.memory_mb > a.memory_mb) return Shortfall("memory_mb", a.memory_mb, b.memory_mb);
  if (b.vcores_milli > a.vcores_milli) {
    return Shortfall("vcores_milli", a.vcores_milli, b.vcores_milli);
  }
  if (b.gpus > a.gpus) return Shortfall("gpus", a.gpus, b.gpus);
  if (b.port_count > a.port_count) return Shortfall("port_count", a.port_count, b.port_count);
  if (b.gpu_milli > a.gpu_milli) return Shortfall("gpu_milli", a.gpu_milli, b.gpu_milli);
  if (b.gpu_memory_mb > a.gpu_memory_mb) {
    return Shortfall("gpu_memory_mb", a.gpu_memory_mb, b.gpu_memory_mb);
  }
  GpuSet missing = GpuSet(b.gpu_mask) - GpuSet(a.gpu_mask);
  if (!missing.Empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("gpu_mask: GPUs ", missing.ToString(), " are not held"));
  }
  if (!a.ports.ContainsAll(b.ports)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ports: ", b.ports.Subtract(a.ports).ToString(), " are not held"));
  }
  Resource out;
  out.memory_mb = a.memory_mb - b.memory_mb;
  out.vcores_milli = a.vcores_milli - b.vcores_milli;
  out.gpus = a.gpus - b.gpus;
  out.gpu_mask = a.gpu_mask & ~b.gpu_mask;
  out.ports = a.ports.Subtract(b.ports);
  out.port_count = a.port_count - b.port_count;
  out.gpu_milli = a.gpu_milli - b.gpu_milli;
  out.gpu_memory_mb = a.gpu_memory_mb - b.gpu_memory_mb;
  return out;
}

bool FitsIn(const Resource& request, const Resource& available) {
  if (!AllLessOrEqual(request, available)) return false;
  if ((request.gpu_mask & ~available.gpu_mask) != 0) return false;
  if (!available.ports.ContainsAll(request.ports)) return false;
  if (request.port_count > 0) {
    uint32_t spare = available.ports.Count() - request.ports.Count();
    if (static_cast<uint32_t>(request.port_count) > spare) return false;
  }
  return true;
}

bool AllLessOrEqual(const Resource& a, const Resource& b) {
  return a.memory_mb <= b.memory_mb && a.vcores_milli <= b.vcores_milli && a.gpus <= b.gpus;
}

bool NonNegative(const Resource& r) {
  return r.memory_mb >= 0 && r.vcores_milli >= 0 && r.gpus >= 0 && r.port_count >= 0 &&
         r.gpu_milli >= 0 && r.gpu_memory_mb >= 0;
}

}  // namespace trainyard::core
