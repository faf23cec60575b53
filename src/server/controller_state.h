// The controller's state and its helpers, shared by the files that implement Controller
// (controller.cc: start, threads, reload, health; controller_jobs.cc: the job API;
// controller_nodes.cc: nodes and utilisation; controller_agents.cc: the agent protocol;
// controller_tokens.cc: tokens and the event log). Internal to src/server: nothing outside the
// controller's own files includes it. Controller::State is owned by the state thread (controller.h
// says how the threads hand work over); answer()/call() are the one way in.
#pragma once

#include "server/controller.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <future>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/placement/engine.h"
#include "core/placement/policy.h"
#include "core/sched/runtime_history.h"
#include "core/sched/scheduler.h"
#include "config/text.h"
#include "server/agent_protocol.h"
#include "server/event_kind.h"
#include "server/job_record.h"
#include "server/permissions.h"

namespace tessera::server {

namespace ctl {

using Reply = std::shared_ptr<std::promise<Result<Json>>>;
using Clock = std::chrono::steady_clock;

inline Json amounts_json(const ClassAmounts& a) {
  Json j = Json::object();
  for (const auto& [k, v] : a) j[k] = v;
  return j;
}

inline const char* health_name(GpuHealth h) {
  switch (h) {
    case GpuHealth::kHealthy: return "healthy";
    case GpuHealth::kUnhealthy: return "unhealthy";
    case GpuHealth::kReconfiguring: return "reconfiguring";
  }
  return "?";
}

inline Json event_json(const EventRow& e) {
  return Json{{"seq", e.seq}, {"job", e.job_id}, {"time", e.time}, {"kind", e.kind}, {"actor", e.actor},
              {"detail", Json::parse(e.detail, nullptr, false)}};
}

// A failed store write as the caller's answer: a full disk stays "unavailable, retry later" (503),
// anything else is an internal error; both say that nothing was saved.
inline Error store_failure(const Status& st, const std::string& what) {
  if (st.error().code == ErrorCode::kUnavailable) return Error{ErrorCode::kUnavailable, st.message() + " (" + what + ")"};
  return internal_error("store: " + st.message() + " (" + what + "; retry)");
}

inline bool active(JobState s) { return s == JobState::kPending || s == JobState::kRunning || s == JobState::kCheckpointing; }
inline bool placed(JobState s) { return s == JobState::kRunning || s == JobState::kCheckpointing; }

// What the scheduling thread works on: a copy of everything the cycle reads.
struct CycleInput {
  std::shared_ptr<const Scheduler> scheduler;
  std::shared_ptr<const QueueTree> tree;
  ClusterState cluster;
  std::vector<Job> jobs;
  std::vector<QueueLoad> history;
  std::map<GpuRef, Time> mig_last_changed;
  RuntimeHistory runtimes;
  Time now = 0;
  uint64_t config_generation = 0;
};

}  // namespace ctl
using namespace ctl;

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


namespace ctl {
// Milli-GPU held on a GPU: whole, shares, MIG instances in use (by their compute slices).
inline int64_t gpu_allocated_milli(const Gpu& g) {
  int64_t used = g.whole_held ? 1000 : g.shared_milli.v;
  for (const MigInstance& m : g.mig.instances())
    if (m.in_use) used += mig_milli(*g.model, m.profile_id);
  return std::min<int64_t>(used, 1000);
}
}  // namespace ctl
using namespace ctl;

// A task of an ended or requeued attempt whose process its agent has not reported gone yet: its
// resources stay held in the cluster until then (or until its node is NotReady).
struct StoppingTask {
  int64_t job = 0, attempt = 0;
  int task = 0;
  TaskPlacement placement;
};

struct Controller::State {
  Controller* self = nullptr;
  ControllerOptions opt;
  Store* store = nullptr;
  config::ClusterConfig config;
  uint64_t config_generation = 1;
  std::shared_ptr<const QueueTree> tree;
  std::shared_ptr<const Scheduler> scheduler;
  std::unique_ptr<ScoringPolicy> fit_policy;
  ClusterState cluster;        // with running placements applied
  ClusterState empty_cluster;  // as configured, nothing allocated: "can this ever fit" checks
  std::map<std::string, std::string> never_fits_cache;  // request shape -> reason ("" = fits)
  JobTable jobs;                                         // every job ever submitted, by id
  std::vector<StoppingTask> stopping_tasks;              // held until their agents report them gone
  std::set<int64_t> active_ids;                          // pending, running, checkpointing
  std::set<int64_t> placed_ids;                          // running, checkpointing
  // Idempotency keys are each user's own: (user, key) -> job id.
  std::map<std::pair<std::string, std::string>, int64_t> by_idempotency_key;
  std::vector<NodeAdmin> node_admin;                     // by NodeId
  std::vector<double> usage;                             // decayed usage per queue id
  Time usage_at = 0;
  Time usage_saved_at = 0;
  std::map<GpuRef, Time> mig_last_changed;
  std::vector<std::pair<Time, GpuRef>> mig_ready;        // GPUs reconfiguring until then
  RuntimeHistory runtimes;
  int64_t next_id = 1;
  ControllerMetrics m;
  std::map<std::pair<std::string, std::string>, UtilSeries> util;  // (model, pool) -> samples
  Time util_last = -1;                                               // time of the latest sample

  // Threads and their hand-offs.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void(State&)>> commands;
  bool stopping = false;
  std::thread state_thread, cycle_thread;
  std::mutex cycle_mu;
  std::condition_variable cycle_cv;
  std::optional<CycleInput> cycle_input;  // set by the state thread, taken by the cycle thread
  bool cycle_stop = false;
  bool cycle_in_flight = false;
  bool dirty = true;
  Clock::time_point last_cycle_start{}, last_cycle_end{};
  Clock::time_point next_tick{};  // time-driven checks run at most every 100 ms
  // Cycle counters for wait_for_cycle.
  std::mutex count_mu;
  std::condition_variable count_cv;
  int64_t cycles_launched = 0, cycles_applied = 0;

  Time now() const { return opt.clock(); }
  Clock::time_point started_at = Clock::now();

