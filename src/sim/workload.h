// Workloads for the time-driven simulator (`tessera sim run --workload SPEC`): jobs that arrive at
// given times, each a gang with the work it must do, how placement slows it down, and how much of
// the GPU it holds is actually useful (for effective utilisation). Loaders:
//   philly:DIR      Microsoft Philly jobs per team, as published with Gavel (one team per VC file),
//                   run time from the measured throughput table (docs/simulator.md);
//   openb:FILE      Alibaba openb pods with creation/deletion times;
//   synthetic:SPEC  a seeded mix of inference services and training jobs (docs/simulator.md).
// Value types; loaders are plain functions, thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/request.h"
#include "core/sched/job.h"
#include "core/status.h"

namespace tessera::sim {

struct WorkloadJob {
  std::string name;
  std::string team;                      // the leaf queue it is submitted to
  std::string user;
  std::string priority_class = "research";
  std::string kind;                      // model or service name, e.g. "ResNet-50 (batch size 64)"
  Time arrival = 0;                      // seconds from the start of the workload
  Gang gang;                             // what it asks for (tasks, GPUs per task, MIG profile, share)
  Duration work = 0;                     // run time when placed well (on one node), seconds
  // Slowdown, in milli (1000 = none), when the gang's tasks span more than one node: a job so placed
  // runs for work * spread_slowdown_milli / 1000 seconds.
  int64_t spread_slowdown_milli = 1000;
  Duration expected_runtime = 0;         // what the user tells the scheduler (0 = nothing)
  CheckpointInfo checkpoint;             // interval 0 = does not checkpoint
  // Useful GPU per task in milli of one whole GPU of the model it runs on (0 = everything it holds is
  // useful). An inference service needing 2 of 7 compute slices is 285: on a whole GPU only 285 of
  // the 1000 it holds count as effective utilisation.
  int64_t useful_milli_per_task = 0;
  bool service = false;                  // an inference service (runs for `work`, then leaves)
};

struct Workload {
  std::string source;                    // the spec it was loaded from
  std::vector<std::string> teams;        // sorted, unique
  std::vector<WorkloadJob> jobs;         // sorted by (arrival, name)
};

// Parses "philly:DIR", "openb:FILE" or "synthetic:SPEC"; errors name the part that is wrong and the
// accepted forms.
Result<Workload> load_workload(const std::string& spec);

}  // namespace tessera::sim
