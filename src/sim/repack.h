// The packing ceiling of an allocation run (`tessera sim alloc --repack`): how much of what a policy
// left unallocated is the packing of GPU shares. A run's shares (sim/alloc_experiment.h,
// PlacedShares) are repacked on as few GPUs as can hold them, and each GPU so freed is given to a
// whole-GPU request that failed. Only GPU milli count: CPU, memory and which node a GPU is on are
// ignored, so the ceiling is optimistic for that run. It is not a bound on other policies, which
// place other pods (sim/alloc_bound.h is); it says how far better packing alone could take this one.
// Pure functions over a real LP solver (sim/lp.h); thread-compatible.
#pragma once

#include <cstdint>
#include <map>

#include "core/status.h"
#include "sim/alloc_experiment.h"

namespace tessera::sim {

// Fewest GPUs of 1000 milli that hold shares of the given per-GPU milli (1-999) and counts: the
// optimum of the configuration LP (a GPU's content is a configuration; every share covered), rounded
// up, so never above any packing's count. The LP is solved in its dual form by adding, one at a time,
// the configuration a bounded knapsack finds most violated; each iterate's value over that knapsack's
// is Farley's bound, a valid lower bound even if the iteration cap stops the search early. Never
// below the shares' milli / 1000 or the number of shares above 500 (both rounded up).
// kInvalidArgument for a milli outside 1-999; kFailedPrecondition without a solver.
Result<int64_t> fewest_gpus_for_shares(const std::map<int64_t, int64_t>& by_milli);

// The run's allocation, in milli, had its shares been packed on fewest_gpus_for_shares GPUs and the
// GPUs so freed held whole-GPU requests that failed (no more GPUs than they asked): at least
// `allocated_milli`, at most the cluster's `total_gpus`. kInvalidArgument for a run that placed MIG
// tasks (not modelled) or inconsistent counts.
Result<int64_t> repack_ceiling_milli(const PlacedShares& placed, int64_t allocated_milli, int64_t total_gpus);

}  // namespace tessera::sim