  // A node takes new work when its admin state is ready and (with agents) its agent is ready.
  bool node_usable(NodeId id) const {
    const NodeAdmin& na = node_admin[id.value];
    return na.state == NodeAdminState::kReady && (!opt.agents_required || na.agent_ready);
  }
  void refresh_schedulable(NodeId id) { (void)cluster.set_schedulable(id, node_usable(id)); }

  // After a change: once min_cycle_gap has passed and the cycle thread has rested twice as long as
  // the last cycle took (so cycles take at most a third of a core, leaving the rest to the API).
  // Otherwise: every cycle_interval.
  Clock::time_point next_cycle_at() const {
    if (!dirty) return last_cycle_start + std::chrono::milliseconds(opt.cycle_interval_ms);
    const Clock::duration rest = std::max<Clock::duration>(std::chrono::milliseconds(opt.min_cycle_gap_ms),
                                                           2 * (last_cycle_end - last_cycle_start));
    return last_cycle_end + rest;
  }

  // ---- helpers ----------------------------------------------------------------------------------

  // Runs one piece of state-thread work. An exception is logged and contained: the thread and the
  // other commands go on (a command's caller is answered by Controller::answer).
  void run_contained(const char* what, const std::function<void(State&)>& fn) {
    try {
      fn(*this);
    } catch (const std::exception& e) {
      spdlog::error("event=state_thread_exception in={} error=\"{}\"", what, e.what());
    } catch (...) {
      spdlog::error("event=state_thread_exception in={} error=unknown", what);
    }
  }

  ClassAmounts held_by(const JobRecord& r) const {
    ClassAmounts a;
    for (const TaskPlacement& p : r.job.placement) {
      const Node& n = cluster.node(p.node);
      for (const GpuGrant& g : p.gpus) a[config.scheduler.model_class(n.gpus[g.gpu].model->name)] += g.milli_held();
    }
    return a;
  }

  EventRow event(int64_t job, EventKind kind, const std::string& actor, Json detail = Json::object()) const {
    // Replace, never throw: every text was checked at the edge, and a slip must not abort the thread.
    return EventRow{0, job, now(), event_kind_name(kind), actor, detail.dump(-1, ' ', false, Json::error_handler_t::replace)};
  }

  JobRow row(const JobRecord& r) const {
    return JobRow{r.id, job_state_name(r.job.state), r.queue_name, r.job.user, r.job.submitted, record_to_json(r, cluster).dump(-1, ' ', false, Json::error_handler_t::replace)};
  }

  // Queues the batch; `done` gets the store's verdict on the writer thread.
  void persist(WriteBatch b, std::function<void(Status)> done = nullptr) { store->write(std::move(b), std::move(done)); }

  void reply_when_durable(WriteBatch b, Reply reply, Json answer) {
    persist(std::move(b), [reply, answer = std::move(answer)](Status s) {
      if (s.ok())
        reply->set_value(answer);
      else
        reply->set_value(store_failure(s, "the change was not saved"));
    });
  }

  // Gives a job's resources back. With agents, a task whose process may still run (its agent last
  // reported it running, or was sent it) keeps its GPUs until the agent reports it gone: the next
  // job must not start on a GPU whose memory a stopping process still holds.
  void release(JobRecord& r) {
    for (size_t t = 0; t < r.job.placement.size(); ++t) {
      const TaskPlacement& p = r.job.placement[t];
      const TaskRun* tr = t < r.tasks.size() ? &r.tasks[t] : nullptr;
      const bool may_run = tr && (tr->state == ReportedState::kRunning || tr->recovered || (!tr->state && tr->offered_beat >= 0));
      if (opt.agents_required && may_run && node_admin[p.node.value].agent_ready) {
        stopping_tasks.push_back(StoppingTask{r.id, r.attempt, int(t), p});
        continue;
      }
      Status s = cluster.release(p);
      assert(s.ok());
      (void)s;
    }
    r.job.placement.clear();
    r.tasks.clear();
  }

  // Frees the GPUs of stopping tasks on `node` that `still_running` does not hold (all when null).
  void release_stopped(NodeId node, const std::set<std::tuple<int64_t, int64_t, int>>* still_running, WriteBatch& b) {
    bool freed = false;
    for (auto it = stopping_tasks.begin(); it != stopping_tasks.end();) {
      if (it->placement.node == node && (!still_running || !still_running->count({it->job, it->attempt, it->task}))) {
        Status st = cluster.release(it->placement);
        assert(st.ok());
        (void)st;
        it = stopping_tasks.erase(it);
        freed = true;
      } else {
        ++it;
      }
    }
    if (freed) {
      dirty = true;
      after_release(b);
    }
  }

  // Ends a placed or pending job for good.
  void finish(JobRecord& r, JobState final_state, const std::string& reason, WriteBatch& b, const std::string& actor,
              EventKind kind, Json detail = Json::object()) {
    const Time t = now();
    if (placed(r.job.state)) {
      if (final_state == JobState::kSucceeded && r.job.started >= 0)
        runtimes.record(r.job.user, r.job.name, t - r.job.started);
      release(r);
    }
    r.job.state = final_state;
    r.finished = t;
    r.end_reason = reason;
    m.finished->inc({job_state_name(final_state), r.queue_name});
    active_ids.erase(r.id);
    placed_ids.erase(r.id);
    r.pending.reset();
    detail["reason"] = reason;
    add_utilisation(r, detail);
    b.events.push_back(event(r.id, kind, actor, detail));
    b.jobs.push_back(row(r));
    dirty = true;
    after_release(b);
  }

  // The attempt's mean measured GPU utilisation (for accounting), when agents reported any.
  static void add_utilisation(JobRecord& r, Json& detail) {
    if (r.util_sampled > 0) detail["gpu_util_pct"] = double(r.util_weighted) / double(r.util_sampled);
    r.util_weighted = r.util_sampled = 0;
  }

