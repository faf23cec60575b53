// Timed scheduling scenarios (docs/scenarios.md): a cluster, queues, a scheduler configuration and
// priority classes, jobs that arrive and run for a given time, and expectations about who runs, waits
// (and why, until when) or is preempted at given times. run_schedule_scenario drives the core
// Scheduler through every event (arrival, completion, time-out, checkpoint-and-exit, MIG layout
// ready, expectation time), applies its decisions faithfully (two-phase preemption, MIG layout
// changes), keeps the fair-share usage history and learned runtimes it is fed, and checks the
// invariants after each event (docs/scenarios.md lists them). Single-threaded.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
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
  CheckpointInfo checkpoint;
};

struct Expectation {
  enum class Kind { kRunning, kPending, kPreempted, kNotPreempted, kFinished, kTimedOut, kMigGpus, kPreemptions };
  Time at = 0;
  Kind kind = Kind::kRunning;
  std::vector<std::string> jobs;
  std::string reason_contains;          // kPending
  int queue_position = 0;               // kPending, 0 = not checked
  std::optional<Time> estimated_start;  // kPending: PendingInfo::estimated_start must equal it
  std::optional<bool> reserved;         // kPending: PendingInfo::reserved must equal it
  int count = 0;                        // kMigGpus: GPUs in MIG mode
  std::vector<int> counts;              // kPreemptions: times each of `jobs` has been preempted so far
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
  std::vector<Expectation> expect;
};

struct ScheduleRunResult {
  std::vector<std::string> failures;  // unmet expectations and broken invariants
  std::vector<std::string> log;       // one line per event
  int cycles = 0;
  int preemptions = 0;  // jobs asked to stop (each decision that stopped a running job)
  int mig_changes = 0;  // MIG mode/layout changes applied
  bool ok() const { return failures.empty(); }
};

// Parses the YAML form; errors name the field and say why (e.g. "jobs[2].gpus: wrong type",
// "config.order: unknown \"xyz\"; expected one of fair-share, fifo, ...").
Result<ScheduleScenario> parse_schedule_scenario(const std::string& yaml_text);
Result<ScheduleRunResult> run_schedule_scenario(const ScheduleScenario& s);

}  // namespace tessera::sim
