// The controller's record of one job: the spec as submitted, the core's view (Job), ownership,
// attempts, per-task reports from agents, and how it ended. Its JSON form is what the store keeps
// (record_to_json / record_from_json) and what the API shows (record_to_api). Value types; the
// functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/job_spec.h"
#include "core/cluster.h"
#include "core/sched/job.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"

namespace tessera::server {

// One task of the current attempt, as its agent reports it.
struct TaskRun {
  std::string state;          // "" (not reported yet), running, succeeded, failed, checkpointed, stopped
  int exit_code = 0;
  int64_t offered_beat = -1;  // the node's heartbeat whose answer first listed it; -1 = not yet
  bool recovered = false;     // loaded after a controller restart and not yet confirmed by its agent
};

struct JobRecord {
  int64_t id = 0;
  config::JobSpec spec;
  Job job;                    // the scheduler's view (id, user, queue id, class, gang, times, placement)
  std::string queue_name;     // leaf queue
  std::string idempotency_key;
  int64_t attempt = 0;        // starts so far; agents report tasks per attempt
  Time finished = -1;
  int exit_code = 0;
  std::string end_reason;
  std::vector<TaskRun> tasks; // per placed task of the current attempt (not stored)
};

// Storage form (everything needed to rebuild the record; node names, not ids).
nlohmann::json record_to_json(const JobRecord& r, const ClusterState& cluster);
Result<JobRecord> record_from_json(const nlohmann::json& j, const QueueTree& tree, const ClusterState& cluster);

// API form: the summary fields of `GET /jobs`; with `detail`, also spec, placement, pending and
// counters (GET /jobs/{id} adds events).
nlohmann::json record_to_api(const JobRecord& r, const ClusterState& cluster, const PendingInfo* pending, bool detail = true);
nlohmann::json placement_json(const JobRecord& r, const ClusterState& cluster);
// What an agent needs to start task `task` of the current attempt.
nlohmann::json task_assignment_json(const JobRecord& r, int task, const ClusterState& cluster);

}  // namespace tessera::server
