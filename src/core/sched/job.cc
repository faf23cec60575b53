// Default priority classes and job state names.
#include "core/sched/job.h"

namespace tessera {

std::vector<PriorityClass> priority_classes_default() {
  return {
      {"production-inference", 1000, /*preemptible=*/false, /*can_preempt=*/true, /*min_runtime=*/0},
      {"production-training", 500, true, true, 30 * 60},
      {"research", 100, true, true, 10 * 60},
      {"preemptible", 0, true, false, 0},
  };
}

const char* job_state_name(JobState s) {
  switch (s) {
    case JobState::kPending: return "pending";
    case JobState::kRunning: return "running";
    case JobState::kCheckpointing: return "checkpointing";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace tessera
