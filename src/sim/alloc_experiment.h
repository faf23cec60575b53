// The FGD allocation experiment (ATC'23 artifact protocol, ../shared/data/openb/PROTOCOL.md):
// a pod list inflated to 1.3x the cluster's GPU capacity arrives one pod at a time onto an empty
// cluster, nothing leaves, and after each arrival the arrived and allocated GPU milli are recorded;
// the curve is the allocated % at each integer arrived %. One seed drives a run (shuffle, tuning,
// node rank, Random's draws). Runs are independent: run_alloc_matrix runs them on std::threads.
// A built-in synthetic openb-like workload is generated when no trace is given.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/placement/policy.h"
#include "core/rng.h"
#include "core/status.h"
#include "sim/leftover.h"
#include "sim/openb.h"

namespace tessera::sim {

struct AllocWorkload {
  std::string name;             // e.g. "openb_pod_list_default", or "synthetic"
  ClusterState cluster;         // empty; copied for each run
  std::vector<OpenbPod> pods;   // the original list; sorted by name on use
};

// Python's round(x): nearest integer, ties to even.
int64_t round_half_even(double x);
// Python's round(x, 2): the decimal nearest the exact binary value, ties to even.
double round2(double x);

// GPU milli a pod asks for (num_gpu x gpu_milli; 0 for CPU-only), and its per-GPU milli.
int64_t pod_demand_milli(const TaskRequest& t);
int64_t pod_milli_per_gpu(const TaskRequest& t);

// The pods sorted by name (stable), as every run reads them (fact 2).
std::vector<OpenbPod> pods_by_name(const std::vector<OpenbPod>& pods);

// Arrival order of one run (facts 2-5) as indices into `sorted` (the name-sorted list): the
// shuffled originals (tuned down at random positions if above target), then the extra draws.
// Draws from `rng` in that order.
std::vector<uint32_t> plan_arrivals(const std::vector<OpenbPod>& sorted, int64_t capacity_milli, double inflate,
                                    Rng& rng);

// One data row per arrival (fact 7).
struct AllocRow {
  int64_t arrived_milli = 0;
  int64_t allocated_milli = 0;
};
// The curve at p = 0..max_pct (fact 8); NaN where no row lies within p +- 1.
std::vector<double> alloc_curve(const std::vector<AllocRow>& rows, int64_t total_gpus, int max_pct = 130);

// The workload's shapes with counts (what FGD-like policies get through prepare(); the runs add the
// cluster's node kinds).
WorkloadProfile workload_profile(const std::vector<OpenbPod>& pods);

// Pods that fit no node, kept so that a run can skip the scan of every node for later pods that
// cannot fit either. Sound only while nothing leaves (as in this experiment): free CPU, memory and
// GPUs then only shrink, so a pod asking at least as much of each as one that fit nowhere (the same
// GPU form, every other field equal) fits nowhere too. Holds the least demanding, at most `max`.
class UnfitPods {
 public:
  explicit UnfitPods(size_t max = 64) : max_(max) {}
  // True if `q` asks at least as much as a pod added before.
  bool covers(const TaskRequest& q) const;
  // `p` fit no node.
  void add(const TaskRequest& p);
  size_t size() const { return kept_.size(); }
  std::vector<TaskRequest> requests() const;  // those held

