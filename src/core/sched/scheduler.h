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

// How pending jobs are ordered. kFairShare is Tessera's policy; the others reproduce baselines in
// the same engine (docs/scheduling.md, docs/simulator.md).
enum class JobOrder : uint8_t {
  kFairShare,     // priority tiers, hierarchical fair share, then per-user usage, age
  kFifo,          // submit time
  kMultifactor,   // Slurm's multifactor priority: age + fair share + job size + class (QOS)
  kLeastAttained, // Tiresias' discretised 2D-LAS: GPU-seconds attained, in levels, FIFO inside one
  kDrf,           // dominant-resource fairness over leaf queues (GPU, CPU, memory)
};
const char* job_order_name(JobOrder o);

struct MultifactorWeights {  // Slurm's PriorityWeight* (integers, as in slurm.conf)
  int64_t age = 1000, fairshare = 10000, job_size = 1000, qos = 2000;
  Duration max_age = 7 * 24 * 3600;  // PriorityMaxAge: the age factor saturates here
};

// How a held reservation (Snapshot::reservation) orders its holder in the next cycles.
enum class ReservationHold : uint8_t {
  kFromMade,  // from when it is made: the holder goes before every job of its class or below not ahead of it then
  kAtDue,     // only once its start time has come (before that the order alone decides)
  kOff,       // never: each cycle's order alone decides which job reserves (classic EASY)
};
// Lower-case name for configs: made, due, off.
const char* reservation_hold_name(ReservationHold h);

