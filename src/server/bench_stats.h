// Small statistics shared by the in-process HTTP benchmarks (`tessera bench api`, `bench attack`).
// Pure; thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace tessera::server::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The p-quantile (0..1) of `v`, nearest rank; 0 for an empty sample.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

}  // namespace tessera::server::bench