  // Back to pending (preempted, drained, lost): the job keeps its id and place in the order.
  void requeue(JobRecord& r, EventKind kind, const std::string& reason, WriteBatch& b, bool checkpointed,
               Json extra = Json::object()) {
    const Time t = now();
    if (kind == EventKind::kPreempted) {
      m.preemptions->inc();
      m.preempted_gpu_hours->inc({}, attempt_gpu_hours(r, t));
    } else if (kind == EventKind::kLost) {
      m.losses->inc();
      m.lost_gpu_hours->inc({}, attempt_gpu_hours(r, t));
    }
    if (r.job.started >= 0) r.job.attained_gpu_s += gpu_milli(r) / 1000 * std::max<Time>(0, t - r.job.started);
    release(r);
    placed_ids.erase(r.id);
    r.job.state = JobState::kPending;
    r.job.evict_by = -1;
    r.master_port = 0;
    r.job.last_preempted = t;
    ++r.job.preemptions;
    if (checkpointed) r.job.checkpoint.last = t;
    Json detail{{"reason", reason}, {"checkpointed", checkpointed}};
    detail.update(extra);
    add_utilisation(r, detail);
    b.events.push_back(event(r.id, kind, "scheduler", detail));
    b.events.push_back(event(r.id, EventKind::kRequeued, "scheduler"));
    b.jobs.push_back(row(r));
    dirty = true;
    after_release(b);
  }

  // A placed job lost a task to its node (agent gone, task vanished): requeued by its restart policy
  // (resuming from its last acknowledged checkpoint) after a backoff, or failed past max_restarts.
  void lose(JobRecord& r, const std::string& reason, WriteBatch& b) {
    if (!placed(r.job.state)) return;
    const config::RestartPolicy& rp = r.spec.restart;
    if (r.restarts >= rp.max_restarts) {
      m.losses->inc();
      m.lost_gpu_hours->inc({}, attempt_gpu_hours(r, now()));
      finish(r, JobState::kFailed,
             reason + "; no restarts left (restart.max_restarts is " + std::to_string(rp.max_restarts) + ")", b,
             "scheduler", EventKind::kFailed, Json{{"restarts", r.restarts}});
      return;
    }
    ++r.restarts;
    r.job.move_to.clear();
    const int64_t backoff = std::min<int64_t>(3600, rp.backoff << std::min(r.restarts - 1, 12));
    r.not_before = now() + backoff;
    r.end_reason = reason;
    r.pending.reset();
    requeue(r, EventKind::kLost, reason + " (restart " + std::to_string(r.restarts) + " of " + std::to_string(rp.max_restarts) +
                           " in " + std::to_string(backoff) + " s" +
                           (r.resume_from.empty() ? "" : ", from checkpoint " + r.resume_from) + ")",
            b, false);
  }

  // GPU-hours the current attempt of a placed job has held until t.
  static double attempt_gpu_hours(const JobRecord& r, Time t) {
    if (r.job.started < 0) return 0;
    return double(gpu_milli(r)) / 1000.0 * double(std::max<Time>(0, t - r.job.started)) / 3600.0;
  }

  static int64_t gpu_milli(const JobRecord& r) {
    int64_t m = 0;
    for (const TaskPlacement& p : r.job.placement)
      for (const GpuGrant& g : p.gpus) m += g.milli_held();
    return m;
  }

  // Asks a running job to checkpoint and stop (or stops it now if it cannot checkpoint).
  void request_checkpoint(JobRecord& r, Time evict_by, const std::string& reason, WriteBatch& b) {
    if (r.job.state != JobState::kRunning) return;
    if (r.spec.checkpoint.interval <= 0) {
      requeue(r, EventKind::kPreempted, reason + " (the job does not checkpoint: stopped now)", b, false);
      return;
    }
    r.job.state = JobState::kCheckpointing;
    r.job.evict_by = evict_by;
    b.events.push_back(event(r.id, EventKind::kCheckpointRequested, "scheduler", Json{{"reason", reason}, {"evict_by", evict_by}}));
    b.jobs.push_back(row(r));
  }

  // A draining node with nothing left on it becomes drained.
  void after_release(WriteBatch& b) {
    for (size_t i = 0; i < node_admin.size(); ++i) {
      NodeAdmin& na = node_admin[i];
      if (na.state != NodeAdminState::kDraining) continue;
      const Node& n = cluster.node(NodeId(uint32_t(i)));
      bool busy = n.cpu_used.v > 0 || n.memory_used.v > 0;
      for (const Gpu& g : n.gpus) busy = busy || g.whole_held || g.share_count > 0;
      if (!busy) {
        na.state = NodeAdminState::kDrained;
        b.events.push_back(event(0, EventKind::kNodeDrained, "scheduler", Json{{"node", n.name}, {"reason", na.reason}}));
        b.meta.push_back(node_meta(NodeId(uint32_t(i))));
      }
    }
  }

  std::pair<std::string, std::string> node_meta(NodeId id) const {
    const NodeAdmin& na = node_admin[id.value];
    return {"node/" + cluster.node(id).name,
            Json{{"state", node_admin_state_name(na.state)}, {"reason", na.reason}, {"interrupted", na.interrupted}, {"reclaimed", na.reclaimed},
                 {"notice_cordon", na.notice_cordon}, {"reclaim_at", na.reclaim_at}, {"last_notice", na.last_notice}}
                .dump()};
  }

  // ---- spot interruptions -----------------------------------------------------------------------

  // The job's checkpoint cost in seconds (rounded up): measured, else its spec's grace (an upper
  // estimate), else 60. `measured` says which.
  static int64_t checkpoint_cost_s(const JobRecord& r, bool* measured = nullptr) {
    if (measured) *measured = r.checkpoint_cost_ms >= 0;
    if (r.checkpoint_cost_ms >= 0) return std::max<int64_t>(1, (r.checkpoint_cost_ms + 999) / 1000);
    return r.spec.checkpoint.grace > 0 ? r.spec.checkpoint.grace : 60;
  }

  // How often the agent asks a running job on interrupted spot nodes to save (Young's rule per spot
  // pool it spans, the shortest); 0 = not on such nodes or the job does not checkpoint.
  int64_t spot_save_interval(const JobRecord& r) const {
    if (r.job.state != JobState::kRunning || r.spec.checkpoint.interval <= 0) return 0;
    std::map<uint32_t, std::set<uint32_t>> nodes_by_pool;
    for (const TaskPlacement& p : r.job.placement) {
      const Pool& pool = cluster.pool(cluster.node(p.node).pool);
      if (pool.kind == PoolKind::kSpot && pool.interruptions_per_million_hours > 0)
        nodes_by_pool[pool.id.value].insert(p.node.value);
    }
    int64_t best = 0;
    for (const auto& [pid, nodes] : nodes_by_pool) {
      const int64_t iv = spot_checkpoint_interval(cluster.pool(PoolId(pid)), checkpoint_cost_s(r), int(nodes.size()),
                                                  r.spec.checkpoint.interval);
      if (iv > 0) best = best > 0 ? std::min(best, iv) : iv;
    }
    return best;
  }

