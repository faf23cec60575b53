// Parts of the controller's state that stand on their own: the cycle's input, a node's
// administrative state, the controller's metrics, utilisation series, tasks still stopping, and the
// state thread's command loop. Internal to src/server (included by controller_state.h only). Owned
// by Controller::State; thread-safety as each type says (only StateLoop and ControllerMetrics are
// touched off the state thread).
#pragma once

#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/sched/runtime_history.h"
#include "core/sched/scheduler.h"
#include "server/agent_protocol.h"

namespace tessera::server {

using Clock = std::chrono::steady_clock;

// What the scheduling thread works on: a copy of everything the cycle reads.
struct CycleInput {
  std::shared_ptr<const Scheduler> scheduler;
  std::shared_ptr<const QueueTree> tree;
  ClusterState cluster;
  std::vector<Job> jobs;
  std::vector<QueueLoad> history;
  std::map<GpuRef, Time> mig_last_changed;
  RuntimeHistory runtimes;
  std::optional<HeldReservation> reservation;
  Time now = 0;
  uint64_t config_generation = 0;
};

// A node's administrative state (the admin's cordon/drain, a spot notice's cordon). Stored and shown
// by name (node_admin_state_name).
enum class NodeAdminState : uint8_t { kReady, kCordoned, kDraining, kDrained };

inline const char* node_admin_state_name(NodeAdminState st) {
  switch (st) {
    case NodeAdminState::kReady: return "ready";
    case NodeAdminState::kCordoned: return "cordoned";
    case NodeAdminState::kDraining: return "draining";
    case NodeAdminState::kDrained: return "drained";
  }
  return "ready";
}

// The state a stored name stands for; anything else (a newer release's name) reads as cordoned, so
// that a node of unknown state takes no new work until an admin resumes it.
inline NodeAdminState parse_node_admin_state(const std::string& name) {
  for (NodeAdminState st : {NodeAdminState::kReady, NodeAdminState::kCordoned, NodeAdminState::kDraining, NodeAdminState::kDrained})
    if (name == node_admin_state_name(st)) return st;
  return NodeAdminState::kCordoned;
}

struct NodeAdmin {
  NodeAdminState state = NodeAdminState::kReady;
  std::string reason;
  Time last_seen = -1;
  int64_t beats = 0;            // heartbeats since this controller started
  // The node's agent, as it registered with this controller process (not stored: agents register
  // again after a controller restart).
  bool registered = false;
  bool agent_ready = false;     // registered and heard from within agent_timeout
  Clock::time_point last_beat{};
  std::string address;          // where its tasks can be reached (MASTER_ADDR)
  int log_port = 0;             // the agent's log server
  std::string log_secret;
  std::string agent_version;
  std::string gpu_source;       // nvml | fake
  std::vector<GpuSample> gpu_stats;  // last reported utilisation per GPU
  // Spot interruption (stored with the node's state): reclaimed at reclaim_at; reclaimed once that
  // time passed (NotReady until its agent registers again). last_notice: the newest notice handled,
  // so an agent that keeps reporting the same notice does not interrupt twice.
  bool interrupted = false, reclaimed = false, notice_cordon = false;
  Time reclaim_at = -1, last_notice = -1;
  bool leaving = false;  // its agent is making a planned stop: no new work until it registers again
};

// The controller's counters and histograms (docs/metrics.md). Updated on the state thread (job
// events, applied decisions) and the cycle thread (cycle latency); the families are thread-safe.
struct ControllerMetrics {
  metrics::Registry registry;
  metrics::HistogramFamily* cycle_seconds = nullptr;
  metrics::HistogramFamily* cycle_decisions = nullptr;
  metrics::CounterFamily* decisions = nullptr;
  metrics::CounterFamily* preemptions = nullptr;
  metrics::CounterFamily* preempted_gpu_hours = nullptr;
  metrics::CounterFamily* lost_gpu_hours = nullptr;
  metrics::CounterFamily* losses = nullptr;
  metrics::CounterFamily* submitted = nullptr;
  metrics::CounterFamily* finished = nullptr;
  metrics::CounterFamily* spot_interruptions = nullptr;
  metrics::HistogramFamily* heartbeat_seconds = nullptr;
  metrics::HistogramFamily* heartbeat_round_trip = nullptr;
  metrics::HistogramFamily* submit_to_start = nullptr;
  metrics::HistogramFamily* start_to_running = nullptr;

