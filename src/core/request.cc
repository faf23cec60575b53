#include "core/request.h"

#include <algorithm>
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

namespace {
// The first of the largest sizes: most GPUs, then CPU, then memory. `s` is not empty.
const TaskSize& largest_size(const std::vector<TaskSize>& s) {
  return *std::min_element(s.begin(), s.end(), [](const TaskSize& a, const TaskSize& b) {
    if (a.gpu_count != b.gpu_count) return a.gpu_count > b.gpu_count;
    if (a.cpu.v != b.cpu.v) return a.cpu.v > b.cpu.v;
    return a.memory.v > b.memory.v;
  });
}
}  // namespace

Status Gang::validate() const {
  if (tasks < 1) return invalid_argument("gang.tasks: must be >= 1, got " + std::to_string(tasks));
  if (min_tasks < 0 || min_tasks > tasks)
    return invalid_argument("gang.min_tasks: must be in 0..tasks (" + std::to_string(tasks) + "), got " +
                            std::to_string(min_tasks));
  if (topology.mode != TopologyMode::kNone && topology.level.empty())
    return invalid_argument("gang.topology.level: required when a topology constraint is set");
  if (Status s = task.validate(); !s.ok()) return s;
  if (sizes.empty()) return {};
  if (int64_t(sizes.size()) != tasks)
    return invalid_argument("gang.tasks: " + std::to_string(sizes.size()) + " task sizes given for " +
                            std::to_string(tasks) + " tasks");
  if (min_tasks != 0 && min_tasks != tasks)
    return invalid_argument("gang.min_tasks: a gang whose tasks differ starts whole (min_tasks must be 0)");
  if (task.mig() || task.milli_per_gpu.v != 1000 || task.gpu_memory.v != 0)
    return invalid_argument("gang.tasks: tasks that differ ask whole GPUs or none (no MIG instances or GPU shares)");
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string at = "gang.tasks[" + std::to_string(i) + "]";
    const TaskSize& z = sizes[i];
    if (z.cpu.v < 0) return invalid_argument(at + ".cpu: must be >= 0 milli-CPU, got " + std::to_string(z.cpu.v));
    if (z.memory.v < 0) return invalid_argument(at + ".memory: must be >= 0 MiB, got " + std::to_string(z.memory.v));
    if (z.gpu_count < 0 || z.gpu_count > 16)
      return invalid_argument(at + ".gpus: must be in 0..16 (one node), got " + std::to_string(z.gpu_count));
  }
  const TaskSize& big = largest_size(sizes);
  if (task.cpu != big.cpu || task.memory != big.memory || task.gpu_count != big.gpu_count)
    return invalid_argument("gang.task: must carry the largest task's size (use set_sizes)");
  return {};
}

TaskRequest Gang::request(int i) const {
  TaskRequest t = task;
  if (sizes.empty() || i < 0 || size_t(i) >= sizes.size()) return t;
  t.cpu = sizes[size_t(i)].cpu;
  t.memory = sizes[size_t(i)].memory;
  t.gpu_count = sizes[size_t(i)].gpu_count;
  return t;
}

void Gang::set_sizes(std::vector<TaskSize> s) {
  sizes = std::move(s);
  if (sizes.empty()) return;
  tasks = int(sizes.size());
  const TaskSize& big = largest_size(sizes);
  task.cpu = big.cpu;
  task.memory = big.memory;
  task.gpu_count = big.gpu_count;
}

int64_t Gang::total_gpus() const {
  if (sizes.empty()) return int64_t(std::max(tasks, 0)) * task.gpu_count;
  int64_t n = 0;
  for (const TaskSize& z : sizes) n += z.gpu_count;
  return n;
}

int64_t Gang::total_gpu_milli() const {
  if (task.mig()) return 0;
  if (sizes.empty()) return int64_t(std::max(tasks, 0)) * task.gpu_demand_milli();
  return total_gpus() * 1000;
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