  // A spot interruption notice for node `id` (reclaimed at `reclaim_at`): cordons it and, per job
  // with a task there, counts the interruption and either asks for a checkpoint by reclaim_at (when
  // its checkpoint fits in the notice) or requeues it from its last checkpoint. Returns what
  // happened to each job; empty and `handled` false when this notice was already handled.
  Json interrupt(NodeId id, Time reclaim_at, const std::string& actor, WriteBatch& b, bool* handled) {
    NodeAdmin& na = node_admin[id.value];
    Json out = Json::array();
    *handled = false;
    if ((na.interrupted && !na.reclaimed) || na.last_notice == reclaim_at) return out;
    *handled = true;
    const Time t = now();
    const int64_t notice = std::max<int64_t>(0, reclaim_at - t);
    const std::string& name = cluster.node(id).name;
    na.interrupted = true;
    na.reclaimed = false;
    na.reclaim_at = na.last_notice = reclaim_at;
    if (na.state == NodeAdminState::kReady) {  // an admin's cordon or drain stays as it is
      na.state = NodeAdminState::kCordoned;
      na.reason = "spot interruption: reclaimed at " + std::to_string(reclaim_at) + " (" + std::to_string(notice) + " s notice)";
      na.notice_cordon = true;
      b.events.push_back(event(0, EventKind::kNodeCordon, actor, Json{{"node", name}, {"reason", na.reason}}));
    }
    refresh_schedulable(id);
    dirty = true;
    b.events.push_back(event(0, EventKind::kNodeInterruptionNotice, actor,
                             Json{{"node", name}, {"reclaim_at", reclaim_at}, {"notice_s", notice}}));
    b.meta.push_back(node_meta(id));
    spdlog::warn("event=spot_interruption node={} reclaim_at={} notice_s={} by={}", name, reclaim_at, notice, actor);
    const int max_int = config.scheduler.pool_rules.spot_max_interruptions;
    const std::string ns = std::to_string(notice) + " s notice";
    for (int64_t jid : std::vector<int64_t>(placed_ids.begin(), placed_ids.end())) {
      JobRecord& r = jobs.at(jid);
      bool here = false;
      for (const TaskPlacement& p : r.job.placement) here = here || p.node == id;
      if (!here) continue;
      ++r.job.spot_interruptions;
      bool measured = false;
      const int64_t cost = checkpoint_cost_s(r, &measured);
      const std::string from = r.resume_from.empty() ? "no checkpoint yet: it starts over"
                                                     : "resuming from the last periodic checkpoint at " + r.resume_from;
      std::string path, why;
      if (r.job.state == JobState::kCheckpointing) {
        path = "checkpoint";
        why = "already checkpointing; it must finish by the reclaim at " + std::to_string(reclaim_at);
        if (r.job.evict_by < 0 || r.job.evict_by > reclaim_at) r.job.evict_by = reclaim_at;
      } else if (r.spec.checkpoint.interval <= 0) {
        path = "requeue";
        why = "the job does not checkpoint: stopped now, " + from;
      } else if (cost <= notice) {
        path = "checkpoint";
        why = "checkpoint fits in the " + ns + " (takes ~" + std::to_string(cost) + " s, " +
              (measured ? "measured" : "its checkpoint.grace") + ")";
      } else {
        path = "requeue";
        why = "checkpoint takes ~" + std::to_string(cost) + " s (" + (measured ? "measured" : "its checkpoint.grace") +
              "), more than the " + ns + ": " + from;
      }
      Json d{{"node", name}, {"path", path}, {"reason", why}, {"interruptions", r.job.spot_interruptions},
             {"reclaim_at", reclaim_at}};
      out.push_back(Json{{"job", r.id}, {"path", path}, {"reason", why}});
      m.spot_interruptions->inc({pool_name(cluster.node(id)), path});
      const std::string text = "spot interruption of node " + name + ": " + why;
      b.events.push_back(event(r.id, EventKind::kSpotInterrupted, actor, d));
      if (path == "requeue") {
        // A preemption by the provider (metrics, chargeback's preempted hours).
        requeue(r, EventKind::kPreempted, text, b, false, Json{{"spot_interruption", true}});
      } else {
        if (r.job.state == JobState::kRunning)
          request_checkpoint(r, reclaim_at, text, b);
        else
          b.jobs.push_back(row(r));
      }
      if (max_int > 0 && r.job.spot_interruptions == max_int)
        b.events.push_back(event(r.id, EventKind::kSpotAvoided, "scheduler", Json{{"reason", spot_avoid_text(r.job.spot_interruptions)}}));
    }
    return out;
  }

  static std::string spot_avoid_text(int n) {
    return "interrupted " + std::to_string(n) + (n == 1 ? " time" : " times") + " on spot: now prefers other pools";
  }

  // At its reclaim time an interrupted node is gone: NotReady (with agents) until its agent
  // registers again; jobs still running there are lost (checkpointing ones hit their deadline).
  void reclaim_due(WriteBatch& b, Time t) {
    for (size_t i = 0; i < node_admin.size(); ++i) {
      NodeAdmin& na = node_admin[i];
      if (!na.interrupted || na.reclaimed || na.reclaim_at < 0 || t < na.reclaim_at) continue;
      const NodeId id{uint32_t(i)};
      const std::string& name = cluster.node(id).name;
      na.reclaimed = true;
      if (opt.agents_required && na.agent_ready) {
        na.agent_ready = false;
        release_stopped(id, nullptr, b);
        refresh_schedulable(id);
      }
      dirty = true;
      b.events.push_back(event(0, EventKind::kNodeNotReady, "scheduler",
                               Json{{"node", name}, {"reason", "reclaimed by its spot pool (interruption notice)"}}));
      b.meta.push_back(node_meta(id));
      for (int64_t jid : std::vector<int64_t>(placed_ids.begin(), placed_ids.end())) {
        JobRecord& r = jobs.at(jid);
        if (r.job.state != JobState::kRunning) continue;
        for (const TaskPlacement& p : r.job.placement)
          if (p.node == id) {
            lose(r, "node " + name + " was reclaimed by its spot pool", b);
            break;
          }
      }
    }
  }

