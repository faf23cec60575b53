// What a job asks for: a task's resource request and the gang (N identical tasks, all-or-nothing
// for min_tasks) with its constraints. Value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/pool.h"
#include "core/quantity.h"
#include "core/status.h"

namespace tessera {

// One task's request. GPU forms (mutually exclusive):
//   - none: gpu_count == 0 and mig_profile empty (CPU-only);
//   - whole GPUs: gpu_count >= 1, milli_per_gpu == 1000;
//   - fractional share (time-slicing/MPS): gpu_count >= 1 (usually 1), milli_per_gpu in 1..999
//     and/or gpu_memory > 0 — each of the gpu_count GPUs gives that share;
//   - MIG instance: mig_profile set ("3g.40gb" or short "3g"), gpu_count == 0.
struct TaskRequest {
  MilliCpu cpu{0};
  MiB memory{0};
  int gpu_count = 0;
  MilliGpu milli_per_gpu{1000};
  MiB gpu_memory{0};  // per GPU, for shares; 0 = not constrained
  std::string mig_profile;
  std::vector<std::string> gpu_models;  // allowed models (canonical names); empty = any
  // A gang's tasks may run on different models of gpu_models. Default: every task of a gang runs on
  // the same model (each allowed model is tried in the order listed).
  bool mix_models = false;
  // Pool kinds the task may use and whether it prefers spot nodes; set by the scheduler from the
  // gang and the pool rules (pool_kinds_for), so a request built by hand may use any pool.
  PoolKindMask pool_kinds = kAnyPoolKind;
  bool prefer_spot = false;
  bool avoid_spot = false;  // prefers non-spot nodes (the job was interrupted on spot too often)
  // The pools that hold the data the job mounts (set by the controller from its datasets and
  // volumes), in id order; empty = any pool.
  std::vector<PoolId> pools;

  // May the task use a node of this pool (kind and data)?
  bool pool_kind_allowed(PoolKind k) const { return (pool_kinds & pool_kind_bit(k)) != 0; }
  bool data_pool_allowed(PoolId p) const {
    if (pools.empty()) return true;
    for (PoolId q : pools)
      if (q == p) return true;
    return false;
  }

  bool cpu_only() const { return gpu_count == 0 && mig_profile.empty(); }
  bool whole_gpus() const { return gpu_count > 0 && milli_per_gpu.v >= 1000 && gpu_memory.v == 0; }
  bool gpu_share() const { return gpu_count > 0 && !whole_gpus(); }
  bool mig() const { return !mig_profile.empty(); }
  // GPU demand in milli-GPU (whole GPU = 1000 each).
  int64_t gpu_demand_milli() const { return int64_t(gpu_count) * milli_per_gpu.v; }
  // Field-level validation; the error names the field and why.
  Status validate() const;
  bool operator==(const TaskRequest&) const = default;
};

enum class JobKind : uint8_t { kTraining, kInference, kInteractive, kBatch };
enum class TopologyMode : uint8_t { kNone, kPreferred, kRequired };

struct TopologyConstraint {
  TopologyMode mode = TopologyMode::kNone;
  std::string level;  // a network level name, or "node"
};

// The size of one task of a gang whose tasks differ (Gang::sizes): CPU, memory and whole GPUs (0 =
// a CPU-only task, e.g. a launcher or parameter server beside GPU workers).
struct TaskSize {
  MilliCpu cpu{0};
  MiB memory{0};
  int gpu_count = 0;
  bool operator==(const TaskSize&) const = default;
};

struct Gang {
  JobId id;
  std::string name;
  int tasks = 1;
  int min_tasks = 0;  // 0 = tasks (rigid gang)
  // What every task asks. With `sizes` set, the fields every task shares (GPU models, pools) and the
  // largest task's size (most GPUs, then CPU, memory), which shape-level heuristics read.
  TaskRequest task;
  // Empty: every task is `task`. Else one size per task (size() == tasks; a rigid gang of whole GPUs
  // or none, no MIG or shares): task i asks `task` with sizes[i]. Set with set_sizes().
  std::vector<TaskSize> sizes;
  TopologyConstraint topology;
  JobKind kind = JobKind::kTraining;
  // Filled by later layers (queues, priority, checkpointing).
  int priority = 0;
  QueueId queue;
  bool checkpointable = false;
  // Job spec `spot:`; nullopt = the default: allowed for checkpointable training and batch, never
  // for anything else.
  std::optional<SpotPolicy> spot;
  // Interrupted on spot PoolRules::spot_max_interruptions times or more: keeps spot as a fallback
  // but prefers every other pool (set by the scheduler from Job::spot_interruptions).
  bool avoid_spot = false;

  int required_tasks() const { return min_tasks > 0 ? min_tasks : tasks; }
  bool varied() const { return !sizes.empty(); }
  // Task i's request (i in 0..tasks-1).
  TaskRequest request(int i) const;
  // Sets per-task sizes, `tasks`, and `task`'s size to the largest (see `task`).
  void set_sizes(std::vector<TaskSize> s);
  // GPUs the gang's tasks ask in all (the sum of gpu_count: whole GPUs, or GPUs shared; MIG: 0), and
  // its GPU demand in milli-GPU for whole and shared GPUs (MIG: 0).
  int64_t total_gpus() const;
  int64_t total_gpu_milli() const;
  Status validate() const;
};

const char* job_kind_name(JobKind k);

// Pool placement rules (docs/server.md): inference only on rules.inference_kinds; jobs that do not
// checkpoint never on spot; spot: never keeps off spot; spot: preferred prefers spot nodes.
SpotPolicy effective_spot(const Gang& g);
PoolKindMask pool_kinds_for(const Gang& g, const PoolRules& rules);
// The gang with task.pool_kinds and task.prefer_spot set from the rules.
void apply_pool_rules(Gang& g, const PoolRules& rules);
// Which rule keeps g off pools of kind k, in words ("" if none does).
std::string pool_rule_reason(const Gang& g, const PoolRules& rules, PoolKind k);

}  // namespace tessera