struct SchedulerConfig {
  JobOrder order = JobOrder::kFairShare;
  bool strict_order = false;   // stop at the first job that does not fit (head-of-line blocking)
  bool preemption = true;      // priority preemption (kLeastAttained: by attained-service level)
  bool reclaim = true;         // guarantee owners reclaim from borrowers
  MultifactorWeights multifactor;
  // Inside a leaf queue (fair-share order), jobs of one priority class go by attained-service level
  // (las_thresholds_gpu_s), fewest GPU-seconds first, and a waiting job may preempt a job of its own
  // queue and class that has attained a higher level (subject to min_runtime and
  // preemption_protection): short jobs are not stuck behind a team's long ones, and other teams'
  // shares are untouched.
  bool in_queue_las = false;
  // kLeastAttained: level k holds jobs with attained GPU-seconds below thresholds[k] (ascending).
  std::vector<int64_t> las_thresholds_gpu_s = {3600, 36000};
  std::string policy = "tessera";             // placement policy name
  std::vector<PriorityClass> priority_classes = priority_classes_default();
  std::map<std::string, std::string> gpu_class;  // GPU model -> quota class (default: model name)
  // The quota class of a GPU model: gpu_class[model], or the model's name.
  std::string model_class(const std::string& model) const {
    auto it = gpu_class.find(model);
    return it == gpu_class.end() ? model : it->second;
  }
  Duration usage_half_life = 7 * 24 * 3600;    // decay of historical usage for fair share
  Duration reclaim_grace = 300;                // owner gets borrowed capacity back within this
  Duration preemption_protection = 600;        // a job preempted recently is not preempted again
  int max_preemptions_per_cycle = 16;
  // Victim searches that may find nothing in one cycle before later jobs stop searching until the
  // next cycle (each search may try the placement engine once per candidate victim).
  int max_victim_searches_per_cycle = 64;
  bool backfill = true;                        // EASY backfill behind reservations (docs/scheduling.md)
  // How long a backfill reservation passed back in the next Snapshot holds against jobs that were not
  // ahead of its holder when it was made (docs/scheduling.md, "a reservation once made holds").
  ReservationHold reservation_hold = ReservationHold::kFromMade;
  // A held reservation whose start has slipped this long past what was first promised (running jobs
  // overran their estimates) no longer holds: the order alone decides again, so one head cannot keep
  // its nodes draining for as long as the estimates stay wrong. 0: no bound.
  Duration reservation_slip = 0;
  // Runtime assumed for a running or candidate job with no expected_runtime, max_runtime or learned
  // estimate (like a partition's default time limit); used only for reservations and backfill.
  Duration default_runtime = 24 * 3600;
  bool dynamic_mig = true;                     // plan MIG layout changes for idle GPUs
  MigPlannerConfig mig;                        // reconfigure cost, hysteresis, changes per cycle
  int max_scored_nodes = 0;                    // see EngineOptions
  PoolRules pool_rules;                        // which pools a job may use (core/pool.h)
  // The cluster can grow (autoscaling, core/autoscale.h): a gang that prefers one node and fits on
  // one of the cluster's nodes waits for room on one node (which autoscaling adds) instead of being
  // spread over fragments, which slows it down for as long as it runs.
  bool elastic_capacity = false;
  // A gang that prefers one node and fits on one waits up to this long (since its submission or last
  // stop) for room on one node before it may be spread over several (Slurm's --switches=N@max-time
  // at node level): a spread gang runs slower for as long as it runs. 0: spread at once.
  Duration topology_wait = 0;
  // Defragmenting moves: a gang its queue is owed (within its guarantee) that reclaiming every
  // borrowed GPU still cannot place may move checkpointing jobs out of its way, to free GPUs elsewhere
  // that they fit on now (checkpoint, then restart there at once: PreemptDecision::move_to). Only
  // jobs of its class or lower, whole GPUs on one node, outside preemption_protection; at most
  // max_moves_per_cycle of them per cycle. Needs reclaim.
  bool defragment = true;
  int max_moves_per_cycle = 8;
  // Gathering spread gangs: a running gang that prefers one node (topology preferred at node level)
  // but runs over several (spread after topology_wait, or restarted so after a preemption) runs
  // slower for as long as it runs. Once one node has room for all of it, left idle after the cycle's
  // pending jobs were tried and off the backfill reservation's nodes, it checkpoints and restarts
  // there (a move, PreemptDecision::move_to). Only jobs that checkpoint, of whole GPUs, outside
  // preemption_protection since their last start or stop; counts in max_moves_per_cycle.
  bool gather_spread = true;
  // Victim order inside a priority class (priority, reclaim and in-queue least attained service
  // alike): the job that has attained the least service (GPU-seconds) first, then the least lost
  // work. Off: least lost work alone. Keeps long-served jobs running (a borrower's week-long job is
  // otherwise reclaimed as often as its newest), at the price of restarting shorter ones.
  bool victims_least_attained = false;
  uint64_t seed = 0;
};

// A backfill reservation: its holder is due to start at `start` on the room it was promised. The
// scheduler returns the one it holds (Decisions::reservation) and the caller passes it back in the
// next Snapshot, so that a reservation, once made, holds: its holder is tried before every job of its
// class or below that was not ahead of it when it was made, whatever their order became since. Jobs
// that were ahead (`ahead`: still pending, ordered before it; sorted by id) keep their place, e.g. one
// whose victims are leaving for it. A higher class still goes first.
struct HeldReservation {
  JobId job;
  Time start = 0;
  std::vector<JobId> ahead;
  // The start first promised to this holder (kept while the same job holds it, as `start` slips
  // when running jobs overrun their estimates); -1: `start`. The hold lapses once the promise is
  // more than SchedulerConfig::reservation_slip late.
  Time promised = -1;
  bool operator==(const HeldReservation&) const = default;
};

struct Snapshot {
  const ClusterState* cluster = nullptr;   // with running jobs' placements applied
  const QueueTree* queues = nullptr;
  std::vector<Job> jobs;                   // pending and running (others ignored)
  std::vector<QueueLoad> history;          // per queue: decayed_usage (allocated/demand are derived)
  std::map<GpuRef, Time> mig_last_changed;  // when each GPU's MIG mode/layout last changed
  const RuntimeHistory* runtimes = nullptr; // learned runtimes of finished jobs (optional)
  std::optional<HeldReservation> reservation;  // the previous cycle's Decisions::reservation
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
  // A defragmenting move (SchedulerConfig::defragment): the victim restarts on this placement once it
  // has left (the caller keeps it in Job::move_to); empty for every other preemption.
  std::vector<TaskPlacement> move_to;
};

