// Hand-made simulator workloads for tests: a job of `tasks` x `gpus` whole GPUs needing `work`
// seconds, in team `team` (its user too), and a workload listing the teams of its jobs.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim/workload.h"

namespace tessera::sim::testing {

inline WorkloadJob job(const std::string& name, Time at, int tasks, int gpus, Duration work,
                       const std::string& team = "default") {
  WorkloadJob j;
  j.name = name;
  j.team = team;
  j.user = team;
  j.arrival = at;
  j.gang.tasks = tasks;
  j.gang.task.gpu_count = gpus;
  j.gang.task.cpu = MilliCpu(1000);
  j.gang.task.memory = MiB(1024);
  j.work = work;
  return j;
}

inline Workload workload(std::vector<WorkloadJob> jobs) {
  Workload w;
  w.source = "test";
  for (const WorkloadJob& j : jobs) w.teams.push_back(j.team);
  std::sort(w.teams.begin(), w.teams.end());
  w.teams.erase(std::unique(w.teams.begin(), w.teams.end()), w.teams.end());
  w.jobs = std::move(jobs);
  return w;
}

}  // namespace tessera::sim::testing
