// PortRanges: a set of TCP/UDP ports kept as sorted, disjoint, non-adjacent
// inclusive ranges. Parses and prints "[1-65535]" and "1000-2000,3000".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::core {

inline constexpr uint32_t kMinPort = 1;
inline constexpr uint32_t kMaxPort = 65535;

// An inclusive range [begin, end] of ports.
struct PortRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t Size() const { return end - begin + 1; }
  bool operator==(const PortRange&) const = default;
};

class PortRanges {
 public:
  // A std::vector, not an absl::InlinedVector: GCC 12 reports a false
  // -Wmaybe-uninitialized when an InlinedVector moves through a StatusOr.
  using Ranges = std::vector<PortRange>;

  PortRanges() = default;
  // Returns the set [begin, end]; an error when reversed or outside 1..65535.
  static absl::StatusOr<PortRanges> Of(uint32_t begin, uint32_t end);
  // Parses "[1-65535]", "1000-2000,3000,4000-4010" (brackets optional,
  // spaces ignored, "" = empty). Errors name the part that is wrong: a
  // reversed range, a port outside 1..65535, or text that is not a number.
  static absl::StatusOr<PortRanges> Parse(std::string_view text);

  const Ranges& ranges() const { return ranges_; }
  bool Empty() const { return ranges_.empty(); }
  // Number of ports in the set.
  uint32_t Count() const;
  bool Contains(uint32_t port) const;
  bool ContainsAll(const PortRanges& other) const;

  // Adds a range. REQUIRES: kMinPort <= begin <= end <= kMaxPort.
  void Add(PortRange range);
  PortRanges Union(const PortRanges& other) const;
  PortRanges Subtract(const PortRanges& other) const;
  PortRanges Intersect(const PortRanges& other) const;

  // Returns the `n` lowest ports of the set, or nullopt when it holds fewer.
  std::optional<PortRanges> TakeLowest(uint32_t n) const;

  // "1000-2000,3000"; "" for the empty set.
  std::string ToString() const;
  bool operator==(const PortRanges&) const = default;

 private:
  Ranges ranges_;
};

// The lowest port a node serves to tasks by default: the ports below it are
// privileged (only root may bind them).
inline constexpr uint32_t kFirstServedPort = 1024;

// The ports a node serves when neither its agent nor the server configures
// a range: kFirstServedPort..65535 minus the kernel's ephemeral range (the
// ports it hands to outgoing connections, ip_local_port_range), so a task's
// port is never one the kernel may give some connection at any moment.
PortRanges DefaultServingPorts(const PortRanges& ephemeral);

}  // namespace trainyard::core
