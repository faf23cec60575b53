// The scheduling cycle: given a snapshot of the cluster, queues and jobs at time `now`, decide
// what starts (gang placements, all-or-nothing), what is preempted (checkpoint first, then evict),
// which MIG layouts change, and why every pending job waits (with its positions and, when known,
// an estimated start). Pure and deterministic: the same snapshot and time give the same decisions.
// Scheduler holds configuration only; cycle() does not modify the snapshot. Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/placement/engine.h"
#include "core/placement/policy.h"
#include "core/sched/job.h"
#include "core/sched/mig_planner.h"
#include "core/sched/runtime_history.h"
#include "core/sched/queues.h"

namespace tessera {

struct SchedulerConfig {
  std::string policy = "tessera";             // placement policy name
  std::vector<PriorityClass> priority_classes = priority_classes_default();
  std::map<std::string, std::string> gpu_class;  // GPU model -> quota class (default: model name)
  Duration usage_half_life = 7 * 24 * 3600;    // decay of historical usage for fair share
  Duration reclaim_grace = 300;                // owner gets borrowed capacity back within this
  Duration preemption_protection = 600;        // a job preempted recently is not preempted again
  int max_preemptions_per_cycle = 16;
  bool backfill = true;                        // EASY backfill behind reservations (docs/scheduling.md)
  // Runtime assumed for a running or candidate job with no expected_runtime, max_runtime or learned
  // estimate (like a partition's default time limit); used only for reservations and backfill.
  Duration default_runtime = 24 * 3600;
  bool dynamic_mig = true;                     // plan MIG layout changes for idle GPUs
  MigPlannerConfig mig;                        // reconfigure cost, hysteresis, changes per cycle
  int max_scored_nodes = 0;                    // see EngineOptions
  uint64_t seed = 0;
};

struct Snapshot {
  const ClusterState* cluster = nullptr;   // with running jobs' placements applied
  const QueueTree* queues = nullptr;
  std::vector<Job> jobs;                   // pending and running (others ignored)
  std::vector<QueueLoad> history;          // per queue: decayed_usage (allocated/demand are derived)
  std::map<GpuRef, Time> mig_last_changed;  // when each GPU's MIG mode/layout last changed
  const RuntimeHistory* runtimes = nullptr; // learned runtimes of finished jobs (optional)
};

struct StartDecision {
  JobId job;
  std::vector<TaskPlacement> placement;
};

enum class PreemptPhase : uint8_t { kRequestCheckpoint, kEvict };
struct PreemptDecision {
  JobId victim;
  JobId for_job;              // the job that needs the room (invalid for pure reclaim)
  PreemptPhase phase = PreemptPhase::kRequestCheckpoint;
  std::string reason;         // e.g. "reclaim: queue team-a takes back its guarantee"
  // kRequestCheckpoint: the caller evicts the job at this time if it has not acknowledged and left
  // (its checkpoint grace; for reclaim capped by SchedulerConfig::reclaim_grace). A later cycle at or
  // after it emits the kEvict phase for a job still checkpointing. kEvict: now.
  Time evict_by = 0;
};

struct MigReconfigDecision {
  GpuRef gpu;
  bool enable_mig = true;           // false: back to a whole GPU (layout empty)
  std::vector<MigInstance> layout;  // the new layout (all instances idle, explicit starts)
  std::string reason;
  Time ready_at = 0;                // the GPU is out of service until then (reconfigure cost)
};

struct PendingInfo {
  JobId job;
  std::string reason;          // what a user can act on
  int queue_position = 0;      // 1-based among pending jobs of its leaf queue
  int overall_position = 0;    // 1-based in the cycle's global order
  std::optional<Time> estimated_start;
  bool reserved = false;       // holds a backfill reservation
};

struct Decisions {
  std::vector<StartDecision> start;
  std::vector<PreemptDecision> preempt;
  std::vector<MigReconfigDecision> reconfigure_mig;
  std::vector<PendingInfo> pending;  // every pending job not started, in overall order
};

class Scheduler {
 public:
  static Result<std::unique_ptr<Scheduler>> create(SchedulerConfig config);
  Decisions cycle(const Snapshot& snapshot, Time now) const;
  const SchedulerConfig& config() const { return config_; }

 private:
  explicit Scheduler(SchedulerConfig c) : config_(std::move(c)) {}
  SchedulerConfig config_;
  std::unique_ptr<ScoringPolicy> policy_;
};

}  // namespace tessera
