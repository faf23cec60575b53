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
#include "server/job_record.h"
#include "server/permissions.h"

namespace tessera::server {

namespace {

using Reply = std::shared_ptr<std::promise<Result<Json>>>;
using Clock = std::chrono::steady_clock;

Json amounts_json(const ClassAmounts& a) {
  Json j = Json::object();
  for (const auto& [k, v] : a) j[k] = v;
  return j;
}

const char* health_name(GpuHealth h) {
  switch (h) {
    case GpuHealth::kHealthy: return "healthy";
    case GpuHealth::kUnhealthy: return "unhealthy";
    case GpuHealth::kReconfiguring: return "reconfiguring";
  }
  return "?";
}

Json event_json(const EventRow& e) {
  return Json{{"seq", e.seq}, {"job", e.job_id}, {"time", e.time}, {"kind", e.kind}, {"actor", e.actor},
              {"detail", Json::parse(e.detail, nullptr, false)}};
}

// A failed store write as the caller's answer: a full disk stays "unavailable, retry later" (503),
// anything else is an internal error; both say that nothing was saved.
Error store_failure(const Status& st, const std::string& what) {
  if (st.error().code == ErrorCode::kUnavailable) return Error{ErrorCode::kUnavailable, st.message() + " (" + what + ")"};
  return internal_error("store: " + st.message() + " (" + what + "; retry)");
}

bool active(JobState s) { return s == JobState::kPending || s == JobState::kRunning || s == JobState::kCheckpointing; }
bool placed(JobState s) { return s == JobState::kRunning || s == JobState::kCheckpointing; }

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

}  // namespace

struct NodeAdmin {
  std::string state = "ready";  // ready | cordoned | draining | drained
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

const char* pending_reason_category(const std::string& reason) {
  auto has = [&reason](const char* x) { return reason.find(x) != std::string::npos; };
  if (reason.empty()) return "other";
  if (has("MIG layout change planned") || has("MIG mode now") || has("turning MIG GPUs back")) return "mig_reconfiguring";
  if (has(" at its limit of ") || reason.rfind("guarantee:", 0) == 0) return "quota";
  if (has("preempted job") && reason.rfind("waiting for ", 0) == 0) return "preempting";
  if (reason.rfind("waiting behind job", 0) == 0 || reason.rfind("backfill:", 0) == 0 || reason.rfind("priority", 0) == 0)
    return "priority";
  if (has(" within one ") || has(" inside one ") || has("topology")) return "topology";
  if (reason.rfind("no node fits", 0) == 0 || reason.rfind("no room", 0) == 0 || reason.rfind("needs ", 0) == 0)
    return "capacity";
  return "other";
}

namespace {
// Milli-GPU held on a GPU: whole, shares, MIG instances in use (by their compute slices).
int64_t gpu_allocated_milli(const Gpu& g) {
  int64_t used = g.whole_held ? 1000 : g.shared_milli.v;
  for (const MigInstance& m : g.mig.instances())
    if (m.in_use) used += mig_milli(*g.model, m.profile_id);
  return std::min<int64_t>(used, 1000);
}
}  // namespace

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
    return na.state == "ready" && (!opt.agents_required || na.agent_ready);
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

  EventRow event(int64_t job, const std::string& kind, const std::string& actor, Json detail = Json::object()) const {
    // Replace, never throw: every text was checked at the edge, and a slip must not abort the thread.
    return EventRow{0, job, now(), kind, actor, detail.dump(-1, ' ', false, Json::error_handler_t::replace)};
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
      const bool may_run = tr && (tr->state == "running" || tr->recovered || (tr->state.empty() && tr->offered_beat >= 0));
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
              const std::string& kind, Json detail = Json::object()) {
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
  void requeue(JobRecord& r, const std::string& kind, const std::string& reason, WriteBatch& b, bool checkpointed,
               Json extra = Json::object()) {
    const Time t = now();
    if (kind == "preempted") {
      m.preemptions->inc();
      m.preempted_gpu_hours->inc({}, attempt_gpu_hours(r, t));
    } else if (kind == "lost") {
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
    b.events.push_back(event(r.id, "requeued", "scheduler"));
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
             "scheduler", "failed", Json{{"restarts", r.restarts}});
      return;
    }
    ++r.restarts;
    r.job.move_to.clear();
    const int64_t backoff = std::min<int64_t>(3600, rp.backoff << std::min(r.restarts - 1, 12));
    r.not_before = now() + backoff;
    r.end_reason = reason;
    r.pending.reset();
    requeue(r, "lost", reason + " (restart " + std::to_string(r.restarts) + " of " + std::to_string(rp.max_restarts) +
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
      requeue(r, "preempted", reason + " (the job does not checkpoint: stopped now)", b, false);
      return;
    }
    r.job.state = JobState::kCheckpointing;
    r.job.evict_by = evict_by;
    b.events.push_back(event(r.id, "checkpoint_requested", "scheduler", Json{{"reason", reason}, {"evict_by", evict_by}}));
    b.jobs.push_back(row(r));
  }

  // A draining node with nothing left on it becomes drained.
  void after_release(WriteBatch& b) {
    for (size_t i = 0; i < node_admin.size(); ++i) {
      NodeAdmin& na = node_admin[i];
      if (na.state != "draining") continue;
      const Node& n = cluster.node(NodeId(uint32_t(i)));
      bool busy = n.cpu_used.v > 0 || n.memory_used.v > 0;
      for (const Gpu& g : n.gpus) busy = busy || g.whole_held || g.share_count > 0;
      if (!busy) {
        na.state = "drained";
        b.events.push_back(event(0, "node_drained", "scheduler", Json{{"node", n.name}, {"reason", na.reason}}));
        b.meta.push_back(node_meta(NodeId(uint32_t(i))));
      }
    }
  }

