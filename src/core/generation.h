// Process-unique version stamps. A cache keyed by one (a cluster's per-cycle facts, a fair share's
// order keys) stays valid while the stamp it was made under is unchanged; two objects never share a
// stamp, so a cache cannot mistake one for the other (or for a copy of it that changed since).
// Thread-safe; never returns 0.
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera {

inline uint64_t fresh_generation() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace tessera
