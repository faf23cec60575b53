// Dynamic MIG layout planner: decides which IDLE GPUs should change mode or MIG layout so that the
// pending mix of work (MIG slices for inference and small jobs, whole GPUs for training gangs, which
// cannot run NCCL on MIG) can be placed. It only plans: it picks idle GPUs, so nothing needs draining;
// the caller applies the returned changes (the agent destroys the old instances and creates the new
// layout with explicit placements) and records when each GPU changed, for the hysteresis.
//
// Rules:
//  - A request is served only by GPUs on nodes whose pool kind it allows (MigDemand::pool_kinds, as
//    the placement check kPool): a layout on a pool it may not use would never serve it.
//  - A GPU is touched only if it is healthy, on a schedulable node, and idle: a whole GPU with no
//    holder and no share, or a MIG GPU whose every instance is idle. A GPU with an instance in use,
//    held whole or shared is never changed.
//  - A GPU still reconfiguring (GpuHealth::kReconfiguring) counts as what it is becoming: its new
//    instances serve MIG demand, a GPU turning whole covers whole demand; it is not changed again.
//  - Every layout is built and validated with MigLayout (the catalog's placement rules); starts are
//    explicit.
//  - Hysteresis: a GPU changed less than `min_layout_age` ago is left alone; at most
//    `max_gpus_per_cycle` changes per call.
//  - Pending whole-GPU demand has priority: whole GPUs are converted to MIG only beyond the pending
//    whole demand, and MIG GPUs that serve no pending MIG request are turned back when training waits.
// Pure and deterministic: the same input gives the same output; orders end in (node id, GPU index).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/ids.h"
#include "core/mig.h"
#include "core/pool.h"
#include "core/sched/job.h"

namespace tessera {

// Pending MIG instances wanted. `profile` is a profile name ("1g.10gb") or the model-agnostic short
// form ("3g"), resolved on each GPU model with GpuModel::find_profile.
struct MigDemand {
  std::string profile;
  int count = 0;
  std::string gpu_model;  // catalog name or alias the request is restricted to; empty = any model
  PoolKindMask pool_kinds = kAnyPoolKind;  // pools the request may use (TaskRequest::pool_kinds)
};

struct MigPlannerConfig {
  Duration reconfigure_cost = 60;  // time a changed GPU is out of service (reported as ready_at)
  Duration min_layout_age = 600;   // hysteresis: no change to a GPU changed less than this ago
  int max_gpus_per_cycle = 8;      // at most this many changes per call
};

struct GpuLayoutChange {
  GpuRef gpu;
  bool enable_mig = true;           // false: turn back to a whole GPU (layout empty)
  std::vector<MigInstance> layout;  // the new layout, all instances idle, sorted by start
  std::string reason;               // for users and operators
  Time ready_at = 0;                // now + reconfigure_cost
};

struct MigPlanInput {
  const ClusterState* cluster = nullptr;
  std::vector<MigDemand> mig_demand;
  int whole_gpu_demand = 0;  // pending whole GPUs (training gangs), any model
  Time now = 0;
  std::map<GpuRef, Time> last_changed;  // when each GPU's mode or layout last changed (absent = never)
};

// Plans layout changes for idle GPUs. Steps:
//  1. Unmet MIG demand: each request (largest compute first) is served, in a simulation on copies of
//     the layouts, by idle instances of its profile, then by instances created on free slices, then
//     (on GPUs with work running) by destroying idle instances as the engine would. What is left is unmet.
//  2. Whole demand first: if pending whole GPUs exceed the idle whole GPUs, entirely idle MIG GPUs
//     that served nothing in step 1 are turned back to whole GPUs (nodes with more idle GPUs first).
//  3. If MIG demand is unmet: entirely idle MIG GPUs that served nothing in step 1 (node id, index),
//     then idle whole GPUs of MIG-capable models beyond the pending whole demand (non-MIG GPUs are
//     not counted as covering it; nodes with fewer idle whole GPUs first, so that free nodes stay
//     whole for gangs), get a layout packing the unmet profiles: an exhaustive search over explicit
//     starts maximising the demanded compute slices, then instances; free slices are then filled
//     with the most-demanded (then smallest) profile so they stay useful.
std::vector<GpuLayoutChange> plan_mig_layouts(const MigPlanInput& in, const MigPlannerConfig& cfg);

// Building block, exposed for tests: the best layout on an empty GPU of `model` for `wants`
// (profile of that model, count). Returns the instances (idle, sorted by start); the fill step is
// included when `fill` is true.
std::vector<MigInstance> design_mig_layout(const GpuModel& model,
                                           const std::vector<std::pair<const MigProfile*, int>>& wants,
                                           bool fill);

}  // namespace tessera
