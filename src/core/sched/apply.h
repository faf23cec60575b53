// Applying the scheduler's decisions: the one place where a Decisions value (core/sched/scheduler.h)
// changes a ClusterState and the jobs it concerns, and where a job's own transitions happen: a start
// (state, placement, started, checkpoint bookkeeping, the move it was held for), a checkpoint request
// (evict_by, the GPUs held for a move), leaving (released, back to pending, last_preempted,
// preemptions) and ending for good. The controller (server/controller_cycle.cc,
// controller_lifecycle.cc), the simulator (sim/sim_run.cc) and the scenario runner
// (sim/schedule_sim_run.cc) call these functions; each keeps its own side effects (the controller
// writes the store and events and tells agents; the simulators advance time, account and log) and
// reads what changed from the value returned.
//
// Ownership: nothing here keeps state. The caller owns the ClusterState and the jobs, and lends them
// for the call; JobLookup hands out a caller's job by id. Results are values (copies of what changed).
// Thread-safety: none needed or given: call from the thread that owns the cluster and the jobs.
// Pure: no I/O, threads or clock (time comes in as `now`).
//
// Invariants kept, for every job the functions touch (given a cluster that matches its jobs):
//   - a job is kRunning or kCheckpointing iff it holds its gang in the cluster (at least
//     Gang::required_tasks tasks); a kPending job holds nothing, or only the tasks bound so far by a
//     baseline that binds pods one by one (k8s-default);
//   - Job::placement is exactly what the cluster holds for it, with MIG create/destroy flags cleared
//     once applied; whatever a job gives back is released in the cluster, unless the caller keeps a
//     task held (VacateOptions::keep: its process may still run) and releases it itself later;
//   - evict_by is set when a running job is asked to checkpoint and cleared when it leaves (vacate);
//     move_to is set only by a checkpoint request for a defragmenting move, kept while the job
//     checkpoints and leaves, and cleared when it starts (there or elsewhere), when the next cycle
//     leaves it pending, or when the move is cancelled or the job lost;
//   - a decision that no longer applies (the job changed state, a node stopped taking work, the
//     resources were taken, the GPU is no longer idle and healthy) changes nothing and is returned in
//     ApplyResult::refused with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/sched/job.h"
#include "core/sched/scheduler.h"
#include "core/status.h"

