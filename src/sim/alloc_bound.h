// An upper bound on the GPU allocation any placement could reach in the allocation experiment
// (alloc_experiment.h): pods arrive on an empty cluster and never leave, so what is allocated after
// a prefix of arrivals is at most the offline optimum of that prefix, the most GPU milli a packing of
// some of its pods can hold. AllocBound bounds that optimum with a linear program solved by a real
// solver (lp.h):
//  - nodes are grouped into types (CPU, memory, GPUs, model, pool, MIG mode: nodes that every pod
//    fits alike) and pods into types (their whole request); y[p][t] >= 0 is how many pods of type p
//    sit on nodes of type t, only where p fits an empty node of t;
//  - per pod type, at most as many as arrived; per node type, its CPU, memory and GPU milli;
//  - cuts that every integer packing meets and the plain relaxation does not: per node, at most k
//    requests larger than 1/(k+1) of its CPU, memory or GPUs; per GPU, at most k shares larger than
//    1/(k+1) of it, on GPUs no whole-GPU request holds; GPU memory likewise.
// The LP's optimum is >= the optimum of every integer packing, hence >= what any policy allocates.
// Pods asking for no GPU are left out (the optimum may always leave them out). MIG requests are not
// modelled: build() refuses them.
// Thread-safety: an AllocBound is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cluster.h"
#include "core/request.h"
#include "core/status.h"
#include "sim/alloc_experiment.h"
#include "sim/lp.h"

namespace tessera::sim {

class AllocBound {
 public:
  // `cluster`: empty; `pods`: every pod that may arrive (their types are formed once).
  static Result<std::unique_ptr<AllocBound>> build(const ClusterState& cluster, const std::vector<TaskRequest>& pods);

  // The pod type of pods[i], or -1 for a pod left out (no GPU asked).
  int type_of(size_t i) const { return pod_type_[i]; }
  int pod_types() const { return int(count_row_.size()); }
  int node_types() const { return node_types_; }
  const LinearProgram& lp() const { return lp_; }

  // The bound, in GPU milli, for `count[p]` pods of each type p: never below the offline optimum,
  // never above the pods' demand or the cluster's GPUs. Solves are warm-started from the last.
  Result<int64_t> solve(const std::vector<int64_t>& count);

 private:
  AllocBound() = default;
  LinearProgram lp_;
  std::vector<int> pod_type_;
  std::vector<int> count_row_;          // per pod type: its row
  std::vector<int64_t> type_demand_;    // per pod type: GPU milli of one pod
  int64_t capacity_milli_ = 0;
  int node_types_ = 0;
};

}  // namespace tessera::sim
namespace tessera::sim {

// The bound of one seed's arrivals (plan_arrivals on the name-sorted pods, as run_alloc draws
// them) at each arrived % asked: from the longest prefix of arrivals that alloc_curve averages at
// that %, so it is >= the policy's curve there. NaN where no arrival lands.
struct BoundCurve {
  uint64_t seed = 0;
  std::vector<double> at;  // per pct asked, % of GPU capacity, rounded to 2 decimals (up)
  double solve_s = 0;      // solving this seed's LPs (the program is built once for all seeds)
};
Result<std::vector<BoundCurve>> alloc_bound_curves(const AllocWorkload& w, const std::vector<uint64_t>& seeds,
                                                   double inflate, const std::vector<int>& pcts);

}  // namespace tessera::sim
