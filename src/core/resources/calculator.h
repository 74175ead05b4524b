// Resource calculators: how a scheduler measures "share of the cluster",
// whether a request fits, and which of two resources is larger. Memory-only
// (the default, as in YARN's DefaultResourceCalculator), dominant (DRF over
// memory, vcores and GPUs) and GPU-only.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/resources/resource.h"

namespace trainyard::core {

class ResourceCalculator {
 public:
  virtual ~ResourceCalculator() = default;
  // The calculator's name: "memory", "dominant" or "gpu".
  virtual std::string_view Name() const = 0;
  // Share of `cluster` that `r` takes, in [0, +inf); 0 when cluster is empty
  // in every measured quantity.
  virtual double Share(const Resource& r, const Resource& cluster) const = 0;
  // True when `request` fits in `available` in the measured quantities.
  virtual bool Fits(const Resource& request, const Resource& available) const = 0;
  // <0, 0, >0 as a is smaller than, equal to or larger than b relative to
  // `cluster`.
  virtual int Compare(const Resource& a, const Resource& b, const Resource& cluster) const = 0;
};
using ResourceCalculatorPtr = std::unique_ptr<ResourceCalculator>;

// Returns the calculator named "memory", "dominant" or "gpu"; an error lists
// the known names.
absl::StatusOr<ResourceCalculatorPtr> MakeResourceCalculator(std::string_view name);

}  // namespace trainyard::core