  // The job, or nullptr after answering 404.
  JobRecord* find_or_reply(int64_t id, const Reply& reply) {
    JobRecord* r = jobs.find(id);
    if (!r) reply->set_value(not_found("job " + std::to_string(id) + ": no such job"));
    return r;
  }

  // ---- permissions ------------------------------------------------------------------------------

  Status may_read(const Principal& who) const { return perm::may_read(who); }

  Status may_use_class(const Principal& who, const std::string& queue, const std::string& cls) const {
    bool known = false;
    for (const PriorityClass& pc : config.scheduler.priority_classes) known = known || pc.name == cls;
    if (!known) {
      std::string names;
      for (const PriorityClass& pc : config.scheduler.priority_classes) names += (names.empty() ? "" : ", ") + pc.name;
      return invalid_argument("priority_class: unknown \"" + cls + "\"; expected one of " + names);
    }
    if (who.role == Role::kAdmin) return {};
    auto it = config.queue_classes.find(queue);
    if (it == config.queue_classes.end() || it->second.empty()) return {};
    if (std::find(it->second.begin(), it->second.end(), cls) != it->second.end()) return {};
    std::string names;
    for (const std::string& c : it->second) names += (names.empty() ? "" : ", ") + c;
    return permission_denied("priority_class: queue " + queue + " allows only " + names);
  }

  // May `who` see job r's command, environment, working directory and logs? (perm::may_see_detail)
  Status may_see_detail(const Principal& who, const JobRecord& r) const {
    return perm::may_see_detail(who, *tree, r.queue_name, r.id, opt.viewers_see_job_details);
  }

  // May `who` register or report for `node`? An agent token speaks only for the node(s) it is bound
  // to; a refusal is audited.
  Status may_speak_for(const Principal& who, const std::string& node, const std::string& what) {
    Status st = perm::may_speak_for(who, node);
    if (!st.ok()) deny(who, what + " " + node, st.message());
    return st;
  }

  // May `who` act (cancel, re-prioritise) on job r? (perm::may_modify)
  Status may_modify(const Principal& who, const JobRecord& r) const {
    return perm::may_modify(who, *tree, r.queue_name, r.job.user, r.id);
  }

  // An admin-only operation on a node: its id, or nullopt after replying with the error (non-admin:
  // denied and logged as `what`; unknown node: not found).
  std::optional<NodeId> admin_node(const Principal& who, const std::string& node, const std::string& what,
                                   const std::string& why, const Reply& reply) {
    if (!perm::admin_only(who, what).ok()) {
      deny(who, what, why);
      reply->set_value(permission_denied(why));
      return std::nullopt;
    }
    auto id = cluster.find_node(node);
    if (!id.ok()) {
      reply->set_value(not_found("node " + node + ": no such node; `tessera nodes` lists them"));
      return std::nullopt;
    }
    return *id;
  }

  // Denied calls are audited, within a budget: each user's first kDeniedPerMinute denials a minute are
  // written (names cut to 256 bytes); the rest are counted and the count goes into the next one
  // written ("suppressed"), so a flood of denied calls cannot grow the store or the log.
  static constexpr int kDeniedPerMinute = 20;
  struct DenyBudget {
    Time window = -1;
    int written = 0;
    int64_t suppressed = 0;
  };
  std::map<std::string, DenyBudget> deny_budget;  // by user (bounded by the tokens that exist)

  void deny(const Principal& who, const std::string& what_in, const std::string& why_in) {
    DenyBudget& budget = deny_budget[who.user];
    const Time t = now();
    if (t - budget.window >= 60) budget.window = t, budget.written = 0;
    if (budget.written >= kDeniedPerMinute) {
      ++budget.suppressed;
      return;
    }
    ++budget.written;
    const std::string what = config::truncate_utf8(what_in, 256), why = config::truncate_utf8(why_in, 256);
    spdlog::info("event=denied user={} role={} call=\"{}\" reason=\"{}\" suppressed_before={}", who.user, role_name(who.role),
                 what, why, budget.suppressed);
    Json detail{{"call", what}, {"role", role_name(who.role)}, {"reason", why}};
    if (budget.suppressed > 0) detail["suppressed"] = std::exchange(budget.suppressed, 0);
    WriteBatch b;
    b.events.push_back(event(0, EventKind::kDenied, who.user, std::move(detail)));
    persist(std::move(b));
  }

  // ---- the cycle ---------------------------------------------------------------------------------

  void update_usage(Time t) {
    if (usage.size() != tree->size()) usage.assign(tree->size(), 0.0);
    const int64_t cap = std::max<int64_t>(1, cluster.total_gpus() * 1000);
    std::vector<int64_t> alloc(tree->size(), 0);
    for (int64_t id : placed_ids) {
      const JobRecord& r = jobs.at(id);
      alloc[r.job.queue.value] += gpu_milli(r);
    }
    for (size_t q = 0; q < tree->size(); ++q)
      usage[q] = decay_usage(usage[q], double(alloc[q]) / double(cap), t - usage_at, config.scheduler.usage_half_life);
    usage_at = t;
  }

  CycleInput cycle_input_now() {
    const Time t = now();
    update_usage(t);
    if (t - usage_saved_at >= 60) {  // fair-share history survives restarts (to the last minute)
      usage_saved_at = t;
      WriteBatch b;
      for (const Queue& q : tree->queues()) b.meta.push_back({"usage/" + q.name, Json{{"usage", usage[q.id.value]}, {"at", t}}.dump()});
      persist(std::move(b));
    }
    CycleInput in{scheduler, tree, cluster, {}, {}, mig_last_changed, runtimes, t, config_generation};
    in.jobs.reserve(active_ids.size());
    for (int64_t id : active_ids) {
      const JobRecord& r = jobs.at(id);
      if (r.job.state == JobState::kPending && r.not_before > t) continue;  // restart backoff
      Job j = r.job;
      if (placed(j.state) && j.started >= 0) j.attained_gpu_s += gpu_milli(jobs.at(id)) / 1000 * (t - j.started);
      in.jobs.push_back(std::move(j));
    }
    in.history.resize(tree->size());
    for (size_t q = 0; q < tree->size(); ++q) in.history[q].decayed_usage = usage[q];
    return in;
  }

