// The controller's record of one job: the spec as submitted, the core's view (Job), ownership,
// attempts, per-task reports from agents, and how it ended. Its JSON form is what the store keeps
// (record_to_json / record_from_json) and what the API shows (record_to_api). Value types; the
// functions are pure.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/job_spec.h"
#include "server/agent_protocol.h"
#include "server/store.h"
#include "core/cluster.h"
#include "core/sched/job.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"

namespace tessera::server {

// Why a pending job is not put before the scheduler this cycle (besides the scheduler's own reasons):
// its workflow gates. Shown as the job's `wait` (job_gate_name) with a reason for people.
enum class JobGate : uint8_t { kHeld, kBeginTime, kDependency, kDependencyNeverSatisfied, kArrayTaskLimit, kBackoff };
const char* job_gate_name(JobGate g);  // "held", "begin_time", "dependency", "dependency_never_satisfied", ...
struct GateInfo {
  JobGate gate = JobGate::kHeld;
  std::string reason;
};

// Why a placed job was asked to stop: the scheduler (preemption, moves, spot), its user (requeue), or
// the operator stopping its node or the cluster (a planned stop). Only preemption counts as one;
// the others end the attempt as interrupted and it resumes without a restart counted.
enum class StopCause : uint8_t { kPreempt, kRequeue, kPlannedStop };
const char* stop_cause_name(StopCause c);  // "preempt", "requeue", "planned_stop"

// Local time for people: "2026-12-24 18:00:00 CET", and with `now` a relative part "(in 2h 5m)" or
// "(3m ago)" (core's duration_text).
std::string local_time_text(int64_t t);
std::string local_time_text(int64_t t, int64_t now);

// One task of the current attempt, as its agent reports it.
struct TaskRun {
  std::optional<ReportedState> state;  // what its agent last reported; none = not reported yet
  int exit_code = 0;
  int64_t offered_beat = -1;  // the node's heartbeat whose answer first listed it; -1 = not yet
  bool recovered = false;     // loaded after a controller restart and not yet confirmed by its agent
  std::string checkpoint;     // the last checkpoint path this task's agent acknowledged this attempt
  bool answered_request = false;  // that checkpoint answered the controller's request (not a periodic one)
  int64_t saves = 0;          // checkpoints its agent timed (request to .ack), as last reported
  std::string message;        // its agent's word on why it failed (out of memory, the runtime's error)
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
  int restarts = 0;           // requeues after losing a node or a task (restart policy)
  Time not_before = -1;       // pending: restart backoff, not started before this time
  std::string resume_from;    // last acknowledged checkpoint (TESSERA_RESUME_FROM); empty = none
  int master_port = 0;        // rendezvous port on task 0's node, reported by its agent; 0 = not yet
  std::vector<std::string> last_nodes;  // node of each task in the latest attempt (kept after it ends: logs)
  int64_t checkpoint_cost_ms = -1;  // measured request-to-.ack time (smoothed); -1 = not measured yet
  // Workflow (stored): the array it belongs to, and its hold.
  int64_t array_job = 0;      // the array job id (its first element's id); 0 = not an array element
  int32_t array_index = -1;   // its index in the array; -1 = not an element
  bool held = false;          // pending until released
  std::string held_by;        // who held it (a user hold: its owner or an admin; an admin hold: admins)
  bool admin_hold = false;    // held by an admin for someone else: only an admin releases it
  StopCause stop_cause = StopCause::kPreempt;  // why it is checkpointing (when it is)
  std::string stop_by;        // who asked for a requeue or planned stop
  // The latest signal its user sent (`cancel --signal`): agents deliver each seq once per task.
  int64_t signal_seq = 0;
  std::string signal_name;    // "SIGUSR1"
  std::optional<GateInfo> gate;  // pending: the workflow gate it waits at, from the last look (not stored)
  std::vector<TaskRun> tasks; // per placed task of the current attempt (not stored)
  // A task of a gang on several nodes failed: its verdict waits until this (monotonic) time, since
  // peers fail when one of their nodes dies, and a node that goes NotReady meanwhile makes the job
  // lost (restarted) instead of failed. Unset: no verdict pending (not stored).
  std::optional<std::chrono::steady_clock::time_point> fail_verdict_at;
  // Measured use of the current attempt's GPUs, from agents' utilisation reports (not stored):
  // sums of utilisation% × milli-GPU × ms, and of milli-GPU × ms sampled.
  int64_t util_weighted = 0, util_sampled = 0;
  std::optional<PendingInfo> pending;  // why it waits, from the last cycle (not stored)
  // Wall-clock times in unix milliseconds (the API's *_ms; -1 = not yet): sub-second latencies.
  int64_t submitted_ms = -1, started_ms = -1, finished_ms = -1;
  // When the current attempt started, until its first task is reported running (not stored).
  std::optional<std::chrono::steady_clock::time_point> start_sent;
};

// Every job by id. Ids are dense (1, 2, ...) and never reused, so a vector indexed by id serves
// lookups in O(1) and walks in id order. Owned by the controller's state thread.
class JobTable {
 public:
  JobRecord* find(int64_t id) {
    return id > 0 && size_t(id) < slots_.size() ? slots_[size_t(id)].get() : nullptr;
  }
  const JobRecord* find(int64_t id) const { return const_cast<JobTable*>(this)->find(id); }
  JobRecord& at(int64_t id) { return *find(id); }
  const JobRecord& at(int64_t id) const { return *find(id); }
  void insert(JobRecord r) {
    const size_t id = size_t(r.id);
    if (slots_.size() <= id) slots_.resize(id + 1);
    if (!slots_[id]) ++count_;
    slots_[id] = std::make_unique<JobRecord>(std::move(r));
  }
  void erase(int64_t id) {
    if (find(id)) slots_[size_t(id)].reset(), --count_;
  }
  size_t size() const { return count_; }
  // fn(JobRecord&) for every job with id > after, in id order, until fn returns false.
  template <class F>
  void walk(int64_t after, F&& fn) {
    for (size_t id = size_t(std::max<int64_t>(after, 0)) + 1; id < slots_.size(); ++id)
      if (slots_[id] && !fn(*slots_[id])) return;
  }

