#include "sim/leftover.h"

#include <algorithm>

#include "core/placement/fit.h"

namespace tessera::sim {

int64_t Leftover::total() const {
  int64_t t = cpu_memory;
  for (int64_t b : by_band) t += b;
  return t;
}

Leftover leftover_of(const ClusterState& cluster, std::vector<TaskRequest> failed_needs) {
  for (TaskRequest& t : failed_needs) t.cpu = MilliCpu(0), t.memory = MiB(0);
  std::erase_if(failed_needs, [](const TaskRequest& t) { return t.gpu_count <= 0; });
  Leftover l;
  for (const Node& n : cluster.nodes()) {
    int64_t node_free = 0;
    for (const Gpu& g : n.gpus) node_free += std::max<int64_t>(0, g.free_milli());
    if (node_free == 0) continue;
    const bool held_by_cpu_memory = std::any_of(failed_needs.begin(), failed_needs.end(), [&](const TaskRequest& t) {
      return check_fit(n, t) == Misfit::kFits;
    });
    if (held_by_cpu_memory) {
      l.cpu_memory += node_free;
      continue;
    }
    for (const Gpu& g : n.gpus) {
      const int64_t f = g.free_milli();
      if (f <= 0) continue;
      size_t b = 0;
      while (b + 1 < Leftover::kBandMax.size() && f > Leftover::kBandMax[b]) ++b;
      l.by_band[b] += f;
    }
  }
  return l;
}

}  // namespace tessera::sim
