// Timed scheduling scenarios (docs/scenarios.md): a cluster, queues, a scheduler configuration and
// priority classes, jobs that arrive and run for a given time, timed cluster events (node failures,
// cordon, drain, GPU health), and expectations about who runs, waits (and why, until when), where, or
// is preempted at given times. run_schedule_scenario drives the core Scheduler through every event
// (arrival, completion, time-out, checkpoint-and-exit, MIG layout ready, cluster event, expectation
// time), applies its decisions faithfully (two-phase preemption, MIG layout changes), keeps the
// fair-share usage history and learned runtimes it is fed, and checks the invariants after each event
// (docs/scenarios.md lists them). Single-threaded.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/sched/apply.h"
#include "core/sched/job.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"
#include "core/status.h"

namespace tessera::sim {

struct SimJobSpec {
  std::string name;      // unique in the scenario (expectations name jobs by it)
  std::string job_name;  // the name the scheduler sees (learned runtimes are per user and job_name); default: name
  std::string queue, user = "user", priority_class = "research";
  Time at = 0;
  Duration duration = 0;  // work the job needs (seconds of running)
  Gang gang;
  Duration expected_runtime = 0;
  Duration max_runtime = 0;  // time limit per run (0 = none): stopped, as timed out, this long after it started
  // `checkpoint.last` is `checkpoint: {last_at: T}` (-1 = not given): during the first run the
  // job's checkpoints are at T + k * interval (T only when interval is 0) instead of start + k * interval.
  CheckpointInfo checkpoint;
};

// A timed change to the cluster (`events:`), applied after the completions at its time and before
// the cycle.
struct ClusterEvent {
  enum class Kind { kNodeDown, kNodeUp, kCordon, kUncordon, kDrain, kGpuUnhealthy, kGpuHealthy };
  Time at = 0;
  Kind kind = Kind::kNodeDown;
  std::vector<std::string> nodes;  // node kinds: the nodes; GPU kinds: the GPU's node
  int gpu = -1;                    // GPU kinds: the GPU's index on its node
  std::string text;                // "events[i]", for messages
};

struct Expectation {
  enum class Kind {
    kRunning, kPending, kPreempted, kNotPreempted, kFinished, kTimedOut, kMigGpus, kPreemptions,
    kPlaced,             // the job holds its GPUs and the placement has every property given
    kPreemptionsAtMost,  // at most `count` preemption decisions in (since, at]
    kMigChangesAtMost,   // at most `count` MIG layout changes in (since, at]
  };
  Time at = 0;
  Kind kind = Kind::kRunning;
  std::vector<std::string> jobs;
  std::string reason_contains;          // kPending
  int queue_position = 0;               // kPending, 0 = not checked
  std::optional<Time> estimated_start;  // kPending: PendingInfo::estimated_start must equal it
  std::optional<bool> reserved;         // kPending: PendingInfo::reserved must equal it
  int count = 0;                        // kMigGpus: GPUs in MIG mode; k*AtMost: the bound
  std::vector<int> counts;              // kPreemptions: times each of `jobs` has been preempted so far
  std::vector<std::string> on_node;     // kPlaced: every task is on one of these nodes (empty = not checked)
  std::string in_leaf;                  // kPlaced: every task's node has this domain on its network path
  std::string on_model;                 // kPlaced: every GPU it holds is of this model (canonical name)
  int on_nodes = 0;                     // kPlaced: its tasks span exactly this many nodes (0 = not checked)
  std::vector<int> task_gpus;           // kPlaced: GPUs task i holds, for every task in order (empty = not checked)
  std::optional<Time> since;            // k*AtMost: count only after this time (default: from the start)
  std::string text;                     // as written, for messages
};

struct ScheduleScenario {
  std::string name;
  std::vector<std::string> levels;
  std::vector<NodeSpec> nodes;
  std::vector<QueueSpec> queues;
  std::vector<Pool> pools;  // `pools:` (the built-in "default" pool is always there)
  std::shared_ptr<const GpuCatalog> catalog;  // built-ins plus `gpu_models:` (null = built-ins)
  SchedulerConfig config;        // `config:` (from a preset), `priority_classes:`, `policy:`
  Duration cycle_interval = 60;  // while jobs wait, a cycle runs at least this often
  std::map<std::string, double> usage;  // leaf queue -> GPU-seconds used just before t=0 (history seed)
  bool check_guarantees = true;  // the guarantee-restored-within-grace invariant (when config.reclaim)
  std::vector<SimJobSpec> jobs;
  std::vector<ClusterEvent> events;  // sorted by time (stable: same-time events in file order)
  std::vector<Expectation> expect;
};

struct ScheduleRunResult {
  std::vector<std::string> failures;  // unmet expectations and broken invariants
  std::vector<std::string> log;       // one line per event
  int cycles = 0;
  int preemptions = 0;  // jobs asked to stop (each decision that stopped a running job)
  int mig_changes = 0;  // MIG mode/layout changes applied
  int lost = 0;         // runs lost to a node going down or a GPU going unhealthy
  bool ok() const { return failures.empty(); }
};

// Parses the YAML form; errors name the field and say why (e.g. "jobs[2].gpus: wrong type",
// "config.order: unknown \"xyz\"; expected one of fair-share, fifo, ...",
// "jobs[2].expected_runtme: unknown field; expected one of ...").
Result<ScheduleScenario> parse_schedule_scenario(const std::string& yaml_text);
Result<ScheduleRunResult> run_schedule_scenario(const ScheduleScenario& s);

// How the scenario runner applies the scheduler's decisions (core/sched/apply.h): a job that must
// leave now keeps its GPUs until the step settles (then it is vacated, as by the controller, before
// the next cycle at the same time); a restarted run counts as started once its restart cost has
// passed, and as checkpointed then.
ApplyOptions scenario_apply_options();

}  // namespace tessera::sim
