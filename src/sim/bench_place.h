// `tessera bench place`: placement speed on a large synthetic cluster (mixed H100/A100 nodes, MIG on
// a quarter of the GPUs (every fourth node), a spine/leaf network) under a steady stream of mixed requests (shares, MIG,
// 1/2/4/8-GPU tasks, 4x8-GPU gangs) with departures keeping it about 75% full.
// Single-threaded; measures wall time of PlacementEngine::place_and_commit only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/cluster.h"
#include "core/status.h"

namespace tessera::sim {

struct BenchPlaceOptions {
  int nodes = 10000;
  int gpus_per_node = 8;
  int requests = 200000;
  int nodes_per_leaf = 32;
  int leaves_per_spine = 16;
  int score_nodes = 64;  // EngineOptions::max_scored_nodes; 0 = score every node
  std::string policy = "tessera";
  uint64_t seed = 42;
  // Prepare the policy with the stream's shapes and weights (ScoringPolicy::prepare, as sim alloc
  // does): FGD's and Tessera's fragmentation measures then score every candidate.
  bool profile = false;
};

struct LatencyStats {
  int64_t count = 0;
  int64_t placed = 0;
  double p50_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
};

struct BenchPlaceResult {
  int nodes = 0;
  int64_t gpus = 0;
  double seconds = 0;               // time inside place_and_commit, all kinds
  double placements_per_s = 0;      // single-task requests decided per second
  double final_gpu_allocated_pct = 0;
  std::map<std::string, LatencyStats> by_kind;  // share, mig, gpu1, gpu2, gpu4, gang8 (1x8), gang4x8
};

// The benchmarks' synthetic cluster: nodes alternate H100-80GB-SXM / A100-80GB, `gpus_per_node` each,
// 16 GPU-cores' worth of CPU and 128 GiB per GPU, networked as spines of `leaves_per_spine` leaves of
// `nodes_per_leaf` nodes; with `with_mig`, two nodes in eight are entirely in MIG mode.
Result<ClusterState> make_bench_cluster(int nodes, int gpus_per_node, int nodes_per_leaf, int leaves_per_spine,
                                        bool with_mig);

// progress(done, total) is called now and then (may be empty).
Result<BenchPlaceResult> run_bench_place(const BenchPlaceOptions& o,
                                         const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tessera::sim