  void apply(const Decisions& d, uint64_t generation) {
    if (generation != config_generation) {  // config reloaded meanwhile: the next cycle decides
      m.cycle_decisions->observe({}, 0);
      return;
    }
    const Time t = now();
    WriteBatch b;
    int64_t preempted = 0, reconfigured = 0, started = 0;
    for (const PreemptDecision& p : d.preempt) {
      JobRecord* vp = jobs.find(int64_t(p.victim.value));
      if (!vp) continue;
      JobRecord& v = *vp;
      if (p.phase == PreemptPhase::kRequestCheckpoint && v.job.state == JobState::kRunning) {
        request_checkpoint(v, p.evict_by, p.reason, b), ++preempted;
        // A defragmenting move: the scheduler holds these GPUs while it checkpoints and restarts it
        // there in the next cycle (kept in memory only: after a restart it is placed like any job).
        if (v.job.state == JobState::kCheckpointing) v.job.move_to = p.move_to;
      }
      else if (p.phase == PreemptPhase::kEvict && placed(v.job.state))
        requeue(v, EventKind::kPreempted, p.reason + " (checkpoint not finished in time: stopped)", b, false), ++preempted;
    }
    for (const MigReconfigDecision& mr : d.reconfigure_mig) {
      if (!cluster.set_mig_layout(mr.gpu, mr.enable_mig, mr.layout).ok()) continue;
      ++reconfigured;
      (void)cluster.set_health(mr.gpu, GpuHealth::kReconfiguring);
      mig_last_changed[mr.gpu] = t;
      mig_ready.push_back({std::max(mr.ready_at, t), mr.gpu});
      const Node& n = cluster.node(mr.gpu.node);
      b.events.push_back(event(0, EventKind::kMigReconfigured, "scheduler",
                               Json{{"node", n.name}, {"gpu", mr.gpu.index}, {"mig", mr.enable_mig}, {"reason", mr.reason}}));
      b.meta.push_back(mig_meta(mr.gpu));
    }
    for (const StartDecision& s : d.start) {
      JobRecord* rp = jobs.find(int64_t(s.job.value));
      if (!rp || rp->job.state != JobState::kPending) continue;
      bool nodes_ok = true;
      for (const TaskPlacement& p : s.placement) nodes_ok = nodes_ok && node_usable(p.node);
      if (!nodes_ok || !cluster.apply_all(s.placement).ok()) continue;  // changed since the snapshot
      JobRecord& r = *rp;
      r.job.move_to.clear();
      for (TaskPlacement p : s.placement) {
        for (GpuGrant& g : p.gpus) g.mig_create = false, g.mig_destroy = 0;  // the instances now exist
        r.job.placement.push_back(std::move(p));
      }
      r.job.state = JobState::kRunning;
      r.job.started = t;
      ++r.attempt;
      r.not_before = -1;
      r.master_port = 0;
      r.last_nodes.clear();
      for (const TaskPlacement& p : r.job.placement) r.last_nodes.push_back(cluster.node(p.node).name);
      r.tasks.assign(r.job.placement.size(), TaskRun{});
      r.pending.reset();
      placed_ids.insert(r.id);
      ++started;
      b.events.push_back(event(r.id, EventKind::kStarted, "scheduler",
                               Json{{"attempt", r.attempt}, {"placement", placement_json(r, cluster)}}));
      b.jobs.push_back(row(r));
    }
    for (const PendingInfo& p : d.pending) {
      JobRecord* r = jobs.find(int64_t(p.job.value));
      if (r && r->job.state == JobState::kPending) {
        r->pending = p;
        r->job.move_to.clear();  // a moved job gets one cycle to restart on its held GPUs
      }
    }
    m.decisions->inc({"start"}, double(started));
    m.decisions->inc({"preempt"}, double(preempted));
    m.decisions->inc({"mig"}, double(reconfigured));
    m.cycle_decisions->observe({}, double(started + preempted + reconfigured));
    if (!b.empty()) persist(std::move(b));
  }

  std::pair<std::string, std::string> mig_meta(GpuRef g) const {
    const Node& n = cluster.node(g.node);
    const Gpu& gpu = n.gpus[g.index];
    Json layout = Json::array();
    for (const MigInstance& m : gpu.mig.instances()) layout.push_back(Json{{"profile", m.profile_id}, {"start", m.start}});
    return {"mig/" + n.name + "/" + std::to_string(g.index), Json{{"enabled", gpu.mig_enabled}, {"layout", layout}}.dump()};
  }

  // Agents silent for agent_timeout make their nodes NotReady; jobs with a task on a node that is not
  // ready (after a restart: that has not registered within agent_timeout) are lost.
  void check_agents(WriteBatch& b, Clock::time_point wall) {
    const auto timeout = std::chrono::milliseconds(opt.agent_timeout_ms);
    for (size_t i = 0; i < node_admin.size(); ++i) {
      NodeAdmin& na = node_admin[i];
      if (!na.agent_ready || wall - na.last_beat < timeout) continue;
      na.agent_ready = false;
      const NodeId id{uint32_t(i)};
      release_stopped(id, nullptr, b);  // its processes are unreachable; the node takes no work now
      refresh_schedulable(id);
      dirty = true;
      b.events.push_back(event(0, EventKind::kNodeNotReady, "scheduler",
                               Json{{"node", cluster.node(id).name},
                                    {"reason", "no heartbeat for " + std::to_string(opt.agent_timeout_ms) + " ms"}}));
      spdlog::warn("event=node_not_ready node={} reason=\"no heartbeat within {} ms\"", cluster.node(id).name, opt.agent_timeout_ms);
    }
    if (wall - started_at < timeout) return;  // after a restart, agents get one timeout to register
    for (int64_t id : std::vector<int64_t>(placed_ids.begin(), placed_ids.end())) {
      JobRecord& r = jobs.at(id);
      for (const TaskPlacement& p : r.job.placement) {
        if (node_admin[p.node.value].agent_ready) continue;
        lose(r, "node " + cluster.node(p.node).name + " is not ready (its agent stopped reporting)", b);
        break;
      }
    }
  }

