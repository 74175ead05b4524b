// The three resource calculators. Shares are fractions of the cluster; a
// quantity the cluster has none of is left out of the share (it cannot be
// divided by). Dominant compares the largest share first and the next
// largest on a tie, as Dominant Resource Fairness orders users.
#include "core/resources/calculator.h"

#include <algorithm>
#include <array>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace trainyard::core {
namespace {

double Ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

template <typename T>
int Sign(T a, T b) {
  return (a > b) - (a < b);
}

class MemoryCalculator : public ResourceCalculator {
 public:
  std::string_view Name() const override { return "memory"; }
  double Share(const Resource& r, const Resource& cluster) const override {
    return Ratio(r.memory_mb, cluster.memory_mb);
  }
  bool Fits(const Resource& request, const Resource& available) const override {
    return request.memory_mb <= available.memory_mb;
  }
  int Compare(const Resource& a, const Resource& b, const Resource&) const override {
    return Sign(a.memory_mb, b.memory_mb);
  }
};

class GpuCalculator : public ResourceCalculator {
 public:
  std::string_view Name() const override { return "gpu"; }
  double Share(const Resource& r, const Resource& cluster) const override {
    return Ratio(r.gpus, cluster.gpus);
  }
  bool Fits(const Resource& request, const Resource& available) const override {
    return request.gpus <= available.gpus;
  }
  int Compare(const Resource& a, const Resource& b, const Resource&) const override {
    return Sign(a.gpus, b.gpus);
  }
};

class DominantCalculator : public ResourceCalculator {
 public:
  std::string_view Name() const override { return "dominant"; }
  double Share(const Resource& r, const Resource& cluster) const override {
    return Shares(r, cluster)[0];
  }
  bool Fits(const Resource& request, const Resource& available) const override {
    return AllLessOrEqual(request, available);
  }
  int Compare(const Resource& a, const Resource& b, const Resource& cluster) const override {
    std::array<double, 3> sa = Shares(a, cluster), sb = Shares(b, cluster);
    for (size_t i = 0; i < sa.size(); ++i) {
      if (int c = Sign(sa[i], sb[i]); c != 0) return c;
    }
    return 0;
  }

 private:
  // Memory, vcores and GPU shares, largest first.
  static std::array<double, 3> Shares(const Resource& r, const Resource& cluster) {
    std::array<double, 3> s = {Ratio(r.memory_mb, cluster.memory_mb),
                               Ratio(r.vcores_milli, cluster.vcores_milli),
                               Ratio(r.gpus, cluster.gpus)};
    std::sort(s.begin(), s.end(), std::greater<double>());
    return s;
  }
};

}  // namespace

absl::StatusOr<ResourceCalculatorPtr> MakeResourceCalculator(std::string_view name) {
  if (name == "memory") return std::make_unique<MemoryCalculator>();
  if (name == "dominant") return std::make_unique<DominantCalculator>();
  if (name == "gpu") return std::make_unique<GpuCalculator>();
  return absl::InvalidArgumentError(absl::StrCat("resource calculator: unknown '",
                                                 absl::string_view(name.data(), name.size()),
                                                 "'; known: memory, dominant, gpu"));
}

}  // namespace trainyard::core
