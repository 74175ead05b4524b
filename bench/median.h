// The median wall time of `samples` runs of a piece of work, in ms: what
// the plain-main benchmarks print.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace trainyard::bench {

template <typename F>
double MedianMs(int samples, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace trainyard::bench