  ControllerMetrics() {
    // The names are constants: a bad one is a programming error (the metrics tests render them all).
    auto must = [](auto r) {
      if (!r.ok()) {
        spdlog::critical("metrics: {}", r.error().message);
        std::abort();
      }
      return *r;
    };
    cycle_seconds = must(registry.histogram("tessera_scheduling_cycle_seconds",
                                            "Time the scheduling cycle took to decide (on the cycle thread), seconds.",
                                            {}, metrics::latency_buckets()));
    heartbeat_seconds = must(registry.histogram(
        "tessera_agent_heartbeat_seconds",
        "Time the controller took to answer an agent's heartbeat (its report applied and durable), seconds.", {},
        metrics::latency_buckets()));
    heartbeat_round_trip = must(registry.histogram(
        "tessera_agent_heartbeat_round_trip_seconds",
        "Heartbeat round trip as agents measure it (sent to answered; reported with their next heartbeat), seconds.", {},
        metrics::latency_buckets()));
    std::vector<double> waits = metrics::latency_buckets();
    for (double w : {30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0}) waits.push_back(w);
    submit_to_start = must(registry.histogram("tessera_job_submit_to_start_seconds",
                                              "From a job's submission to its first start decision, seconds.", {}, waits));
    start_to_running = must(registry.histogram(
        "tessera_task_start_to_running_seconds",
        "From a start decision to its agent's first report of the attempt's task, running (or already ended), seconds.", {},
        metrics::latency_buckets()));
    cycle_decisions = must(registry.histogram("tessera_scheduling_cycle_decisions",
                                              "Decisions applied per scheduling cycle (starts + preemptions + MIG changes).",
                                              {}, {0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}));
    decisions = must(registry.counter("tessera_scheduling_decisions_total",
                                      "Scheduling decisions applied, by kind (start, preempt, mig).", {"kind"}));
    for (const char* k : {"mig", "preempt", "start"}) decisions->inc({k}, 0);
    preemptions = must(registry.counter("tessera_preemptions_total",
                                        "Jobs stopped and requeued by preemption (priority, reclaim, drain, deadlines)."));
    preempted_gpu_hours = must(registry.counter("tessera_preempted_gpu_hours_total",
                                                "GPU-hours of attempts that ended by preemption."));
    lost_gpu_hours = must(registry.counter("tessera_lost_gpu_hours_total",
                                           "GPU-hours of attempts that ended lost (node or task gone)."));
    losses = must(registry.counter("tessera_job_losses_total", "Attempts that ended lost (node or task gone)."));
    submitted = must(registry.counter("tessera_jobs_submitted_total", "Jobs submitted, by leaf queue.", {"queue"}));
    finished = must(registry.counter("tessera_jobs_finished_total",
                                     "Jobs that ended, by final state (succeeded, failed, cancelled) and leaf queue.",
                                     {"state", "queue"}));
    spot_interruptions = must(registry.counter(
        "tessera_spot_interruptions_total",
        "Jobs hit by a spot interruption notice, by pool and path (checkpoint within the notice, or requeue).",
        {"pool", "path"}));
  }
};

// One utilisation sample of a GPU model in a pool; used < 0: unknown (no agent reported
// utilisation for any allocated GPU of the series).
struct UtilPoint {
  Time t = 0;
  int64_t allocated = 0, used = -1;
};
struct UtilSeries {
  int64_t total_milli = 0;  // at the latest sample
  std::deque<UtilPoint> points;
};

// Milli-GPU held on a GPU: whole, shares, MIG instances in use (by their compute slices).
inline int64_t gpu_allocated_milli(const Gpu& g) {
  int64_t used = g.whole_held ? 1000 : g.shared_milli.v;
  for (const MigInstance& m : g.mig.instances())
    if (m.in_use) used += mig_milli(*g.model, m.profile_id);
  return std::min<int64_t>(used, 1000);
}

// A task of an ended or requeued attempt whose process its agent has not reported gone yet: its
// resources stay held in the cluster until then (or until its node is NotReady).
struct StoppingTask {
  int64_t job = 0, attempt = 0;
  int task = 0;
  TaskPlacement placement;
};

// The state thread's command queue and the cycle thread's hand-off, with the counters
// wait_for_cycle reads. Its mutexes guard the fields listed under them; the rest belong to the state
// thread.
struct StateLoop {
  std::mutex mu;  // guards commands, stopping
  std::condition_variable cv;
  std::deque<std::function<void(Controller::State&)>> commands;
  bool stopping = false;
  std::thread state_thread, cycle_thread;
  std::mutex cycle_mu;  // guards cycle_input, cycle_stop
  std::condition_variable cycle_cv;
  std::optional<CycleInput> cycle_input;  // set by the state thread, taken by the cycle thread
  bool cycle_stop = false;
  bool cycle_in_flight = false;  // state thread
  Clock::time_point last_cycle_start{}, last_cycle_end{};
  Clock::time_point next_tick{};  // time-driven checks run at most every 100 ms
  std::mutex count_mu;  // guards the cycle counters (wait_for_cycle)
  std::condition_variable count_cv;
  int64_t cycles_launched = 0, cycles_applied = 0;

  // Queues a command for the state thread.
  void post(std::function<void(Controller::State&)> fn) {
    {
      std::lock_guard lock(mu);
      commands.push_back(std::move(fn));
    }
    cv.notify_one();
  }
};

}  // namespace tessera::server