  // Time-driven work: MIG layouts ready, checkpoint deadlines, time limits.
  void tick() {
    const Time t = now();
    sample_utilisation(t);  // cheap unless a step began
    const auto wall = Clock::now();
    if (wall < next_tick) return;
    next_tick = wall + std::chrono::milliseconds(100);
    WriteBatch b;
    for (auto it = mig_ready.begin(); it != mig_ready.end();) {
      if (!opt.agents_required && it->first <= t) {  // with agents: when the agent reports the layout
        (void)cluster.set_health(it->second, GpuHealth::kHealthy);
        dirty = true;
        it = mig_ready.erase(it);
      } else {
        ++it;
      }
    }
    if (opt.agents_required) check_agents(b, opt.steady_clock());
    reclaim_due(b, t);
    std::vector<int64_t> ids(placed_ids.begin(), placed_ids.end());
    for (int64_t id : ids) {
      JobRecord& r = jobs.at(id);
      if (r.job.state == JobState::kCheckpointing && r.job.evict_by >= 0 && t >= r.job.evict_by) {
        requeue(r, EventKind::kPreempted, "checkpoint not acknowledged by its deadline: stopped", b, false);
      } else if (placed(r.job.state) && r.job.max_runtime > 0 && r.job.started >= 0 &&
                 t >= r.job.started + r.job.max_runtime) {
        finish(r, JobState::kFailed, "timed out: ran for its max_runtime of " + std::to_string(r.job.max_runtime) + " s",
               b, "scheduler", EventKind::kTimedOut);
      }
    }
    if (!b.empty()) persist(std::move(b));
  }

  // ---- metrics and utilisation ------------------------------------------------------------------

  // The node's capacity pool ("default" unless the config puts it in another).
  std::string pool_name(const Node& n) const { return cluster.pool(n.pool).name; }

  // Down: cannot take work until something is fixed or finished (unhealthy, MIG reconfiguring, its
  // node's agent not ready). Reserved: its node is cordoned, draining or drained.
  bool gpu_down(const Node& n, const Gpu& g) const {
    return g.health != GpuHealth::kHealthy || (opt.agents_required && !node_admin[n.id.value].agent_ready);
  }
  bool node_reserved(const Node& n) const { return node_admin[n.id.value].state != NodeAdminState::kReady; }

  // One sample per utilisation_step_s (at multiples of it), 24 h kept per (model, pool).
  void sample_utilisation(Time t) {
    const int64_t step = std::max<int64_t>(1, opt.utilisation_step_s);
    const Time at = t - (((t % step) + step) % step);
    if (at <= util_last) return;
    util_last = at;
    struct Acc {
      int64_t total = 0, allocated = 0, used = 0, known = 0;
    };
    std::map<std::pair<std::string, std::string>, Acc> acc;
    for (const Node& n : cluster.nodes()) {
      const NodeAdmin& na = node_admin[n.id.value];
      for (const Gpu& g : n.gpus) {
        Acc& a = acc[{g.model->name, pool_name(n)}];
        if (!gpu_down(n, g)) a.total += 1000;
        const int64_t alloc = gpu_allocated_milli(g);
        a.allocated += alloc;
        if (alloc == 0 || g.index >= na.gpu_stats.size() || na.gpu_stats[g.index].utilization_pct < 0) continue;
        const int64_t pct = std::clamp<int64_t>(na.gpu_stats[g.index].utilization_pct, 0, 100);
        a.used += alloc * pct / 100;
        a.known += alloc;
      }
    }
    const size_t keep = size_t(std::max<int64_t>(1, 86400 / step));
    for (const auto& [key, a] : acc) {
      UtilSeries& sr = util[key];
      sr.total_milli = a.total;
      sr.points.push_back(UtilPoint{at, a.allocated, a.known > 0 || a.allocated == 0 ? a.used : -1});
      while (sr.points.size() > keep || sr.points.front().t <= at - 86400) sr.points.pop_front();
    }
  }

  static metrics::Family gauge_family(const char* name, const char* help, std::vector<std::string> labels) {
    auto f = metrics::make_family(name, help, metrics::Type::kGauge, std::move(labels));
    if (!f.ok()) {  // the names are constants: a programming error (the metrics tests render them all)
      spdlog::critical("metrics: {}", f.error().message);
      std::abort();
    }
    return std::move(*f);
  }

