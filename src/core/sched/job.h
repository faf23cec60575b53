// Jobs as the scheduler sees them: a gang plus who owns it (user, leaf queue), its priority class,
// timing (submitted, expected/max runtime) and checkpoint facts, and its current state.
// Value types; the controller (later) owns the authoritative copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/ids.h"
#include "core/request.h"
#include "core/status.h"

namespace tessera {

using Time = int64_t;      // seconds since an epoch the caller chooses; the core never reads a clock
using Duration = int64_t;  // seconds

// A duration as people read it: "45s", "16m 40s", "23h 58m", "3d 4h" (the server's texts use it too). Reasons
// give times relative to the cycle's time with it: core has no clock or time zone, and the API
// carries the absolute times (estimated_start) for clients to show in local time.
inline std::string duration_text(Duration d) {
  if (d < 0) d = -d;
  auto part = [](Duration v, const char* unit) { return v ? " " + std::to_string(v) + unit : std::string(); };
  if (d < 60) return std::to_string(d) + "s";
  if (d < 3600) return std::to_string(d / 60) + "m" + part(d % 60, "s");
  if (d < 86400) return std::to_string(d / 3600) + "h" + part(d % 3600 / 60, "m");
  return std::to_string(d / 86400) + "d" + part(d % 86400 / 3600, "h");
}

// A priority class. Higher value = more important. Defaults (priority_classes_default()):
//   production-inference 1000: never preempted by lower classes, may preempt anything lower;
//   production-training   500: may preempt research and preemptible;
//   research              100: may preempt preemptible;
//   preemptible             0: may be preempted by any higher class and by quota reclaim.
struct PriorityClass {
  std::string name;
  int value = 0;
  bool preemptible = true;         // may be a victim of higher classes (reclaim applies regardless if borrowing)
  bool can_preempt = true;         // may preempt lower, preemptible classes
  Duration min_runtime = 0;        // protection right after (re)start
};
std::vector<PriorityClass> priority_classes_default();

struct CheckpointInfo {
  Duration interval = 0;        // 0 = the job does not checkpoint
  Time last = -1;               // time of the last completed checkpoint; -1 = none
  Duration save_cost = 60;      // time to write a checkpoint when asked
  Duration restart_cost = 120;  // time to resume from one
  Duration grace = 300;         // how long the scheduler waits for the ack before evicting
};

// kTimeout: stopped by the controller at its time limit (max_runtime), as Slurm's TIMEOUT.
enum class JobState : uint8_t { kPending, kRunning, kCheckpointing, kSucceeded, kFailed, kCancelled, kTimeout };
inline constexpr size_t kJobStates = 7;  // arrays indexed by JobState
const char* job_state_name(JobState s);

struct Job {
  JobId id;
  std::string name;
  std::string user;
  QueueId queue;                 // a leaf queue
  std::string priority_class;    // name in the snapshot's classes
  Gang gang;
  Time submitted = 0;
  Duration expected_runtime = 0;  // user estimate; 0 = unknown
  Duration max_runtime = 0;       // hard cap; 0 = none
  CheckpointInfo checkpoint;
  JobState state = JobState::kPending;
  Time started = -1;              // last (re)start
  Time last_preempted = -1;
  Time evict_by = -1;             // kCheckpointing: evicted at this time if it has not left (from the decision)
  int preemptions = 0;
  int spot_interruptions = 0;     // times a spot reclaim stopped it (PoolRules::spot_max_interruptions)
  int64_t attained_gpu_s = 0;     // GPU-seconds of service received so far (least-attained-service order)
  std::vector<TaskPlacement> placement;  // when running
  // Moved out of the way of an owed gang (PreemptDecision::move_to): while it checkpoints, the
  // scheduler holds these GPUs for it; once pending it restarts on them first in the next cycle if
  // they are still free. The caller sets it from the decision and clears it when the job starts.
  std::vector<TaskPlacement> move_to;
};

// The pool rules as they apply to this job now (Gang::avoid_spot from its interruptions, and
// PoolRules::on_demand_fallback_after_s from how long it has waited): g's pool kinds and
// preferences are set (apply_pool_rules) and g.checkpointable from the job.
void apply_job_pool_rules(Gang& g, const Job& job, const PoolRules& rules, Time now);

}  // namespace tessera