  std::pair<std::string, std::string> node_meta(NodeId id) const {
    const NodeAdmin& na = node_admin[id.value];
    return {"node/" + cluster.node(id).name,
            Json{{"state", na.state}, {"reason", na.reason}, {"interrupted", na.interrupted}, {"reclaimed", na.reclaimed},
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
    if (na.state == "ready") {  // an admin's cordon or drain stays as it is
      na.state = "cordoned";
      na.reason = "spot interruption: reclaimed at " + std::to_string(reclaim_at) + " (" + std::to_string(notice) + " s notice)";
      na.notice_cordon = true;
      b.events.push_back(event(0, "node_cordon", actor, Json{{"node", name}, {"reason", na.reason}}));
    }
    refresh_schedulable(id);
    dirty = true;
    b.events.push_back(event(0, "node_interruption_notice", actor,
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
      b.events.push_back(event(r.id, "spot_interrupted", actor, d));
      if (path == "requeue") {
        // A preemption by the provider (metrics, chargeback's preempted hours).
        requeue(r, "preempted", text, b, false, Json{{"spot_interruption", true}});
      } else {
        if (r.job.state == JobState::kRunning)
          request_checkpoint(r, reclaim_at, text, b);
        else
          b.jobs.push_back(row(r));
      }
      if (max_int > 0 && r.job.spot_interruptions == max_int)
        b.events.push_back(event(r.id, "spot_avoided", "scheduler", Json{{"reason", spot_avoid_text(r.job.spot_interruptions)}}));
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
      b.events.push_back(event(0, "node_not_ready", "scheduler",
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
    b.events.push_back(event(0, "denied", who.user, std::move(detail)));
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
        requeue(v, "preempted", p.reason + " (checkpoint not finished in time: stopped)", b, false), ++preempted;
    }
    for (const MigReconfigDecision& mr : d.reconfigure_mig) {
      if (!cluster.set_mig_layout(mr.gpu, mr.enable_mig, mr.layout).ok()) continue;
      ++reconfigured;
      (void)cluster.set_health(mr.gpu, GpuHealth::kReconfiguring);
      mig_last_changed[mr.gpu] = t;
      mig_ready.push_back({std::max(mr.ready_at, t), mr.gpu});
      const Node& n = cluster.node(mr.gpu.node);
      b.events.push_back(event(0, "mig_reconfigured", "scheduler",
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
      b.events.push_back(event(r.id, "started", "scheduler",
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
      b.events.push_back(event(0, "node_not_ready", "scheduler",
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
        requeue(r, "preempted", "checkpoint not acknowledged by its deadline: stopped", b, false);
      } else if (placed(r.job.state) && r.job.max_runtime > 0 && r.job.started >= 0 &&
                 t >= r.job.started + r.job.max_runtime) {
        finish(r, JobState::kFailed, "timed out: ran for its max_runtime of " + std::to_string(r.job.max_runtime) + " s",
               b, "scheduler", "timed_out");
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
  bool node_reserved(const Node& n) const { return node_admin[n.id.value].state != "ready"; }

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

// ---- construction and threads ---------------------------------------------------------------------

Controller::Controller(Store* store, ControllerOptions options) : store_(store), options_(std::move(options)) {}

Result<std::unique_ptr<Controller>> Controller::start(config::ClusterConfig cfg, Store* store, ControllerOptions options) {
  if (!options.clock) options.clock = [] { return int64_t(std::time(nullptr)); };
  if (!options.steady_clock) options.steady_clock = [] { return std::chrono::steady_clock::now(); };
  std::unique_ptr<Controller> c(new Controller(store, options));
  auto st = std::make_unique<State>();
  State& s = *st;
  s.self = c.get();
  s.opt = options;
  s.started_at = options.steady_clock();  // agents get one agent_timeout to register after a start
  s.store = store;
  auto tree = QueueTree::build(cfg.queues);
  if (!tree.ok()) return tree.error();
  s.tree = std::make_shared<const QueueTree>(std::move(*tree));
  auto sched = Scheduler::create(cfg.scheduler);
  if (!sched.ok()) return sched.error();
  s.scheduler = std::move(*sched);
  auto pol = make_policy(cfg.scheduler.policy);
  if (!pol.ok()) return pol.error();
  s.fit_policy = std::move(*pol);
  auto cluster = config::build_cluster_state(cfg);
  if (!cluster.ok()) return cluster.error();
  s.cluster = *cluster;
  s.empty_cluster = std::move(*cluster);
  s.config = std::move(cfg);
  s.node_admin.assign(s.cluster.node_count(), NodeAdmin{});
  s.usage_at = s.now();

  // Recovery.
  auto loaded = store->load();
  if (!loaded.ok()) return loaded.error();
  c->tokens_.load(loaded->tokens);
  WriteBatch fix;
  for (const auto& [key, value] : loaded->meta) {
    Json v = Json::parse(value, nullptr, false);
    if (v.is_discarded()) continue;
    if (key.rfind("node/", 0) == 0) {
      auto id = s.cluster.find_node(key.substr(5));
      if (!id.ok()) continue;
      NodeAdmin& na = s.node_admin[id->value];
      na.state = v.value("state", "ready");
      na.reason = v.value("reason", "");
      na.interrupted = v.value("interrupted", false);
      na.reclaimed = v.value("reclaimed", false);
      na.notice_cordon = v.value("notice_cordon", false);
      na.reclaim_at = v.value("reclaim_at", int64_t(-1));
      na.last_notice = v.value("last_notice", int64_t(-1));
    } else if (key.rfind("usage/", 0) == 0) {
      auto q = s.tree->find(key.substr(6));
      if (!q.ok()) continue;
      if (s.usage.size() != s.tree->size()) s.usage.assign(s.tree->size(), 0.0);
      // Decayed over the time the controller was down (nothing ran that it knows of).
      s.usage[q->value] = decay_usage(v.value("usage", 0.0), 0.0, std::max<int64_t>(0, s.now() - v.value("at", s.now())),
                                      s.config.scheduler.usage_half_life);
    } else if (key.rfind("mig/", 0) == 0) {
      const std::string rest = key.substr(4);
      const auto slash = rest.rfind('/');
      auto id = s.cluster.find_node(rest.substr(0, slash));
      if (!id.ok()) continue;
      const GpuRef g{*id, uint16_t(std::stoi(rest.substr(slash + 1)))};
      if (g.index >= s.cluster.node(*id).gpus.size()) continue;
      std::vector<MigInstance> layout;
      const GpuModel* model = s.cluster.node(*id).gpus[g.index].model;
      for (const Json& m : v.value("layout", Json::array())) {
        const MigProfile* p = model->find_profile_id(m.value("profile", -1));
        if (p) layout.push_back(MigInstance{p->id, uint8_t(m.value("start", 0)), uint8_t(p->memory_slices), false});
      }
      (void)s.cluster.set_mig_layout(g, v.value("enabled", false), layout);
    }
  }
  for (uint32_t i = 0; i < s.cluster.node_count(); ++i) s.refresh_schedulable(NodeId{i});
  for (const JobRow& row : loaded->jobs) {
    auto rec = record_from_json(Json::parse(row.record, nullptr, false), *s.tree, s.cluster);
    if (!rec.ok()) return internal_error("store: job " + std::to_string(row.id) + ": " + rec.error().message);
    JobRecord r = std::move(*rec);
    s.next_id = std::max(s.next_id, r.id + 1);
    if (!r.idempotency_key.empty()) s.by_idempotency_key[{r.job.user, r.idempotency_key}] = r.id;
    if (placed(r.job.state)) {
      // Recreate MIG instances the placement holds, then hold its resources again.
      std::vector<TaskPlacement> ps = r.job.placement;
      for (TaskPlacement& p : ps)
        for (GpuGrant& g : p.gpus) {
          if (g.kind != GrantKind::kMig) continue;
          const Gpu& gpu = s.cluster.node(p.node).gpus[g.gpu];
          bool exists = false;
          for (const MigInstance& m : gpu.mig.instances()) exists = exists || (m.start == g.mig_start && m.profile_id == g.mig_profile);
          g.mig_create = !exists;
        }
      if (s.cluster.apply_all(ps).ok()) {
        r.tasks.assign(r.job.placement.size(), TaskRun{});
        for (TaskRun& tr : r.tasks) tr.recovered = true;
      } else {
        r.job.placement.clear();
        r.job.state = JobState::kPending;
        fix.events.push_back(s.event(r.id, "requeued", "controller",
                                     Json{{"reason", "its placement no longer fits the configured cluster after restart"}}));
        fix.jobs.push_back(s.row(r));
      }
    }
    if (active(r.job.state)) s.active_ids.insert(r.id);
    if (placed(r.job.state)) s.placed_ids.insert(r.id);
    s.jobs.insert(std::move(r));
  }
  if (!fix.empty()) {
    if (Status w = store->write_sync(std::move(fix)); !w.ok()) return w.error();
  }

  c->state_ = std::move(st);
  State* sp = c->state_.get();
  sp->cycle_thread = std::thread([sp] {
    for (;;) {
      std::optional<CycleInput> in;
      {
        std::unique_lock lock(sp->cycle_mu);
        sp->cycle_cv.wait(lock, [&] { return sp->cycle_stop || sp->cycle_input.has_value(); });
        if (sp->cycle_stop) return;
        in.swap(sp->cycle_input);
      }
      Snapshot snap;
      snap.cluster = &in->cluster;
      snap.queues = in->tree.get();
      snap.jobs = std::move(in->jobs);
      snap.history = std::move(in->history);
      snap.mig_last_changed = std::move(in->mig_last_changed);
      snap.runtimes = &in->runtimes;
      const auto cycle_start = Clock::now();
      auto decisions = std::make_shared<Decisions>(in->scheduler->cycle(snap, in->now));
      sp->m.cycle_seconds->observe({}, std::chrono::duration<double>(Clock::now() - cycle_start).count());
      const uint64_t gen = in->config_generation;
      std::lock_guard lock(sp->mu);
      sp->commands.push_back([decisions, gen](State& s) {
        s.apply(*decisions, gen);
        s.cycle_in_flight = false;
        s.last_cycle_end = Clock::now();
        std::lock_guard l(s.count_mu);
        ++s.cycles_applied;
        s.count_cv.notify_all();
      });
      sp->cv.notify_one();
    }
  });
  sp->state_thread = std::thread([sp] {
    std::unique_lock lock(sp->mu);
    for (;;) {
      const auto interval = std::chrono::milliseconds(sp->opt.cycle_interval_ms);
      sp->cv.wait_until(lock, sp->cycle_in_flight ? Clock::now() + interval : sp->next_cycle_at(),
                        [&] { return sp->stopping || !sp->commands.empty(); });
      if (sp->stopping) break;
      std::deque<std::function<void(State&)>> batch;
      batch.swap(sp->commands);
      lock.unlock();
      for (auto& cmd : batch) sp->run_contained("command", cmd);
      sp->run_contained("tick", [](State& st) { st.tick(); });
      const auto now = Clock::now();
      if (!sp->cycle_in_flight && now >= sp->next_cycle_at()) {
        sp->dirty = false;
        sp->cycle_in_flight = true;
        sp->last_cycle_start = now;
        {
          std::lock_guard l(sp->count_mu);
          ++sp->cycles_launched;
        }
        CycleInput in = sp->cycle_input_now();
        std::lock_guard cl(sp->cycle_mu);
        sp->cycle_input.emplace(std::move(in));
        sp->cycle_cv.notify_one();
      }
      lock.lock();
    }
  });
  return c;
}

Controller::~Controller() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  state_->state_thread.join();
  {
    std::lock_guard lock(state_->cycle_mu);
    state_->cycle_stop = true;
  }
  state_->cycle_cv.notify_all();
  state_->cycle_thread.join();
  store_->flush();
}

namespace {

// Answers `reply` with `e` unless the command answered already (a command that threw after its
// answer was set, or after handing the reply to the store).
template <class T>
void answer_once(const std::shared_ptr<std::promise<Result<T>>>& reply, Error e) {
  try {
    reply->set_value(std::move(e));
  } catch (const std::future_error&) {
  }
}

}  // namespace

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

void Controller::wait_for_cycle() {
  int64_t target = 0;
  (void)call<int>([&target](State& s) -> Result<int> {
    s.dirty = true;
    std::lock_guard l(s.count_mu);
    target = s.cycles_launched + (s.cycle_in_flight ? 2 : 1);
    return 0;
  });
  std::unique_lock l(state_->count_mu);
  state_->count_cv.wait(l, [&] { return state_->cycles_applied >= target; });
}

// ---- jobs --------------------------------------------------------------------------------------


Result<Json> Controller::submit(const Principal& who, config::JobSpec spec, const std::string& idem, bool* created) {
  auto created_flag = std::make_shared<bool>(false);
  auto result = [&]() -> Result<Json> {
    return answer<Json>([=, this](State& s, const Reply& reply) {
      if (!idem.empty()) {
        auto it = s.by_idempotency_key.find({who.user, idem});
        if (it != s.by_idempotency_key.end()) {
          // Earlier batches commit first: answering after this empty write means the original is durable.
          s.reply_when_durable(WriteBatch{}, reply, record_to_api(s.jobs.at(it->second), s.cluster, nullptr));
          return;
        }
      }
      // The queue: a leaf, by name or path.
      std::string qname = spec.queue;
      if (const auto slash = qname.rfind('/'); slash != std::string::npos) qname = qname.substr(slash + 1);
      auto q = s.tree->find(qname);
      if (!q.ok()) {
        std::string names;
        for (const Queue& qq : s.tree->queues())
          if (qq.leaf()) names += (names.empty() ? "" : ", ") + qq.name;
        reply->set_value(invalid_argument("queue: unknown \"" + spec.queue + "\"; leaf queues are " + names));
        return;
      }
      if (!s.tree->queue(*q).leaf()) {
        reply->set_value(invalid_argument("queue: \"" + qname + "\" has child queues; submit to a leaf queue"));
        return;
      }
      if (Status st = perm::may_submit(who, *s.tree, qname); !st.ok()) {
        s.deny(who, "submit", st.message());
        reply->set_value(st.error());
        return;
      }
      if (Status cs = s.may_use_class(who, qname, spec.priority_class); !cs.ok()) {
        if (cs.error().code == ErrorCode::kPermissionDenied) s.deny(who, "submit", cs.message());
        reply->set_value(cs.error());
        return;
      }
      Gang gang = spec.gang();
      // Can it ever fit (on the configured cluster, empty)?
      const std::string shape = config::job_spec_to_json(spec)["resources"].dump() + "/" + std::to_string(spec.tasks) + "/" +
                                std::to_string(spec.min_tasks) + "/" + std::to_string(int(spec.topology.mode)) + spec.topology.level;
      auto cached = s.never_fits_cache.find(shape);
      if (cached == s.never_fits_cache.end()) {
        PlacementEngine engine(*s.fit_policy, EngineOptions{});
        const PlacementResult pr = engine.place(s.empty_cluster, gang);
        cached = s.never_fits_cache.emplace(shape, pr.outcome == Outcome::kPlaced ? "" : pr.reason).first;
      }
      if (!cached->second.empty()) {
        reply->set_value(invalid_argument("resources: this request can never fit the cluster: " + cached->second));
        return;
      }
      JobRecord r;
      r.id = s.next_id++;
      r.spec = std::move(spec);
      r.queue_name = qname;
      r.idempotency_key = idem;
      r.job.id = JobId(uint32_t(r.id));
      r.job.name = r.spec.name;
      r.job.user = who.user;
      r.job.queue = *q;
      r.job.priority_class = r.spec.priority_class;
      r.job.gang = gang;
      r.job.gang.id = r.job.id;
      r.job.gang.queue = *q;
      r.job.submitted = s.now();
      r.job.expected_runtime = r.spec.expected_runtime;
      r.job.max_runtime = r.spec.max_runtime;
      r.job.checkpoint.interval = r.spec.checkpoint.interval;
      r.job.checkpoint.grace = r.spec.checkpoint.grace;
      WriteBatch b;
      b.events.push_back(s.event(r.id, "submitted", who.user, Json{{"queue", qname}, {"priority_class", r.job.priority_class}}));
      b.jobs.push_back(s.row(r));
      if (!idem.empty()) s.by_idempotency_key[{who.user, idem}] = r.id;
      s.active_ids.insert(r.id);
      Json answer = record_to_api(r, s.cluster, nullptr);
      const int64_t id = r.id;
      s.jobs.insert(std::move(r));
      s.dirty = true;
      *created_flag = true;
      // If the write fails, the job must not stay in memory either.
      Controller::State* sp = &s;
      const std::string user = who.user;
      s.persist(std::move(b), [reply, answer, sp, id, idem, qname, user](Status st) {
        if (st.ok()) {
          sp->m.submitted->inc({qname});  // thread-safe; this runs on the store's writer thread
          reply->set_value(answer);
          return;
        }
        reply->set_value(store_failure(st, "the job was not saved"));
        std::lock_guard lock(sp->mu);
        sp->commands.push_back([id, idem, user](State& s2) {
          s2.jobs.erase(id);
          s2.active_ids.erase(id);
          if (!idem.empty()) s2.by_idempotency_key.erase({user, idem});
        });
        sp->cv.notify_one();
      });
    });
  }();
  if (created) *created = *created_flag;
  return result;
}

Result<Json> Controller::list_jobs(const Principal& who, const JobFilter& f) {
  return call<Json>([who, f](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    std::array<bool, 6> want_state{};
    want_state.fill(f.states.empty());
    for (const std::string& st : f.states) {
      bool ok = false;
      for (JobState js : {JobState::kPending, JobState::kRunning, JobState::kCheckpointing, JobState::kSucceeded,
                          JobState::kFailed, JobState::kCancelled})
        if (st == job_state_name(js)) ok = want_state[size_t(js)] = true;
      if (!ok)
        return invalid_argument("state: unknown \"" + st + "\"; expected pending, running, checkpointing, succeeded, failed, cancelled");
    }
    std::vector<char> in_queue;  // by queue id: inside the filter's subtree
    if (!f.queue.empty()) {
      auto root = s.tree->find(f.queue);
      if (!root.ok()) return invalid_argument("queue: unknown \"" + f.queue + "\"");
      in_queue.assign(s.tree->size(), 0);
      for (const Queue& q : s.tree->queues())
        for (QueueId a : s.tree->path_to_root(q.id)) in_queue[q.id.value] |= a == *root;
    }
    auto match = [&](const JobRecord& r) {
      if (!f.user.empty() && r.job.user != f.user) return false;
      if (!want_state[size_t(r.job.state)]) return false;
      if (!in_queue.empty() && !in_queue[r.job.queue.value]) return false;
      return true;
    };
    Json out = Json::array();
    int64_t total = 0, last = 0;
    bool more = false;
    auto visit = [&](const JobRecord& r) {
      if (!match(r)) return;
      ++total;
      if (r.id <= f.after) return;
      if (int64_t(out.size()) < f.limit) {
        out.push_back(record_to_api(r, s.cluster, r.pending ? &*r.pending : nullptr, false));
        last = r.id;
      } else {
        more = true;
      }
    };
    if (f.active_only) {
      for (int64_t id : s.active_ids) visit(s.jobs.at(id));
    } else {
      s.jobs.walk(0, [&](const JobRecord& r) {
        visit(r);
        return true;
      });
    }
    return Json{{"jobs", std::move(out)}, {"next_after", more ? Json(last) : Json(nullptr)}, {"total", total}};
  });
}

Result<Json> Controller::show_job(const Principal& who, int64_t id) {
  auto j = call<Json>([who, id](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    const JobRecord* r = s.jobs.find(id);
    if (!r) return not_found("job " + std::to_string(id) + ": no such job");
    Json j = record_to_api(*r, s.cluster, r->pending ? &*r->pending : nullptr, true);
    if (Status st = s.may_see_detail(who, *r); !st.ok()) {
      for (const char* k : {"command", "env", "secret_env", "working_dir"}) j["spec"].erase(k);
      j["spec"]["checkpoint"].erase("dir");
      j["detail_hidden"] = st.message();
    }
    const int max_int = s.config.scheduler.pool_rules.spot_max_interruptions;
    if (max_int > 0 && r->job.spot_interruptions >= max_int) {
      const std::string avoid = State::spot_avoid_text(r->job.spot_interruptions);
      j["spot_avoid"] = avoid;
      if (r->job.state == JobState::kPending && j["pending"].is_object())
        j["pending"]["reason"] = j["pending"]["reason"].get<std::string>() + "; " + avoid;
    }
    return j;
  });
  if (!j.ok()) return j;
  auto ev = store_->events_for_job(id);
  if (!ev.ok()) return ev.error();
  Json events = Json::array();
  for (const EventRow& e : *ev) events.push_back(event_json(e));
  (*j)["events"] = std::move(events);
  return j;
}

Result<Json> Controller::cancel_job(const Principal& who, int64_t id) {
  return answer<Json>([=, this](State& s, const Reply& reply) {
    JobRecord* rp = s.find_or_reply(id, reply);
    if (!rp) return;
    JobRecord& r = *rp;
    if (Status st = s.may_modify(who, r); !st.ok()) {
      s.deny(who, "cancel job " + std::to_string(id), st.message());
      reply->set_value(st.error());
      return;
    }
    if (!active(r.job.state)) {
      reply->set_value(failed_precondition("job " + std::to_string(id) + " has already ended (" +
                                           job_state_name(r.job.state) + "); nothing to cancel"));
      return;
    }
    WriteBatch b;
    s.finish(r, JobState::kCancelled, "cancelled by " + who.user, b, who.user, "cancelled");
    s.reply_when_durable(std::move(b), reply, record_to_api(r, s.cluster, nullptr));
  });
}

Result<Json> Controller::set_priority(const Principal& who, int64_t id, const std::string& cls) {
  return answer<Json>([=, this](State& s, const Reply& reply) {
    JobRecord* rp = s.find_or_reply(id, reply);
    if (!rp) return;
    JobRecord& r = *rp;
    Status st = s.may_modify(who, r);
    if (st.ok()) st = s.may_use_class(who, r.queue_name, cls);
    if (!st.ok()) {
      if (st.error().code == ErrorCode::kPermissionDenied) s.deny(who, "priority job " + std::to_string(id), st.message());
      reply->set_value(st.error());
      return;
    }
    if (!active(r.job.state)) {
      reply->set_value(failed_precondition("job " + std::to_string(id) + " has already ended; its priority cannot change"));
      return;
    }
    const std::string old = r.job.priority_class;
    r.job.priority_class = cls;
    r.spec.priority_class = cls;
    WriteBatch b;
    b.events.push_back(s.event(r.id, "priority_changed", who.user, Json{{"from", old}, {"to", cls}}));
    b.jobs.push_back(s.row(r));
    s.dirty = true;
    s.reply_when_durable(std::move(b), reply, record_to_api(r, s.cluster, nullptr));
  });
}

// ---- queues and nodes ----------------------------------------------------------------------------

Result<Json> Controller::queues(const Principal& who) {
  return call<Json>([who](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    const QueueTree& tree = *s.tree;
    std::vector<QueueLoad> load(tree.size());
    std::vector<int64_t> pending(tree.size()), running(tree.size());
    for (int64_t id : s.active_ids) {
      const JobRecord& r = s.jobs.at(id);
      QueueLoad& l = load[r.job.queue.value];
      if (placed(r.job.state)) {
        for (const auto& [cls, m] : s.held_by(r)) l.allocated[cls] += m, l.demand[cls] += m;
        ++running[r.job.queue.value];
      } else {
        ++pending[r.job.queue.value];
      }
    }
    ClassAmounts capacity;
    for (const Node& n : s.cluster.nodes())
      for (const Gpu& g : n.gpus)
        if (g.health != GpuHealth::kUnhealthy) capacity[s.config.scheduler.model_class(g.model->name)] += 1000;
    const FairShare fs = FairShare::compute(tree, capacity, load);
    Json out = Json::array();
    std::vector<int64_t> sub_pending(tree.size()), sub_running(tree.size());
    for (const Queue& q : tree.queues())
      for (QueueId a : tree.path_to_root(q.id)) sub_pending[a.value] += pending[q.id.value], sub_running[a.value] += running[q.id.value];
    for (const Queue& q : tree.queues()) {
      ClassAmounts used, borrowed, fair;
      for (const auto& [cls, cap] : capacity) {
        (void)cap;
        used[cls] = fs.allocated(q.id, cls);
        fair[cls] = fs.fair_share(q.id, cls);
        const auto g = q.guaranteed.find(cls);
        borrowed[cls] = std::max<int64_t>(0, used[cls] - (g == q.guaranteed.end() ? 0 : g->second));
      }
      std::string path;
      for (QueueId a : tree.path_to_root(q.id)) path = tree.queue(a).name + (path.empty() ? "" : "/" + path);
      auto cls = s.config.queue_classes.find(q.name);
      out.push_back(Json{{"name", q.name}, {"parent", q.parent.valid() ? tree.queue(q.parent).name : ""}, {"path", path},
                         {"leaf", q.leaf()}, {"weight", q.weight}, {"guaranteed", amounts_json(q.guaranteed)},
                         {"limit", amounts_json(q.limit)}, {"used", amounts_json(used)}, {"borrowed", amounts_json(borrowed)},
                         {"fair_share", amounts_json(fair)}, {"pending", sub_pending[q.id.value]},
                         {"running", sub_running[q.id.value]},
                         {"usage", q.id.value < s.usage.size() ? s.usage[q.id.value] : 0.0},
                         {"priority_classes", cls == s.config.queue_classes.end() ? Json::array() : Json(cls->second)}});
    }
    return Json{{"queues", std::move(out)}};
  });
}

namespace {
Json node_json(const Controller::State& s, NodeId id);
}

Result<Json> Controller::nodes(const Principal& who) {
  return call<Json>([who](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    Json out = Json::array();
    for (const Node& n : s.cluster.nodes()) out.push_back(node_json(s, n.id));
    return Json{{"nodes", std::move(out)}};
  });
}

namespace {
Json node_json(const Controller::State& s, NodeId id) {
  const Node& n = s.cluster.node(id);
  const NodeAdmin& na = s.node_admin[id.value];
  // Which job holds what on this node.
  std::map<uint16_t, std::vector<int64_t>> gpu_jobs;
  std::map<std::pair<uint16_t, int>, int64_t> instance_job;
  for (int64_t jid : s.placed_ids) {
    const JobRecord& r = s.jobs.at(jid);
    for (const TaskPlacement& p : r.job.placement) {
      if (p.node != id) continue;
      for (const GpuGrant& g : p.gpus) {
        gpu_jobs[g.gpu].push_back(jid);
        if (g.kind == GrantKind::kMig) instance_job[{g.gpu, g.mig_start}] = jid;
      }
    }
  }
  Json gpus = Json::array();
  for (const Gpu& g : n.gpus) {
    Json instances = Json::array();
    int64_t used = g.whole_held ? 1000 : g.shared_milli.v;
    for (const MigInstance& m : g.mig.instances()) {
      const MigProfile* p = g.model->find_profile_id(m.profile_id);
      auto it = instance_job.find({g.index, m.start});
      if (m.in_use) used += mig_milli(*g.model, m.profile_id);
      instances.push_back(Json{{"profile", p ? p->name : "?"}, {"start", m.start},
                               {"job", it == instance_job.end() ? Json(nullptr) : Json(it->second)}});
    }
    std::vector<int64_t> js = gpu_jobs[g.index];
    std::sort(js.begin(), js.end());
    js.erase(std::unique(js.begin(), js.end()), js.end());
    Json util = nullptr, mem_used = nullptr;
    if (g.index < na.gpu_stats.size()) {
      if (na.gpu_stats[g.index].utilization_pct >= 0) util = na.gpu_stats[g.index].utilization_pct;
      if (na.gpu_stats[g.index].memory_used_mib >= 0) mem_used = na.gpu_stats[g.index].memory_used_mib;
    }
    gpus.push_back(Json{{"index", g.index}, {"health", health_name(g.health)}, {"mig", g.mig_enabled},
                        {"used_milli", used}, {"jobs", js}, {"instances", instances},
                        {"utilization_pct", util}, {"memory_used_mib", mem_used}});
  }
  Json path = Json::array();
  for (size_t l = 0; l < n.path.size() && l < s.config.nodes.size(); ++l) {
    const auto& spec_path = s.config.nodes[id.value].path;
    if (l < spec_path.size()) path.push_back(spec_path[l]);
  }
  return Json{{"name", n.name}, {"path", path}, {"gpu_model", n.gpu_model() ? n.gpu_model()->name : ""},
              {"state", na.state}, {"reason", na.reason}, {"cpu_milli", n.cpu_capacity.v}, {"memory_mib", n.memory_capacity.v},
              {"cpu_milli_used", n.cpu_used.v}, {"memory_mib_used", n.memory_used.v},
              {"agent_last_seen", na.last_seen >= 0 ? Json(na.last_seen) : Json(nullptr)},
              {"agent", s.opt.agents_required ? Json(na.agent_ready ? "ready" : na.registered ? "not-ready" : "unknown")
                                              : Json("none (agentless)")},
              {"agent_address", na.address}, {"gpu_source", na.gpu_source}, {"gpus", gpus},
              {"reclaim_at", na.interrupted ? Json(na.reclaim_at) : Json(nullptr)}};
}
}  // namespace

Result<Json> Controller::node_op(const Principal& who, const std::string& node, const std::string& op, const std::string& reason) {
  return answer<Json>([=, this](State& s, const Reply& reply) {
    const std::optional<NodeId> id = s.admin_node(who, node, op + " node " + node, "only admins may " + op + " nodes", reply);
    if (!id) return;
    if (op != "resume" && reason.empty()) {
      reply->set_value(invalid_argument("reason: required for " + op + " (say why, e.g. \"replacing a DIMM\")"));
      return;
    }
    NodeAdmin& na = s.node_admin[id->value];
    na.notice_cordon = false;  // the admin's state from now on
    WriteBatch b;
    if (op == "resume") {
      na.state = "ready";
      na.reason.clear();

      s.refresh_schedulable(*id);
    } else {
      na.state = op == "cordon" ? "cordoned" : "draining";
      na.reason = reason;
      s.refresh_schedulable(*id);
      if (op == "drain") {
        std::vector<int64_t> ids(s.placed_ids.begin(), s.placed_ids.end());
        for (int64_t jid : ids) {
          JobRecord& r = s.jobs.at(jid);
          bool here = false;
          for (const TaskPlacement& p : r.job.placement) here = here || p.node == *id;
          if (here && r.job.state == JobState::kRunning)
            s.request_checkpoint(r, s.now() + r.spec.checkpoint.grace, "node " + node + " drained: " + reason, b);
        }
      }
    }
    b.events.push_back(s.event(0, "node_" + op, who.user, Json{{"node", node}, {"reason", reason}}));
    b.meta.push_back(s.node_meta(*id));
    s.after_release(b);
    s.dirty = true;
    s.reply_when_durable(std::move(b), reply, node_json(s, *id));
  });
}

Result<Json> Controller::node_interrupt(const Principal& who, const std::string& node, int64_t notice_s, int64_t reclaim_at) {
  return answer<Json>([=, this](State& s, const Reply& reply) {
    const std::optional<NodeId> id = s.admin_node(who, node, "interrupt node " + node, "only admins may report spot interruptions", reply);
    if (!id) return;
    const Pool& pool = s.cluster.pool(s.cluster.node(*id).pool);
    if (pool.kind != PoolKind::kSpot) {
      reply->set_value(failed_precondition("node " + node + " is in pool " + pool.name + " (kind " + pool_kind_name(pool.kind) +
                                           "): only spot nodes get interruption notices; use `tessera drain " + node +
                                           "` to move work off it"));
      return;
    }
    const Time t = s.now();
    const Time reclaim = reclaim_at >= 0 ? reclaim_at : t + (notice_s >= 0 ? notice_s : pool.notice_s);
    if (reclaim < t) {
      reply->set_value(invalid_argument("reclaim_at: " + std::to_string(reclaim) + " is in the past (now is " +
                                        std::to_string(t) + "); give a future time or notice_s"));
      return;
    }
    NodeAdmin& na = s.node_admin[id->value];
    WriteBatch b;
    bool handled = false;
    Json jobs = s.interrupt(*id, reclaim, who.user, b, &handled);
    Json answer{{"node", node_json(s, *id)}, {"reclaim_at", na.reclaim_at}, {"notice_s", std::max<int64_t>(0, na.reclaim_at - t)},
                {"jobs", jobs}};
    if (!handled) answer["note"] = "node " + node + " already has an interruption notice (reclaim at " + std::to_string(na.reclaim_at) + ")";
    s.reply_when_durable(std::move(b), reply, answer);
  });
}

std::vector<metrics::Family> Controller::metric_families() {
  auto g = call<std::vector<metrics::Family>>(
      [](State& s) -> Result<std::vector<metrics::Family>> { return s.gauges(); });
  std::vector<metrics::Family> out;
  if (g.ok()) out = std::move(*g);
  for (metrics::Family& f : state_->m.registry.collect()) out.push_back(std::move(f));
  return out;
}

Result<Json> Controller::utilisation(const Principal& who, int64_t minutes) {
  if (minutes < 1 || minutes > 1440)
    return invalid_argument("minutes: must be 1..1440 (the last N minutes; default 60), got " + std::to_string(minutes));
  return call<Json>([who, minutes](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    const Time from = s.now() - minutes * 60;
    Json series = Json::array();
    for (const auto& [key, sr] : s.util) {
      Json points = Json::array();
      for (const UtilPoint& p : sr.points)
        if (p.t > from) points.push_back(Json::array({p.t, p.allocated, p.used < 0 ? Json(nullptr) : Json(p.used)}));
      series.push_back(Json{{"model", key.first}, {"pool", key.second}, {"total_milli", sr.total_milli},
                            {"points", std::move(points)}});
    }
    return Json{{"step_s", std::max<int64_t>(1, s.opt.utilisation_step_s)}, {"series", std::move(series)}};
  });
}

config::ClusterConfig Controller::config_snapshot() {
  auto r = call<config::ClusterConfig>([](State& s) -> Result<config::ClusterConfig> { return s.config; });
  return r.ok() ? *r : config::ClusterConfig{};
}

// ---- agents -----------------------------------------------------------------------------------

namespace {

std::string gpu_list_text(const Node& n) {
  std::map<std::string, int> count;
  for (const Gpu& g : n.gpus) ++count[g.model->name];
  std::string out;
  for (const auto& [m, c] : count) out += (out.empty() ? "" : " + ") + std::to_string(c) + " × " + m;
  return out.empty() ? "no GPUs" : out;
}

// The MIG layout the controller holds for each GPU of a node (what its agent must converge to).
Json desired_mig(const Node& n) {
  Json out = Json::array();
  for (const Gpu& g : n.gpus) {
    if (!g.mig_enabled) continue;
    Json inst = Json::array();
    for (const MigInstance& m : g.mig.instances()) {
      const MigProfile* p = g.model->find_profile_id(m.profile_id);
      inst.push_back(Json{{"profile", p ? p->name : "?"}, {"start", m.start}});
    }
    out.push_back(Json{{"gpu", g.index}, {"instances", inst}});
  }
  return out;
}

// Whether a reported layout ({gpu, instances:[{profile,start}]}) equals the GPU's.
bool layout_matches(const Gpu& g, const MigLayoutReport& reported) {
  std::set<std::pair<std::string, int>> want, have;
  for (const MigInstance& m : g.mig.instances()) {
    const MigProfile* p = g.model->find_profile_id(m.profile_id);
    want.insert({p ? p->name : "?", m.start});
  }
  for (const auto& [profile, start] : reported.instances) have.insert({profile, start});
  return want == have;
}

// Charges `dt_ms` at each GPU's reported utilisation (the agent's previous sample) to the job's
// tasks on `node`; GPUs without a figure are not sampled.
void add_utilisation_sample(JobRecord& r, NodeId node, const std::vector<GpuSample>& held, int64_t dt_ms) {
  for (const TaskPlacement& p : r.job.placement) {
    if (p.node != node) continue;
    for (const GpuGrant& g : p.gpus) {
      if (g.gpu >= held.size()) continue;
      const int64_t util = held[g.gpu].utilization_pct;
      if (util < 0) continue;
      r.util_weighted += std::min<int64_t>(util, 100) * g.milli_held() * dt_ms;
      r.util_sampled += g.milli_held() * dt_ms;
    }
  }
}

}  // namespace

Result<Json> Controller::agent_register(const Principal& who, const Json& body) {
  auto parsed = parse_registration(body);
  if (!parsed.ok()) return parsed.error();
  const auto reg = std::make_shared<const AgentRegistration>(std::move(*parsed));
  const std::string& node = reg->node;
  const std::string& address = reg->address;
  return answer<Json>([=, this](State& s, const Reply& reply) {
    if (Status st = s.may_speak_for(who, node, "register"); !st.ok()) return reply->set_value(st.error());
    auto nid = s.cluster.find_node(node);
    if (!nid.ok()) {
      reply->set_value(not_found("node " + node + ": not in the cluster configuration; add it under nodes: (or start the agent with --node NAME of a configured node)"));
      return;
    }
    const Node& n = s.empty_cluster.node(*nid);
    const std::vector<InventoryGpu>& gpus = reg->gpus;
    if (gpus.size() != n.gpus.size()) {
      reply->set_value(failed_precondition("inventory: node " + node + " is configured with " + gpu_list_text(n) +
                                           " but its agent found " + std::to_string(gpus.size()) +
                                           " GPUs; fix the node in the cluster config or the agent's --gpus"));
      return;
    }
    for (size_t i = 0; i < gpus.size(); ++i) {
      const std::string& model = gpus[i].model;
      auto m = s.config.catalog->find(model);
      const std::string at = "inventory.gpus[" + std::to_string(i) + "]";
      if (!m.ok() || (*m)->name != n.gpus[i].model->name) {
        reply->set_value(failed_precondition(at + ": node " + node + " is configured with " + n.gpus[i].model->name +
                                             " but its agent found " + model +
                                             (m.ok() ? "" : " (not in the GPU catalog: declare it under gpu_models:)") +
                                             "; fix the node in the cluster config or the agent's --gpus"));
        return;
      }
      if (gpus[i].mig_enabled != n.gpus[i].mig_enabled) {
        reply->set_value(failed_precondition(
            at + ": MIG mode is " + (gpus[i].mig_enabled ? "on" : "off") + " on node " + node +
            " but the cluster config says " + (n.gpus[i].mig_enabled ? "on" : "off") +
            "; Tessera never changes MIG mode: set it with `nvidia-smi -i " + std::to_string(i) +
            " -mig 1|0` or fix the config"));
        return;
      }
    }
    NodeAdmin& na = s.node_admin[nid->value];
    const bool was_ready = na.agent_ready;
    na.registered = true;
    na.agent_ready = true;
    na.last_beat = s.opt.steady_clock();
    na.last_seen = s.now();
    na.beats = 0;
    na.address = address;
    na.log_port = reg->log_port;
    na.log_secret = reg->log_secret;
    na.agent_version = reg->version;
    na.gpu_source = reg->gpu_source;
    WriteBatch b;
    if (na.interrupted && (na.reclaimed || s.now() >= na.reclaim_at)) {  // a replacement machine
      na.interrupted = na.reclaimed = false;
      na.reclaim_at = -1;
      if (na.notice_cordon && na.state == "cordoned") {
        na.state = "ready";
        na.reason.clear();
        b.events.push_back(s.event(0, "node_resume", "agent:" + node,
                                   Json{{"node", node}, {"reason", "back after its spot interruption"}}));
      }
      na.notice_cordon = false;
      b.meta.push_back(s.node_meta(*nid));
    }
    s.refresh_schedulable(*nid);
    s.dirty = true;
    // The network position the agent was given should agree with the config (the config decides).
    std::string topo_mismatch;
    const auto& levels = s.config.levels;
    const auto& path = s.config.nodes[nid->value].path;
    for (size_t l = 0; l < levels.size() && l < path.size(); ++l)
      if (auto t = reg->topology.find(levels[l]); t != reg->topology.end() && t->second != path[l])
        topo_mismatch += (topo_mismatch.empty() ? "" : ", ") + levels[l] + "=" + t->second + " (config: " + path[l] + ")";
    Json answer{{"node", node}, {"heartbeat_interval_ms", s.opt.heartbeat_interval_ms},
                {"agent_timeout_ms", s.opt.agent_timeout_ms}};
    b.events.push_back(s.event(0, was_ready ? "node_registered" : "node_ready", "agent:" + node,
                               Json{{"node", node}, {"address", address}, {"gpus", gpu_list_text(n)},
                                    {"source", na.gpu_source}}));
    spdlog::info("event=node_ready node={} address={} gpus=\"{}\" source={}", node, address, gpu_list_text(n), na.gpu_source);
    if (!topo_mismatch.empty()) {
      spdlog::warn("event=node_topology_mismatch node={} agent=\"{}\" (the cluster config's path is used)", node, topo_mismatch);
      b.events.push_back(s.event(0, "node_topology_mismatch", "agent:" + node,
                                 Json{{"node", node}, {"agent_says", topo_mismatch}, {"used", "the cluster config's path"}}));
      answer["warning"] = "--topology disagrees with the cluster config: " + topo_mismatch + "; the config's path is used";
    }
    s.reply_when_durable(std::move(b), reply, answer);
  });
}

Result<Json> Controller::agent_heartbeat(const Principal& who, const Json& body) {
  auto parsed = parse_heartbeat(body);
  if (!parsed.ok()) return parsed.error();
  const auto report = std::make_shared<const HeartbeatReport>(std::move(*parsed));
  const std::string& node = report->node;
  const std::vector<TaskReport>& reported = report->tasks;
  const int64_t notice_at = report->notice ? report->noticed_at : -1, notice_reclaim = report->reclaim_at;
  return answer<Json>([=, this](State& s, const Reply& reply) {
    if (Status st = s.may_speak_for(who, node, "heartbeat"); !st.ok()) return reply->set_value(st.error());
    auto nid = s.cluster.find_node(node);
    if (!nid.ok()) {
      reply->set_value(not_found("node " + node + ": not in the cluster configuration"));
      return;
    }
    NodeAdmin& na = s.node_admin[nid->value];
    if (s.opt.agents_required && !na.registered) {
      reply->set_value(failed_precondition("not_registered: node " + node +
                                           " has not registered with this controller (it restarted?); register first"));
      return;
    }
    if (s.opt.agents_required && na.reclaimed) {
      reply->set_value(failed_precondition("not_registered: node " + node + " was reclaimed by its spot pool at " +
                                           std::to_string(na.reclaim_at) + "; its agent must register again"));
      return;
    }
    na.last_seen = s.now();
    const auto beat_at = s.opt.steady_clock();
    // Utilisation since the previous beat, charged to the jobs holding each GPU now (at most 3 intervals).
    const int64_t dt_ms = std::min<int64_t>(
        3 * s.opt.heartbeat_interval_ms,
        std::chrono::duration_cast<std::chrono::milliseconds>(beat_at - na.last_beat).count());
    na.last_beat = beat_at;
    // The utilisation an agent reported holds until its next report: charge the previous sample.
    const std::vector<GpuSample> held = std::exchange(na.gpu_stats, report->gpus);
    const bool sample = dt_ms > 0 && !held.empty();
    WriteBatch b;
    if (s.opt.agents_required && !na.agent_ready) {  // back after being NotReady
      na.agent_ready = true;
      s.refresh_schedulable(*nid);
      s.dirty = true;
      b.events.push_back(s.event(0, "node_ready", "agent:" + node, Json{{"node", node}, {"reason", "heartbeats resumed"}}));
    }
    const int64_t beat = ++na.beats;
    if (notice_at >= 0) {
      const Pool& pool = s.cluster.pool(s.cluster.node(*nid).pool);
      const Time reclaim = notice_reclaim >= 0 ? notice_reclaim : (notice_at > 0 ? notice_at : s.now()) + pool.notice_s;
      if (pool.kind != PoolKind::kSpot) {
        if (na.last_notice != reclaim) {
          na.last_notice = reclaim;
          b.events.push_back(s.event(0, "interruption_notice_ignored", "agent:" + node,
                                     Json{{"node", node}, {"reason", "node is in pool " + pool.name + " (kind " +
                                                                        pool_kind_name(pool.kind) + "), not spot"}}));
        }
      } else {
        bool handled = false;
        (void)s.interrupt(*nid, reclaim, "agent:" + node, b, &handled);
      }
    }
    Json stop = Json::array();
    std::set<std::pair<int64_t, int>> seen;
    std::set<int64_t> touched;
    for (const TaskReport& rep : reported) {
      const std::string state = reported_state_name(rep.state);
      JobRecord* r = s.jobs.find(rep.job);
      const bool current = r && placed(r->job.state) && rep.attempt == r->attempt && rep.task >= 0 &&
                           rep.task < int(r->job.placement.size()) && r->job.placement[rep.task].node == *nid;
      if (!current) {
        // Not wanted here (ended, requeued, an older attempt, another node): make sure it stops.
        if (rep.state == ReportedState::kRunning)
          stop.push_back(Json{{"job", rep.job}, {"attempt", rep.attempt}, {"task", rep.task}, {"checkpoint", false}});
        continue;
      }
      seen.insert({rep.job, rep.task});
      TaskRun& tr = r->tasks[rep.task];
      tr.recovered = false;
      if (tr.offered_beat < 0) tr.offered_beat = beat;
      if (rep.task == 0 && rep.master_port > 0 && r->master_port != rep.master_port) {
        r->master_port = rep.master_port;
        b.jobs.push_back(s.row(*r));
      }
      if (rep.saves > tr.saves) {  // a newly timed checkpoint: fold its cost in (mean with the previous)
        tr.saves = rep.saves;
        if (rep.cost_ms >= 0) {
          r->checkpoint_cost_ms = r->checkpoint_cost_ms < 0 ? rep.cost_ms : (r->checkpoint_cost_ms + rep.cost_ms + 1) / 2;
          b.jobs.push_back(s.row(*r));
        }
      }
      if (rep.answered_request && !tr.answered_request && r->job.state == JobState::kCheckpointing) {
        tr.answered_request = true;
        touched.insert(rep.job);
      }
      if (!rep.checkpoint.empty() && rep.checkpoint != tr.checkpoint) {
        tr.checkpoint = rep.checkpoint;
        if (rep.checkpoint != r->resume_from) {
          r->resume_from = rep.checkpoint;
          r->job.checkpoint.last = s.now();
          b.events.push_back(s.event(r->id, "checkpoint_acknowledged", "agent:" + node,
                                     Json{{"task", rep.task}, {"path", rep.checkpoint}, {"attempt", r->attempt}}));
          b.jobs.push_back(s.row(*r));
        }
      }
      if (tr.state != state) {
        tr.state = state;
        tr.exit_code = rep.exit_code;
        touched.insert(rep.job);
      }
    }
    // Each job with tasks here: its utilisation sample, then its tasks that were not reported.
    for (int64_t jid : std::vector<int64_t>(s.placed_ids.begin(), s.placed_ids.end())) {
      JobRecord& r = s.jobs.at(jid);
      if (!placed(r.job.state)) continue;
      if (sample) add_utilisation_sample(r, *nid, held, dt_ms);
      for (size_t t = 0; t < r.job.placement.size(); ++t) {
        if (r.job.placement[t].node != *nid || seen.count({jid, int(t)})) continue;
        TaskRun& tr = r.tasks[t];
        // Lost: loaded after a restart and not confirmed, or offered at an earlier heartbeat and no
        // longer (or never) reported running.
        const bool offered_before = tr.offered_beat >= 0 && tr.offered_beat < beat;
        if (tr.recovered || (offered_before && (tr.state == "running" || tr.state.empty()))) {
          s.lose(r, "task " + std::to_string(t) + " is not running on node " + node + " (the agent did not report it)", b);
          break;
        }
        if (tr.offered_beat < 0) tr.offered_beat = beat;
      }
    }
    // Jobs whose tasks changed state.
    for (int64_t jid : touched) {
      JobRecord& r = s.jobs.at(jid);
      if (!placed(r.job.state)) continue;
      bool any_failed = false, all_done = true, all_stopped = true;
      int exit_code = 0, failed_task = -1;
      for (size_t t = 0; t < r.tasks.size(); ++t) {
        const TaskRun& tr = r.tasks[t];
        if (tr.state == "failed" && !any_failed) any_failed = true, exit_code = tr.exit_code, failed_task = int(t);
        all_done = all_done && tr.state == "succeeded";
        all_stopped = all_stopped && (tr.state == "checkpointed" || tr.state == "stopped" || tr.state == "succeeded" ||
                                      (r.job.state == JobState::kCheckpointing && tr.state == "failed"));
      }
      if (r.job.state == JobState::kCheckpointing) {
        // Asked to stop: a task that fails now was stopped, not broken.
        if (all_stopped) {
          bool acked = false;
          for (const TaskRun& tr : r.tasks) acked = acked || tr.answered_request || tr.state == "checkpointed";
          s.requeue(r, "preempted", acked ? "checkpointed and stopped as asked" : "stopped without a checkpoint", b, acked);
        }
      } else if (any_failed) {
        r.exit_code = exit_code;
        s.finish(r, JobState::kFailed, "task " + std::to_string(failed_task) + " exited with code " + std::to_string(exit_code),
                 b, "agent:" + node, "failed", Json{{"exit_code", exit_code}, {"task", failed_task}});
      } else if (all_done) {
        r.exit_code = 0;
        s.finish(r, JobState::kSucceeded, "all tasks exited with code 0", b, "agent:" + node, "succeeded");
      } else if (all_stopped) {
        s.lose(r, "tasks stopped without being asked", b);
      }
    }
    // Tasks of ended attempts that this agent no longer runs give their resources back.
    if (!s.stopping_tasks.empty()) {
      std::set<std::tuple<int64_t, int64_t, int>> running_here;
      for (const TaskReport& rep : reported)
        if (rep.state == ReportedState::kRunning) running_here.insert({rep.job, rep.attempt, rep.task});
      s.release_stopped(*nid, &running_here, b);
    }
    // MIG layouts: a GPU being reconfigured is ready once its agent reports the new layout.
    const Node& n = s.cluster.node(*nid);
    for (const MigLayoutReport& m : report->mig) {
      const int gi = m.gpu;
      if (gi < 0 || size_t(gi) >= n.gpus.size()) continue;
      const Gpu& g = n.gpus[size_t(gi)];
      if (g.health != GpuHealth::kReconfiguring || !layout_matches(g, m)) continue;
      const GpuRef ref{*nid, uint16_t(gi)};
      (void)s.cluster.set_health(ref, GpuHealth::kHealthy);
      std::erase_if(s.mig_ready, [&](const auto& e) { return e.second == ref; });
      s.dirty = true;
    }
    // Desired state.
    Json run = Json::array();
    for (int64_t jid : s.placed_ids) {
      const JobRecord& r = s.jobs.at(jid);
      if (!placed(r.job.state)) continue;
      for (size_t t = 0; t < r.job.placement.size(); ++t) {
        if (r.job.placement[t].node != *nid) continue;
        Json a = task_assignment_json(r, int(t), s.cluster);
        const NodeAdmin& master = s.node_admin[r.job.placement[0].node.value];
        a["master_addr"] = master.address.empty() ? s.cluster.node(r.job.placement[0].node).name : master.address;
        a["master_port"] = r.master_port;
        a["resume_from"] = r.resume_from;
        a["restarts"] = r.restarts;
        if (const int64_t every = s.spot_save_interval(r); every > 0) {
          a["checkpoint_every_s"] = every;
          a["checkpoint_anchor"] = r.job.started;  // the same save times on every node of the gang
        }
        run.push_back(std::move(a));
        if (r.job.state == JobState::kCheckpointing) {
          // Once a task acknowledged a checkpoint, the others need not wait for theirs.
          bool acked = false;
          for (const TaskRun& tr : r.tasks) acked = acked || tr.answered_request;
          stop.push_back(Json{{"job", jid}, {"attempt", r.attempt}, {"task", t}, {"checkpoint", !acked},
                              {"signal", r.spec.checkpoint.signal},
                              {"grace", std::max<int64_t>(0, r.job.evict_by - s.now())}});
        }
      }
    }
    Json answer{{"run", run}, {"stop", stop}, {"mig", desired_mig(n)},
                {"heartbeat_interval_ms", s.opt.heartbeat_interval_ms}};
    if (b.empty()) {
      reply->set_value(answer);
    } else {
      s.dirty = true;
      s.reply_when_durable(std::move(b), reply, answer);
    }
  });
}

Result<Json> Controller::log_source(const Principal& who, int64_t id, int task) {
  return call<Json>([who, id, task](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    const JobRecord* r = s.jobs.find(id);
    if (!r) return not_found("job " + std::to_string(id) + ": no such job");
    if (Status st = s.may_see_detail(who, *r); !st.ok()) return st.error();
    if (r->last_nodes.empty()) return not_found("job " + std::to_string(id) + ": has not started yet, so it has no logs");
    if (task < 0 || size_t(task) >= r->last_nodes.size())
      return invalid_argument("task: job " + std::to_string(id) + " has tasks 0.." + std::to_string(r->last_nodes.size() - 1));
    const std::string& node = r->last_nodes[size_t(task)];
    auto nid = s.cluster.find_node(node);
    if (!nid.ok()) return not_found("node " + node + " is no longer in the configuration");
    const NodeAdmin& na = s.node_admin[nid->value];
    if (!na.registered || na.log_port == 0)
      return Error{ErrorCode::kUnavailable, "node " + node + ": its agent has not registered with this controller, so its logs cannot be reached; retry when `tessera nodes` shows it ready"};
    return Json{{"node", node}, {"address", na.address}, {"log_port", na.log_port}, {"log_secret", na.log_secret},
                {"attempt", r->attempt}};
  });
}

// ---- tokens, events, config -------------------------------------------------------------------

Result<Json> Controller::create_token(const Principal& who, const std::string& user, const std::string& role_text,
                                      const std::string& queue, const std::string& node) {
  auto role = parse_role(role_text);
  if (!role.ok()) return role.error();
  if (user.empty()) return invalid_argument("user: required");
  if (*role == Role::kAgent && node.empty())
    return invalid_argument("node: required for agent tokens: the node it speaks for, or a pattern such as gpu-* (* for every node)");
  if (*role != Role::kAgent && !node.empty()) return invalid_argument("node: only agent tokens are bound to a node");
  return answer<Json>([=, this](State& s, const Reply& reply) {
    if (Status st = perm::admin_only(who, "create tokens"); !st.ok()) {
      s.deny(who, "create token", st.message());
      return reply->set_value(st.error());
    }
    const bool scoped = *role == Role::kTeamLead || *role == Role::kMember;
    if (scoped && !s.tree->find(queue).ok()) {
      reply->set_value(invalid_argument("queue: " + std::string(role_name(*role)) + " tokens need a known queue (got \"" + queue + "\")"));
      return;
    }
    if (!scoped && !queue.empty()) {
      reply->set_value(invalid_argument("queue: only team-lead and member tokens have a queue"));
      return;
    }
    const std::string token = new_token();
    TokenRow row{sha256_hex(token), user, role_name(*role), queue, s.now(), false, node};
    WriteBatch b;
    b.tokens.push_back(row);
    Json detail{{"user", user}, {"role", row.role}, {"queue", queue}};
    if (!node.empty()) detail["node"] = node;
    b.events.push_back(s.event(0, "token_created", who.user, std::move(detail)));
    Controller* self = s.self;
    s.persist(std::move(b), [self, reply, row, token](Status st) {
      if (!st.ok()) {
        reply->set_value(store_failure(st, "the token was not created"));
        return;
      }
      self->tokens_.add(row);
      Json answer{{"token", token}, {"user", row.user}, {"role", row.role}, {"queue", row.queue}};
      if (!row.node.empty()) answer["node"] = row.node;
      reply->set_value(answer);
    });
  });
}

Result<Json> Controller::revoke_token(const Principal& who, const std::string& id) {
  if (id.size() < 6 || id.size() > 64 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
    return invalid_argument("id: a token id is 6 to 64 lowercase hex digits, as `tessera token list` shows");
  return answer<Json>([=, this](State& s, const Reply& reply) {
    if (Status st = perm::admin_only(who, "revoke tokens"); !st.ok()) {
      s.deny(who, "revoke token", st.message());
      return reply->set_value(st.error());
    }
    std::vector<TokenRow> match;
    int active_admins = 0;
    for (const TokenRow& r : tokens_.list()) {
      if (r.hash.rfind(id, 0) == 0) match.push_back(r);
      active_admins += r.role == "admin" && !r.revoked;
    }
    if (match.empty()) return reply->set_value(not_found("id: no token " + id + "; `tessera token list` shows them"));
    if (match.size() > 1) return reply->set_value(failed_precondition("id: " + id + " names " + std::to_string(match.size()) + " tokens; give more digits"));
    TokenRow row = match[0];
    if (row.revoked) return reply->set_value(Json{{"id", row.hash.substr(0, 12)}, {"user", row.user}, {"revoked", true}});
    if (row.role == "admin" && active_admins <= 1)
      return reply->set_value(failed_precondition("id: " + id + " is the last admin token; create another admin token first"));
    row.revoked = true;
    WriteBatch b;
    b.tokens.push_back(row);
    b.events.push_back(s.event(0, "token_revoked", who.user, Json{{"id", row.hash.substr(0, 12)}, {"user", row.user}, {"role", row.role}}));
    Controller* self = s.self;
    s.persist(std::move(b), [self, reply, row](Status st) {
      if (!st.ok()) return reply->set_value(store_failure(st, "the token was not revoked"));
      self->tokens_.add(row);  // in force for the next request
      reply->set_value(Json{{"id", row.hash.substr(0, 12)}, {"user", row.user}, {"role", row.role}, {"revoked", true}});
    });
  });
}

Result<Json> Controller::list_tokens(const Principal& who) {
  if (Status st = perm::admin_only(who, "list tokens"); !st.ok()) {
    audit_denied(who, "list tokens", st.message());
    return st.error();
  }
  Json out = Json::array();
  for (const TokenRow& r : tokens_.list())
    out.push_back(Json{{"id", r.hash.substr(0, 12)}, {"user", r.user}, {"role", r.role}, {"queue", r.queue},
                       {"node", r.role == "agent" ? (r.node.empty() ? Json("*") : Json(r.node)) : Json(nullptr)},
                       {"created", r.created}, {"revoked", r.revoked}});
  return Json{{"tokens", out}};
}

Result<Json> Controller::events(const Principal& who, int64_t after, int64_t limit) {
  if (Status st = perm::may_read_events(who); !st.ok()) {
    audit_denied(who, "read events", st.message());
    return st.error();
  }
  auto ev = store_->events_after(after, std::clamp<int64_t>(limit, 1, 10000));
  if (!ev.ok()) return ev.error();
  Json out = Json::array();
  for (const EventRow& e : *ev) out.push_back(event_json(e));
  return Json{{"events", out}};
}

void Controller::audit_denied(const Principal& who, const std::string& what, const std::string& why) {
  (void)call<int>([who, what, why](State& s) -> Result<int> {
    s.deny(who, what, why);
    return 0;
  });
}

Status Controller::reload(config::ClusterConfig cfg, const std::string& who) {
  auto r = call<Json>([&cfg, who](State& s) -> Result<Json> {
    if (cfg.nodes.size() != s.config.nodes.size())
      return failed_precondition("reload: the node list changed (" + std::to_string(s.config.nodes.size()) + " -> " +
                                 std::to_string(cfg.nodes.size()) + " nodes); node changes need a restart");
    for (size_t i = 0; i < cfg.nodes.size(); ++i) {
      const auto& now = s.config.nodes[i];
      const auto& next = cfg.nodes[i];
      const char* what = next.name != now.name             ? "its name"
                         : next.gpu_model != now.gpu_model ? "its GPU model"
                         : next.gpu_count != now.gpu_count ? "its GPU count"
                         : next.pool != now.pool           ? "its pool"
                                                           : nullptr;
      if (what)
        return failed_precondition("reload: node " + now.name + " changed " + what + "; node changes need a restart");
    }
    // Pool names and kinds are in the cluster state: changing them needs a restart. Prices and the
    // other pool facts apply to reports from now on.
    bool pools_same = cfg.pools.size() == s.config.pools.size();
    for (size_t i = 0; pools_same && i < cfg.pools.size(); ++i)
      pools_same = cfg.pools[i].name == s.config.pools[i].name && cfg.pools[i].kind == s.config.pools[i].kind;
    if (!pools_same) return failed_precondition("reload: the pools' names or kinds changed; pool changes need a restart");
    auto tree = QueueTree::build(cfg.queues);
    if (!tree.ok()) return tree.error();
    for (int64_t id : s.active_ids) {
      const JobRecord& jr = s.jobs.at(id);
      auto q = tree->find(jr.queue_name);
      if (!q.ok() || !tree->queue(*q).leaf())
        return failed_precondition("reload: queue " + jr.queue_name + " holds job " + std::to_string(id) +
                                   " but is gone or no longer a leaf; cancel or finish its jobs first");
      bool known = false;
      for (const PriorityClass& pc : cfg.scheduler.priority_classes) known = known || pc.name == jr.job.priority_class;
      if (!known)
        return failed_precondition("reload: priority class " + jr.job.priority_class + " is used by job " +
                                   std::to_string(id) + " but is gone from the config");
    }
    auto sched = Scheduler::create(cfg.scheduler);
    if (!sched.ok()) return sched.error();
    auto pol = make_policy(cfg.scheduler.policy);
    if (!pol.ok()) return pol.error();
    // Commit: queue ids may have changed; remap the jobs.
    auto new_tree = std::make_shared<const QueueTree>(std::move(*tree));
    s.jobs.walk(0, [&](JobRecord& jr) {
      auto q = new_tree->find(jr.queue_name);
      if (q.ok()) jr.job.queue = jr.job.gang.queue = *q;
      return true;
    });
    std::vector<double> usage(new_tree->size(), 0.0);
    for (const Queue& q : s.tree->queues()) {
      auto nq = new_tree->find(q.name);
      if (nq.ok() && q.id.value < s.usage.size()) usage[nq->value] = s.usage[q.id.value];
    }
    s.usage = std::move(usage);
    s.tree = std::move(new_tree);
    s.scheduler = std::move(*sched);
    s.fit_policy = std::move(*pol);
    s.config.queues = cfg.queues;
    s.config.queue_classes = cfg.queue_classes;
    s.config.scheduler = cfg.scheduler;
    s.config.chargeback = cfg.chargeback;  // rates apply to reports from now on
    s.config.pools = cfg.pools;            // pool prices too
    s.never_fits_cache.clear();
    ++s.config_generation;
    s.dirty = true;
    WriteBatch b;
    b.events.push_back(s.event(0, "config_reloaded", who, Json{{"queues", cfg.queues.size()}}));
    s.persist(std::move(b));
    return Json::object();
  });
  return r.ok() ? Status() : Status(r.error());
}

Json Controller::health() {
  auto r = call<Json>([](State& s) -> Result<Json> {
    int64_t pending = 0, running = 0;
    for (int64_t id : s.active_ids) (s.jobs.at(id).job.state == JobState::kPending ? pending : running) += 1;
    return Json{{"status", "ok"}, {"jobs", s.jobs.size()}, {"pending", pending}, {"running", running},
                {"nodes", s.cluster.node_count()}, {"version", "0.1.0"}};
  });
  return r.ok() ? *r : Json{{"status", "unavailable"}};
}

}  // namespace tessera::server
