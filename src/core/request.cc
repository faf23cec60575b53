#include "core/request.h"

#include <string>

namespace tessera {

Status TaskRequest::validate() const {
  if (cpu.v < 0) return invalid_argument("task.cpu: must be >= 0 milli-CPU, got " + std::to_string(cpu.v));
  if (memory.v < 0) return invalid_argument("task.memory: must be >= 0 MiB, got " + std::to_string(memory.v));
  if (gpu_count < 0) return invalid_argument("task.gpus: must be >= 0, got " + std::to_string(gpu_count));
  if (gpu_count > 16)
    return invalid_argument("task.gpus: at most 16 GPUs per task (one node); got " + std::to_string(gpu_count) +
                            " - split the job into more tasks");
  if (milli_per_gpu.v < 1 || milli_per_gpu.v > 1000)
    return invalid_argument("task.gpu_milli: must be in 1..1000 (1000 = a whole GPU), got " +
                            std::to_string(milli_per_gpu.v));
  if (gpu_memory.v < 0) return invalid_argument("task.gpu_memory: must be >= 0 MiB");
  if (mig() && gpu_count != 0)
    return invalid_argument("task.mig_profile: a MIG request takes one instance; set gpus to 0 (got " +
                            std::to_string(gpu_count) + ")");
  if (mig() && (milli_per_gpu.v != 1000 || gpu_memory.v != 0))
    return invalid_argument("task.mig_profile: cannot be combined with gpu_milli or gpu_memory shares");
  if (gpu_count == 0 && !mig() && (milli_per_gpu.v != 1000 || gpu_memory.v != 0))
    return invalid_argument("task.gpu_milli: a GPU share needs gpus >= 1");
  return {};
}

Status Gang::validate() const {
  if (tasks < 1) return invalid_argument("gang.tasks: must be >= 1, got " + std::to_string(tasks));
  if (min_tasks < 0 || min_tasks > tasks)
    return invalid_argument("gang.min_tasks: must be in 0..tasks (" + std::to_string(tasks) + "), got " +
                            std::to_string(min_tasks));
  if (topology.mode != TopologyMode::kNone && topology.level.empty())
    return invalid_argument("gang.topology.level: required when a topology constraint is set");
  return task.validate();
}

const char* job_kind_name(JobKind k) {
  switch (k) {
    case JobKind::kTraining: return "training";
    case JobKind::kInference: return "inference";
    case JobKind::kInteractive: return "interactive";
    case JobKind::kBatch: return "batch";
  }
  return "?";
}

SpotPolicy effective_spot(const Gang& g) {
  if (g.spot) return *g.spot;
  return g.checkpointable && (g.kind == JobKind::kTraining || g.kind == JobKind::kBatch) ? SpotPolicy::kAllowed
                                                                                          : SpotPolicy::kNever;
}

PoolKindMask pool_kinds_for(const Gang& g, const PoolRules& rules) {
  PoolKindMask m = kAnyPoolKind;
  if (g.kind == JobKind::kInference) m &= rules.inference_kinds;
  if (!g.checkpointable || effective_spot(g) == SpotPolicy::kNever) m &= kNoSpot;
  return m;
}

void apply_pool_rules(Gang& g, const PoolRules& rules) {
  g.task.pool_kinds = pool_kinds_for(g, rules);
  const bool spot_ok = (g.task.pool_kinds & pool_kind_bit(PoolKind::kSpot)) != 0;
  g.task.prefer_spot = effective_spot(g) == SpotPolicy::kPreferred && spot_ok && !g.avoid_spot;
  g.task.avoid_spot = g.avoid_spot && spot_ok;
}

std::string pool_rule_reason(const Gang& g, const PoolRules& rules, PoolKind k) {
  const PoolKindMask bit = pool_kind_bit(k);
  if (g.kind == JobKind::kInference && !(rules.inference_kinds & bit))
    return "inference jobs run only on " + pool_kinds_text(rules.inference_kinds) + " pools";
  if (k == PoolKind::kSpot && !g.checkpointable) return "jobs that do not checkpoint never run on spot pools";
  if (k == PoolKind::kSpot && effective_spot(g) == SpotPolicy::kNever)
    return g.spot ? "the job says spot: never" : std::string("only checkpointable training and batch jobs use spot pools unless they say spot: allowed");
  return "";
}

}  // namespace tessera
