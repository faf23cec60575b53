// Default priority classes and job state names.
#include "core/sched/job.h"

#include <algorithm>

namespace tessera {

std::vector<PriorityClass> priority_classes_default() {
  return {
      {"production-inference", 1000, /*preemptible=*/false, /*can_preempt=*/true, /*min_runtime=*/0},
      {"production-training", 500, true, true, 30 * 60},
      {"research", 100, true, true, 10 * 60},
      {"preemptible", 0, true, false, 0},
  };
}

static_assert(size_t(JobState::kTimeout) + 1 == kJobStates, "kJobStates counts every JobState");

const char* job_state_name(JobState s) {
  switch (s) {
    case JobState::kPending: return "pending";
    case JobState::kRunning: return "running";
    case JobState::kCheckpointing: return "checkpointing";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
    case JobState::kTimeout: return "timeout";
  }
  return "unknown";
}

}  // namespace tessera

namespace tessera {

void apply_job_pool_rules(Gang& g, const Job& job, const PoolRules& rules, Time now) {
  g.checkpointable = job.checkpoint.interval > 0;
  const int max_int = rules.spot_max_interruptions;
  g.avoid_spot = max_int > 0 && job.spot_interruptions >= max_int;
  apply_pool_rules(g, rules);
  const Time pending_since = std::max(job.submitted, job.last_preempted);
  if (rules.on_demand_fallback_after_s >= 0 && (g.task.pool_kinds & pool_kind_bit(PoolKind::kSpot)) && !g.avoid_spot &&
      now - pending_since < rules.on_demand_fallback_after_s)
    g.task.pool_kinds &= PoolKindMask(~pool_kind_bit(PoolKind::kOnDemand));
}

}  // namespace tessera
