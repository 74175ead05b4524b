// GpuSet: a set of GPU indices on one node as a 64-bit bitmap (bit i = GPU i).
// A value type; every operation is a few machine instructions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::core {

// The most GPUs one node may have.
inline constexpr int kMaxGpus = 64;

// Number of set bits. Written out rather than __builtin_popcountll: without
// -mpopcnt (the default x86-64 target) the builtin becomes a library call,
// and placement counts bits in its innermost loops.
constexpr int BitCount(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int>((x * 0x0101010101010101ULL) >> 56);
}

class GpuSet {
 public:
  constexpr GpuSet() = default;
  constexpr explicit GpuSet(uint64_t bits) : bits_(bits) {}

  // Returns the set {0, ..., n-1}; empty for n <= 0, all 64 for n >= 64.
  static constexpr GpuSet FirstN(int n) {
    if (n <= 0) return GpuSet();
    if (n >= kMaxGpus) return GpuSet(~uint64_t{0});
    return GpuSet((uint64_t{1} << n) - 1);
  }
  // Returns the set of the given indices; an error names an index outside
  // 0..63.
  static absl::StatusOr<GpuSet> FromIndices(const std::vector<int>& indices);
  // Parses "0-3,6" (ranges and single indices, comma separated; "" = empty).
  // An error names the part that does not parse or is outside 0..63.
  static absl::StatusOr<GpuSet> Parse(std::string_view text);

  constexpr uint64_t bits() const { return bits_; }
  int Count() const { return BitCount(bits_); }
  bool Empty() const { return bits_ == 0; }
  // True when GPU `gpu` is in the set; false for indices outside 0..63.
  bool Contains(int gpu) const { return gpu >= 0 && gpu < kMaxGpus && (bits_ >> gpu) & 1; }
  bool ContainsAll(GpuSet other) const { return (other.bits_ & ~bits_) == 0; }
  // Returns the lowest index in the set. REQUIRES: !Empty().
  int Lowest() const { return __builtin_ctzll(bits_); }
  // Returns the `n` lowest members (all of them when fewer than n).
  GpuSet LowestN(int n) const;
  std::vector<int> Indices() const;

  GpuSet operator|(GpuSet o) const { return GpuSet(bits_ | o.bits_); }
  GpuSet operator&(GpuSet o) const { return GpuSet(bits_ & o.bits_); }
  // Set difference.
  GpuSet operator-(GpuSet o) const { return GpuSet(bits_ & ~o.bits_); }
  bool operator==(const GpuSet&) const = default;

  // "0-3,6"; "" for the empty set.
  std::string ToString() const;
  // One glyph per GPU 0..gpu_count-1: "■" when in the set, "□" when not.
  std::string ToBitmap(int gpu_count) const;

 private:
  uint64_t bits_ = 0;
};

}  // namespace trainyard::core