 private:
  std::vector<std::unique_ptr<JobRecord>> slots_;
  size_t count_ = 0;
};

// Storage form (everything needed to rebuild the record; node names, not ids).
nlohmann::json record_to_json(const JobRecord& r, const ClusterState& cluster);
// The same with the name of each placed task's node given (placement_nodes[i] for task i).
nlohmann::json record_to_json(const JobRecord& r, const std::vector<std::string>& placement_nodes);
// r copied with its placement's node names, to be encoded in storage form later on another thread
// (the store's writer) by the function returned.
std::function<std::string()> stored_record_encoder(const JobRecord& r, const ClusterState& cluster);
Result<JobRecord> record_from_json(const nlohmann::json& j, const QueueTree& tree, const ClusterState& cluster);

// How people name the job: "12", or "12_3" for element 3 of the array job 12.
std::string job_ref(const JobRecord& r);

// API form: the summary fields of `GET /jobs`; with `detail`, also spec, placement, pending and
// counters (GET /jobs/{id} adds events and attempts).
nlohmann::json record_to_api(const JobRecord& r, const ClusterState& cluster, const PendingInfo* pending, bool detail = true);
nlohmann::json placement_json(const JobRecord& r, const ClusterState& cluster);
// A job's attempts (GET /jobs/{id}'s `attempts`) from its events in seq order: a `started` event
// (detail: attempt, placement) opens one, the next event that ends one (ends_attempt) closes it and
// is its outcome. Each: {"attempt", "nodes" (each task's node), "start", "start_ms", "end", "end_ms",
// "outcome" (the ending event's kind), "reason"}; the last four are null while it runs. Times are the
// events' (seconds and unix milliseconds).
nlohmann::json attempts_json(const std::vector<EventRow>& events);
// What an agent needs to start task `task` of the current attempt.
nlohmann::json task_assignment_json(const JobRecord& r, int task, const ClusterState& cluster);

}  // namespace tessera::server