 private:
  size_t max_;
  struct Kept {
    TaskRequest req, rest;  // rest: the request without its amounts, which must be equal
  };
  static TaskRequest rest(TaskRequest t);
  static bool at_least(const TaskRequest& q, const TaskRequest& p);
  std::vector<Kept> kept_;
};

// What a run placed, as the packing ceiling reads it (sim/repack.h).
struct PlacedShares {
  std::map<int64_t, int64_t> by_milli;  // GPU shares placed: per-GPU milli (1-999) -> GPUs holding one
  int64_t failed_whole_gpus = 0;        // GPUs asked whole by pods that did not fit
  bool mig = false;                     // a MIG task was placed (not modelled)
  int64_t milli() const;                // the shares' sum (counts below 0 count as 0)
};

struct AllocRun {
  std::string policy;
  uint64_t seed = 0;
  std::vector<double> curve;  // 0..130
  int64_t arrivals = 0, placed = 0;
  int64_t final_allocated_milli = 0;  // after the last arrival
  PlacedShares shares;
  Leftover leftover;  // where the free GPU milli is after the last arrival
  double elapsed_s = 0;
};
Result<AllocRun> run_alloc(const AllocWorkload& w, const std::string& policy, uint64_t seed, double inflate = 1.3);

struct AllocSummary {
  std::string policy;
  std::vector<uint64_t> seeds;
  std::vector<double> mean_curve;  // seed mean at 0..130 (over seeds that reach p; NaN if none)
  std::vector<std::vector<double>> seed_curves;  // per seed (as `seeds`), 0..130
  std::vector<int64_t> seed_final_milli;         // per seed: allocated after the last arrival
  std::vector<PlacedShares> seed_shares;         // per seed: what it placed
  std::vector<Leftover> seed_leftover;           // per seed: where its free GPU milli is at the end
  double elapsed_s = 0;            // sum of this policy's run times
};
// Every policy x seed, on `threads` threads (0 = hardware concurrency). `progress(done, total)` is
// called on the calling thread after each finished run. Fails on the first bad policy name.
Result<std::vector<AllocSummary>> run_alloc_matrix(const AllocWorkload& w, const std::vector<std::string>& policies,
                                                   const std::vector<uint64_t>& seeds, double inflate = 1.3,
                                                   int threads = 0,
                                                   const std::function<void(int, int)>& progress = {});

// Synthetic pod mixes, each stressing one dimension of the openb-like baseline:
//  - kOpenb: 13% CPU-only, 38% GPU-sharing, 48% one GPU, 1% multi-GPU, 4 GiB per core;
//  - kCpuHeavy: 30% CPU-only pods with 1.5x the CPU, GPU pods with 1.25x theirs (CPU runs out first);
//  - kMemoryHeavy: 4, 6 or 8 GiB per core (memory runs out first on many nodes);
//  - kShareHeavy: 75% GPU-sharing, 11% one GPU;
//  - kMultiGpu: 30% multi-GPU (2, 4 or 8 GPUs);
//  - kModelConstrained: a third of the GPU pods name one or two GPU models.
enum class SyntheticMix : uint8_t { kOpenb, kCpuHeavy, kMemoryHeavy, kShareHeavy, kMultiGpu, kModelConstrained };
// "openb", "cpu-heavy", "memory-heavy", "share-heavy", "multi-gpu", "model-constrained".
const char* synthetic_mix_name(SyntheticMix m);
Result<SyntheticMix> parse_synthetic_mix(const std::string& name);
std::vector<std::string> synthetic_mix_names();

// An openb-like cluster (same GPU model mix and node shapes, about `nodes` GPU nodes) and a pod
// list of the given mix, generated from `seed`. Named "synthetic" (kOpenb) or "synthetic-<mix>".
AllocWorkload synthetic_workload(uint64_t seed = 1, int nodes = 1200, SyntheticMix mix = SyntheticMix::kOpenb);

}  // namespace tessera::sim

namespace tessera::sim {

// The FGD artifact's published curves (fgd_expected_allocation.csv): one per workload/policy/seed.
struct PublishedCurve {
  std::string workload;  // e.g. "openb_pod_list_default"
  std::string policy;    // e.g. "06-FGD"
  uint64_t seed = 0;
  std::vector<double> curve;  // index = arrived %
};
Result<std::vector<PublishedCurve>> load_published_curves(const std::string& path);
// The artifact's name for one of our policies ("fgd" -> "06-FGD"); empty if it has none.
std::string artifact_policy_name(const std::string& policy);
// Seed mean of the published curves for (workload, our policy name, seeds); empty if none match.
// Seeds missing from the file are ignored.
std::vector<double> published_mean(const std::vector<PublishedCurve>& all, const std::string& workload,
                                   const std::string& policy, const std::vector<uint64_t>& seeds);

}  // namespace tessera::sim
