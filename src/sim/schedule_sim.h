// Timed scheduling scenarios (docs/scenarios.md): a cluster, queues, priority classes, jobs that
// arrive and run for a given time, and expectations about who runs, waits (and why) or is
// preempted at given times. run_schedule_scenario drives the core Scheduler through every event
// (arrival, completion, checkpoint-and-exit, expectation time) and checks cluster invariants after
// each. Single-threaded.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/sched/job.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"
#include "core/status.h"

namespace tessera::sim {

struct SimJobSpec {
  std::string name, queue, user = "user", priority_class = "research";
  Time at = 0;
  Duration duration = 0;  // work the job needs (seconds of running)
  Gang gang;
  Duration expected_runtime = 0;
  CheckpointInfo checkpoint;
};

struct Expectation {
  enum class Kind { kRunning, kPending, kPreempted, kNotPreempted, kFinished };
  Time at = 0;
  Kind kind = Kind::kRunning;
  std::vector<std::string> jobs;
  std::string reason_contains;  // kPending
  int queue_position = 0;       // kPending, 0 = not checked
  std::string text;             // as written, for messages
};

struct ScheduleScenario {
  std::string name;
  std::vector<std::string> levels;
  std::vector<NodeSpec> nodes;
  std::vector<QueueSpec> queues;
  SchedulerConfig config;
  Duration cycle_interval = 60;  // while jobs wait, a cycle runs at least this often
  std::vector<SimJobSpec> jobs;
  std::vector<Expectation> expect;
};

struct ScheduleRunResult {
  std::vector<std::string> failures;  // unmet expectations and broken invariants
  std::vector<std::string> log;       // one line per event
  int cycles = 0;
  bool ok() const { return failures.empty(); }
};

// Parses the YAML form; errors name the field (e.g. "jobs[2].gpus: must be an integer").
Result<ScheduleScenario> parse_schedule_scenario(const std::string& yaml_text);
Result<ScheduleRunResult> run_schedule_scenario(const ScheduleScenario& s);

}  // namespace tessera::sim
