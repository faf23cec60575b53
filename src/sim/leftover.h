// Where a run's free GPU capacity lies after its last arrival (`tessera sim alloc --leftover`). In an
// allocation run nothing leaves, so at the end no pod that failed fits anywhere: every free milli
// counted here is capacity the run could not use, and the split says what held it back. On a node
// where some failed pod would fit but for its CPU or memory, the node's free GPU milli counts as held
// by CPU or memory; elsewhere each GPU's free milli counts by how much is free on it (a band), which
// is what decides which shares could still use it. MIG and unhealthy GPUs are not counted.
// Pure function; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/cluster.h"
#include "core/request.h"

namespace tessera::sim {

struct Leftover {
  // The bands by a GPU's free milli: 1-99, 100-199, 200-499, 500-999 and 1000 (idle).
  static constexpr std::array<int64_t, 5> kBandMax = {99, 199, 499, 999, 1000};
  static constexpr std::array<const char*, 5> kBandName = {"1-99", "100-199", "200-499", "500-999", "idle"};
  int64_t cpu_memory = 0;            // free milli on nodes where a failed pod would fit but for CPU or memory
  std::array<int64_t, 5> by_band{};  // the rest, by the free milli of its GPU
  int64_t total() const;
};

// `failed`: the pods that failed (their CPU and memory are set aside here; pods that ask no whole
// or shared GPU, CPU-only and MIG, are ignored). The least demanding of each form are enough: a node that fits a pod's GPU needs fits
// those of every pod of the same form that asks less.
Leftover leftover_of(const ClusterState& cluster, std::vector<TaskRequest> failed);

}  // namespace tessera::sim