namespace tessera {

// Why a decision, or a transition asked for, was not applied.
enum class Refusal : uint8_t {
  kUnknownJob,         // the caller has no such job (JobLookup returned null)
  kNotPending,         // a start for a job that is no longer pending
  kNodeTakesNoWork,    // a start on a node that takes no new work now (down, cordoned, draining, agent gone)
  kPlacementConflict,  // a start whose placement no longer applies (its resources were taken since)
  kNotRunning,         // a checkpoint request for a job that is not running
  kCannotCheckpoint,   // a checkpoint request for a job that does not checkpoint (it is stopped instead)
  kNotPlaced,          // an eviction of a job that holds nothing (it has left already)
  kGpuNotHealthy,      // a MIG change on a GPU that is unhealthy or reconfiguring already
  kMigLayoutRejected,  // a MIG change the cluster refuses (the GPU holds something, or the layout breaks a rule)
};
// Lower-case name for logs: unknown_job, not_pending, node_takes_no_work, placement_conflict,
// not_running, cannot_checkpoint, not_placed, gpu_not_healthy, mig_layout_rejected.
const char* refusal_name(Refusal r);

enum class DecisionKind : uint8_t { kStart, kPreempt, kMigReconfigure };

// When a job that must leave now (an eviction, or a checkpoint request for a job that cannot
// checkpoint) gives its GPUs back.
enum class LeaveMode : uint8_t {
  kAtOnce,    // apply_decisions vacates it (PreemptEffect::kLeft, with what it gave back)
  kByCaller,  // it keeps them; the caller calls vacate() when it models the job leaving (kToLeave)
};
// What Job::started is set to when a run starts.
enum class StartClock : uint8_t {
  kNow,               // the time it got its GPUs
  kAfterRestartCost,  // after a preemption: now + checkpoint.restart_cost (when work resumes)
};
// What a start does to Job::checkpoint.last.
enum class CheckpointOnStart : uint8_t {
  kKeep,       // the caller learns checkpoints elsewhere (the controller: from the agents' acks)
  kFromStart,  // a job that checkpoints counts its (re)start as its last checkpoint
};

// How a caller applies decisions. Each caller builds its own (server: controller_apply_options,
// sim: simulator_apply_options, scenario_apply_options) and tests compare them.
struct ApplyOptions {
  LeaveMode leave = LeaveMode::kAtOnce;
  StartClock started = StartClock::kNow;
  CheckpointOnStart checkpoint_on_start = CheckpointOnStart::kKeep;
  // Whether a node takes new work now; null: Node::schedulable.
  std::function<bool(NodeId)> takes_work;
  // LeaveMode::kAtOnce: per task of a job leaving, whether it stays held in the cluster (its process
  // may still run; the caller releases it when it is gone). Null: none stays.
  std::function<std::vector<bool>(const Job&)> keep_held;
};

// A task that left its job but still holds its resources in the cluster (VacateOptions::keep).
struct KeptTask {
  size_t task = 0;
  TaskPlacement placement;
};

// What a job gave back when it left or ended.
struct Vacated {
  JobId job;
  JobState was = JobState::kPending;     // its state before
  std::vector<TaskPlacement> placement;  // everything it held (released, except `kept`)
  std::vector<KeptTask> kept;            // still held in the cluster: the caller releases them
  int64_t milli = 0;                     // milli-GPU it held: milli_held(placement)
  Status released;                       // a release the cluster refused (a broken invariant)
};

struct VacateOptions {
  bool checkpointed = false;  // it saved a checkpoint as it left: checkpoint.last = now
  bool drop_move = false;     // GPUs held for a move are given up (a lost job restarts wherever it fits)
  std::vector<bool> keep;     // per task: stays held in the cluster (Vacated::kept); missing = released
};

// ---- One job's transitions ----------------------------------------------------------------------

// kRunning -> kCheckpointing: asked to save and leave by `evict_by`; `move_to` (a defragmenting
// move) are the GPUs it restarts on once it has left. Refused (nothing changes) when the job is not
// running (kNotRunning) or does not checkpoint (kCannotCheckpoint: stop it with vacate instead).
std::optional<Refusal> request_checkpoint(Job& job, Time evict_by, std::vector<TaskPlacement> move_to = {});

// The job leaves its GPUs and waits again (preempted, drained, lost, its checkpoint done): its
// placement is released (except the tasks kept), state kPending, last_preempted = now,
// preemptions + 1, evict_by = -1; move_to stays unless drop_move (a moved job restarts there).
Vacated vacate(Job& job, ClusterState& cluster, Time now, const VacateOptions& options = {});

// The job ends for good in `final_state` (succeeded, failed, cancelled): its placement is released
// (except the tasks kept, as for vacate).
Vacated end_job(Job& job, ClusterState& cluster, JobState final_state, const std::vector<bool>& keep = {});

// The GPUs held for a move are given up (a node or GPU there failed or stopped taking work); true
// when the job had a move.
bool cancel_move(Job& job);

// ---- A cycle's decisions ------------------------------------------------------------------------

struct StartedJob {
  size_t decision = 0;                   // index in Decisions::start
  JobId job;
  std::vector<TaskPlacement> placement;  // the tasks applied now (MIG flags cleared)
  bool running = false;    // its gang is complete: kRunning (false: tasks bound, the gang still waits)
  bool off_move = false;   // it was held GPUs for a move and started elsewhere
};

enum class PreemptEffect : uint8_t {
  kCheckpointRequested,  // kRunning -> kCheckpointing (evict_by, move_to)
  kLeft,                 // left now (LeaveMode::kAtOnce): `vacated` says what it gave back
  kToLeave,              // must leave now (LeaveMode::kByCaller): unchanged until the caller vacates it
};

struct PreemptedJob {
  size_t decision = 0;  // index in Decisions::preempt
  JobId job, for_job;
  PreemptPhase phase = PreemptPhase::kRequestCheckpoint;
  PreemptEffect effect = PreemptEffect::kCheckpointRequested;
  JobState was = JobState::kRunning;  // its state before
  Time evict_by = 0;
  bool move = false;    // a defragmenting move (Job::move_to recorded)
  std::string reason;
  Vacated vacated;      // kLeft
};

struct MigChange {
  size_t decision = 0;  // index in Decisions::reconfigure_mig (layout, reason)
  GpuRef gpu;
  bool enable_mig = true;
  Time ready_at = 0;    // max(decision's ready_at, now): kReconfiguring until the caller marks it ready
};

struct Refused {
  DecisionKind decision = DecisionKind::kStart;
  size_t index = 0;     // in its Decisions vector
  Refusal reason = Refusal::kUnknownJob;
  JobId job;            // starts and preemptions
  NodeId node;          // kNodeTakesNoWork: the node
  GpuRef gpu;           // MIG changes
  std::string detail;   // the cluster's message, when it refused
};

// What apply_decisions changed, in the order applied: preemptions, MIG changes, starts, then the
// moves given up by jobs still pending.
struct ApplyResult {
  std::vector<PreemptedJob> preempted;
  std::vector<MigChange> reconfigured;
  std::vector<StartedJob> started;
  std::vector<JobId> moves_dropped;  // moved jobs that did not restart on their held GPUs this cycle
  std::vector<Refused> refused;
};

using JobLookup = std::function<Job*(JobId)>;

// Applies one cycle's decisions at `now`:
//   1. preemptions, in order: kRequestCheckpoint of a running job that checkpoints -> kCheckpointing
//      (evict_by, move_to); of one that does not, and kEvict of a running or checkpointing job ->
//      leaves now (options.leave);
//   2. MIG changes of healthy GPUs: the new layout, kReconfiguring until the caller marks it ready;
//   3. starts of pending jobs whose nodes take work and whose placement still applies (all or
//      nothing): placement recorded, move_to cleared, and once the gang is complete kRunning with
//      started and checkpoint bookkeeping (options);
//   4. pending jobs (Decisions::pending) that kept GPUs held for a move give them up.
ApplyResult apply_decisions(const Decisions& d, ClusterState& cluster, const JobLookup& jobs, Time now,
                            const ApplyOptions& options = {});

}  // namespace tessera