struct MigReconfigDecision {
  GpuRef gpu;
  bool enable_mig = true;           // false: back to a whole GPU (layout empty)
  std::vector<MigInstance> layout;  // the new layout (all instances idle, explicit starts)
  std::string reason;
  Time ready_at = 0;                // the GPU is out of service until then (reconfigure cost)
};

// Why a pending job waits, as a category programs can act on (the reason text is for people).
enum class WaitCategory : uint8_t {
  kOther,             // none of the below (e.g. an internal error)
  kInvalid,           // its queue or priority class is unknown: it never starts as submitted
  kOrder,             // strict order: a job ahead of it did not start
  kReservation,       // backfill: starting now would delay the reserved head job
  kQuota,             // its queue's limit, or a guarantee owed to another queue
  kPreempting,        // jobs preempted for it are checkpointing and leaving
  kMigReconfiguring,  // waits for GPUs to change MIG mode or layout
  kTopology,          // room exists but not inside the topology domain it requires
  kCapacity,          // no room on the nodes (now, or at all with the nodes up)
};
// Lower-case name for APIs and logs: other, invalid, order, reservation, quota, preempting,
// mig_reconfiguring, topology, capacity.
const char* wait_category_name(WaitCategory c);

struct PendingInfo {
  JobId job;
  std::string reason;          // what a user can act on
  WaitCategory category = WaitCategory::kOther;
  int queue_position = 0;      // 1-based among pending jobs of its leaf queue
  int overall_position = 0;    // 1-based in the cycle's global order
  std::optional<Time> estimated_start;
  bool reserved = false;       // holds a backfill reservation
  // Waits because no node has room for it (now, or at all with the nodes up), rather than for a
  // quota, an order or a reservation: the demand autoscaling adds capacity for (core/autoscale.h).
  bool short_of_room = false;
  // A moved job whose new GPUs are still held by jobs leaving: its move (Job::move_to) stands and it
  // starts there once they have left; appliers keep the move instead of dropping it.
  bool awaits_move = false;
};

struct Decisions {
  std::vector<StartDecision> start;
  std::vector<PreemptDecision> preempt;
  std::vector<MigReconfigDecision> reconfigure_mig;
  std::vector<PendingInfo> pending;  // every pending job not started, in overall order
  std::optional<HeldReservation> reservation;  // the backfill reservation held after this cycle
};

// Named configurations: "tessera" (the default config), and the baselines "fifo-gang" (strict gang
// FIFO, first fit, no preemption, no backfill), "slurm" (multifactor priority, EASY backfill, no
// preemption or borrowing model), "tiresias" (2D-LAS with preemption, no backfill), "drf"
// (dominant-resource fairness, no backfill, no preemption). Unknown names: error listing the known.
Result<SchedulerConfig> scheduler_preset(const std::string& name);
std::vector<std::string> scheduler_preset_names();

class Scheduler {
 public:
  static Result<std::unique_ptr<Scheduler>> create(SchedulerConfig config);
  Decisions cycle(const Snapshot& snapshot, Time now) const;
  // The same cycle with the shortcuts that skip work without changing a decision turned off (every
  // scan walks every job): the reference that tests compare cycle() with. Slower; same decisions.
  Decisions cycle_reference(const Snapshot& snapshot, Time now) const;
  const SchedulerConfig& config() const { return config_; }

 private:
  Decisions run(const Snapshot& snapshot, Time now, bool reference) const;
  explicit Scheduler(SchedulerConfig c) : config_(std::move(c)) {}
  SchedulerConfig config_;
  std::unique_ptr<ScoringPolicy> policy_;
};

}  // namespace tessera