  // The gauges, computed from the state now.
  std::vector<metrics::Family> gauges() const {
    std::vector<metrics::Family> out;
    const Time t = now();

    metrics::Family build = gauge_family("tessera_build_info", "The running build; the value is always 1.", {"version"});
    build.values[{"0.1.0"}] = 1;
    out.push_back(std::move(build));

    // Jobs.
    metrics::Family jobs_f = gauge_family(
        "tessera_jobs", "Active jobs by state (pending, running, checkpointing) and leaf queue.", {"state", "queue"});
    metrics::Family pend_f = gauge_family(
        "tessera_jobs_pending", "Pending jobs by leaf queue and reason category (docs/metrics.md).", {"queue", "reason"});
    static const char* const kCategories[] = {"backoff",   "capacity", "mig_reconfiguring", "new", "other",
                                              "preempting", "priority", "quota",             "topology"};
    for (const Queue& q : tree->queues()) {
      if (!q.leaf()) continue;
      for (JobState st : {JobState::kPending, JobState::kRunning, JobState::kCheckpointing})
        jobs_f.values[{job_state_name(st), q.name}] = 0;
      for (const char* c : kCategories) pend_f.values[{q.name, c}] = 0;
    }
    for (int64_t id : active_ids) {
      const JobRecord& r = jobs.at(id);
      jobs_f.values[{job_state_name(r.job.state), r.queue_name}] += 1;
      if (r.job.state != JobState::kPending) continue;
      const char* cat = r.not_before > t ? "backoff" : r.pending ? pending_reason_category(r.pending->reason) : "new";
      pend_f.values[{r.queue_name, cat}] += 1;
    }
    out.push_back(std::move(jobs_f));
    out.push_back(std::move(pend_f));

    // GPUs and MIG instances.
    metrics::Family gpus_f = gauge_family(
        "tessera_gpus", "GPUs by model, pool and state (allocated, idle, down, reserved), in GPUs (milli-GPU / 1000).",
        {"model", "pool", "state"});
    metrics::Family mig_f = gauge_family(
        "tessera_mig_slices", "MIG instances by GPU model, profile and state (in_use, free = created and idle).",
        {"model", "profile", "state"});
    std::map<metrics::LabelValues, int64_t> gpu_milli_by;
    for (const Node& n : cluster.nodes()) {
      for (const Gpu& g : n.gpus) {
        const std::string& model = g.model->name;
        const std::string pool = pool_name(n);
        for (const char* st : {"allocated", "down", "idle", "reserved"}) gpu_milli_by[{model, pool, st}] += 0;
        const int64_t alloc = gpu_allocated_milli(g);
        gpu_milli_by[{model, pool, "allocated"}] += alloc;
        gpu_milli_by[{model, pool, gpu_down(n, g) ? "down" : node_reserved(n) ? "reserved" : "idle"}] += 1000 - alloc;
        for (const MigInstance& mi : g.mig.instances()) {
          const MigProfile* p = g.model->find_profile_id(mi.profile_id);
          const std::string profile = p ? p->name : std::to_string(mi.profile_id);
          mig_f.values[{model, profile, "free"}] += mi.in_use ? 0 : 1;
          mig_f.values[{model, profile, "in_use"}] += mi.in_use ? 1 : 0;
        }
      }
    }
    for (const auto& [labels, milli] : gpu_milli_by) gpus_f.values[labels] = double(milli) / 1000.0;
    out.push_back(std::move(gpus_f));
    out.push_back(std::move(mig_f));

    // Queues: used (over the subtree), guarantee, limit, borrowed, per GPU class.
    metrics::Family q_f = gauge_family(
        "tessera_queue_gpu_milli",
        "Queue GPU amounts in milli-GPU by queue, GPU class and kind (used, guaranteed, limit, borrowed = used above "
        "the guarantee); used covers the queue's subtree; no limit sample when unlimited.",
        {"queue", "class", "kind"});
    std::set<std::string> classes;
    for (const Node& n : cluster.nodes())
      for (const Gpu& g : n.gpus) classes.insert(config.scheduler.model_class(g.model->name));
    for (const Queue& q : tree->queues()) {
      for (const auto& [c, v] : q.guaranteed) classes.insert(c);
      for (const auto& [c, v] : q.limit) classes.insert(c);
    }
    std::vector<ClassAmounts> used(tree->size());
    for (int64_t id : placed_ids) {
      const JobRecord& r = jobs.at(id);
      const ClassAmounts held = held_by(r);
      for (QueueId a : tree->path_to_root(r.job.queue))
        for (const auto& [c, v] : held) used[a.value][c] += v, used[a.value]["any"] += v;
    }
    for (const Queue& q : tree->queues()) {
      for (const std::string& c : classes) {
        auto get = [&c](const ClassAmounts& a) -> std::optional<int64_t> {
          auto it = a.find(c);
          return it == a.end() ? std::nullopt : std::optional<int64_t>(it->second);
        };
        const int64_t u = get(used[q.id.value]).value_or(0);
        const int64_t g = get(q.guaranteed).value_or(0);
        q_f.values[{q.name, c, "used"}] = double(u);
        q_f.values[{q.name, c, "guaranteed"}] = double(g);
        q_f.values[{q.name, c, "borrowed"}] = double(std::max<int64_t>(0, u - g));
        if (auto lim = get(q.limit); lim && *lim != std::numeric_limits<int64_t>::max())
          q_f.values[{q.name, c, "limit"}] = double(*lim);
      }
    }
    out.push_back(std::move(q_f));

    // Nodes and agents.
    metrics::Family age_f = gauge_family(
        "tessera_agent_heartbeat_age_seconds",
        "Seconds since the node's agent last registered or reported; absent until it registers with this controller.",
        {"node"});
    metrics::Family ready_f = gauge_family(
        "tessera_node_ready", "1 when the node's agent is ready (always 1 with --agentless), else 0.", {"node"});
    metrics::Family sched_f = gauge_family(
        "tessera_node_schedulable", "1 when the node takes new work (admin state ready and, with agents, agent ready).",
        {"node"});
    const auto wall = opt.steady_clock();
    for (const Node& n : cluster.nodes()) {
      const NodeAdmin& na = node_admin[n.id.value];
      if (na.registered) age_f.values[{n.name}] = std::chrono::duration<double>(wall - na.last_beat).count();
      ready_f.values[{n.name}] = !opt.agents_required || na.agent_ready ? 1 : 0;
      sched_f.values[{n.name}] = node_usable(n.id) ? 1 : 0;
    }
    out.push_back(std::move(age_f));
    out.push_back(std::move(ready_f));
    out.push_back(std::move(sched_f));
    return out;
  }
};

// ---- the one way in: answer() and call() ------------------------------------------------------------

namespace ctl {

// Answers `reply` with `e` unless the command answered already (a command that threw after its
// answer was set, or after handing the reply to the store).
template <class T>
inline void answer_once(const std::shared_ptr<std::promise<Result<T>>>& reply, Error e) {
  try {
    reply->set_value(std::move(e));
  } catch (const std::future_error&) {
  }
}

}  // namespace ctl
using namespace ctl;

template <class T>
Result<T> Controller::answer(std::function<void(State&, const std::shared_ptr<std::promise<Result<T>>>&)> fn) {
  auto p = std::make_shared<std::promise<Result<T>>>();
  auto f = p->get_future();
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopping) return Error{ErrorCode::kUnavailable, "the server is shutting down; retry shortly"};
    // No exception leaves a command: it is logged and its caller answered 500; the state thread goes on.
    state_->commands.push_back([p, fn = std::move(fn)](State& s) {
      try {
        fn(s, p);
      } catch (const std::exception& e) {
        spdlog::error("event=command_failed error=\"{}\"", e.what());
        answer_once<T>(p, internal_error(std::string("internal error (logged; the request had no effect or a partial one): ") + e.what()));
      } catch (...) {
        spdlog::error("event=command_failed error=unknown");
        answer_once<T>(p, internal_error("internal error (logged)"));
      }
    });
  }
  state_->cv.notify_one();
  return f.get();
}

template <class T>
Result<T> Controller::call(std::function<Result<T>(State&)> fn) {
  return answer<T>([fn = std::move(fn)](State& s, const std::shared_ptr<std::promise<Result<T>>>& reply) { reply->set_value(fn(s)); });
}

}  // namespace tessera::server
