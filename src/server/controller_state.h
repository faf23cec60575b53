// The controller's state and its helpers, shared by the files that implement Controller and its
// State: controller.cc (start, threads, reload, health), controller_jobs.cc (the job API),
// controller_nodes.cc (nodes, utilisation), controller_agents.cc (the agent protocol),
// controller_tokens.cc (tokens, the event log), controller_recovery.cc (loading the store at start),
// and State's own parts: controller_lifecycle.cc
// (release, finish, requeue, lose, checkpoint requests), controller_spot.cc (spot saves, notices,
// reclaims), controller_cycle.cc (the cycle's input and decisions, ticks, agent liveness, usage) and
// controller_metrics.cc (gauges). Internal to src/server: nothing outside these files includes it.
// The parts that stand on their own (cycle input, node admin state, metrics, the command loop) are
// in controller_parts.h. Controller::State is owned by the state thread (controller.h says how the
// threads hand work over); answer()/call() are the one way in.
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
#include "core/sched/apply.h"
#include "core/sched/runtime_history.h"
#include "core/sched/scheduler.h"
#include "config/text.h"
#include "server/agent_protocol.h"
#include "server/controller_parts.h"
#include "server/event_kind.h"
#include "server/job_data.h"
#include "server/job_record.h"
#include "server/permissions.h"

namespace tessera::server {

using Reply = std::shared_ptr<Answer<Json>>;
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
  return Json{{"seq", e.seq},
              {"job", e.job_id},
              {"time", e.time},
              {"time_ms", e.time_ms >= 0 ? e.time_ms : e.time * 1000},
              {"kind", e.kind},
              {"actor", e.actor},
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

// Why an agent's node name is refused, naming the configured nodes (controller_agents.cc).
std::string unknown_node_text(const ClusterState& c, const std::string& node);

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
  std::map<std::string, std::string> never_fits_cache;  // request shape -> reason ("" = fits), at most:
  static constexpr size_t kMaxNeverFitsCache = 4096;
  JobTable jobs;                                         // every job ever submitted, by id
  std::vector<StoppingTask> stopping_tasks;              // held until their agents report them gone
  std::set<int64_t> active_ids;                          // pending, running, checkpointing
  std::set<int64_t> placed_ids;                          // running, checkpointing
  // The placed jobs with a task on each node (by NodeId), so that a heartbeat costs what is on its
  // node, not a walk of every placed job; kept with placed_ids by mark_placed / unmark_placed.
  std::vector<std::set<int64_t>> jobs_by_node;
  // Each placed job's index entries, and what it counts in its leaf queue's usage.
  struct PlacedIndex {
    std::vector<uint32_t> nodes;
    uint32_t queue = 0;
    int64_t milli = 0;
  };
  std::map<int64_t, PlacedIndex> placed_index;
  void mark_placed(const JobRecord& r) {
    advance_usage(stamp_ms());  // the time before counts what was placed until now
    placed_ids.insert(r.id);
    if (jobs_by_node.size() < cluster.nodes().size()) jobs_by_node.resize(cluster.nodes().size());
    PlacedIndex& x = placed_index[r.id];
    for (const TaskPlacement& p : r.job.placement)
      if (jobs_by_node[p.node.value].insert(r.id).second) x.nodes.push_back(p.node.value);
    count_usage(x, -1);
    x.queue = r.job.queue.value;
    x.milli = gpu_milli(r);
    count_usage(x, +1);
  }
  void unmark_placed(int64_t id) {
    advance_usage(stamp_ms());
    placed_ids.erase(id);
    auto it = placed_index.find(id);
    if (it == placed_index.end()) return;
    for (uint32_t n : it->second.nodes) jobs_by_node[n].erase(id);
    count_usage(it->second, -1);
    placed_index.erase(it);
  }
  // The placed jobs with a task on `n`, in id order (a copy: the caller may end them).
  std::vector<int64_t> jobs_on(NodeId n) const {
    if (n.value >= jobs_by_node.size()) return {};
    return std::vector<int64_t>(jobs_by_node[n.value].begin(), jobs_by_node[n.value].end());
  }
  // Idempotency keys are each user's own: (user, key) -> job id.
  std::map<std::pair<std::string, std::string>, int64_t> by_idempotency_key;
  std::vector<NodeAdmin> node_admin;                     // by NodeId
  // Fair-share usage: per queue id, the decayed share of the cluster's GPUs its placed jobs held,
  // integrated over milliseconds at every change of what is placed (as the simulator integrates
  // between events), not sampled at cycles.
  std::vector<double> usage;                             // decayed usage per queue id
  std::vector<int64_t> queue_milli;                      // GPU milli placed per leaf queue id now
  int64_t usage_at_ms = 0;                               // the time `usage` is integrated to
  void advance_usage(int64_t t_ms);
  void count_usage(const PlacedIndex& x, int sign) {
    if (x.milli == 0) return;
    if (queue_milli.size() <= x.queue) queue_milli.resize(size_t(x.queue) + 1, 0);
    queue_milli[x.queue] += sign * x.milli;
  }
  void recount_usage();  // queue_milli from the placed jobs (after the queue ids changed)
  Time usage_saved_at = 0;
  std::map<GpuRef, Time> mig_last_changed;
  // The backfill reservation the last cycle held: passed back to the next cycle so that it holds
  // (core/sched/scheduler.h, HeldReservation); stored as meta "scheduler/reservation".
  std::optional<HeldReservation> reservation;
  std::vector<std::pair<Time, GpuRef>> mig_ready;        // GPUs reconfiguring until then
  RuntimeHistory runtimes;
  int64_t next_id = 1;
  ControllerMetrics m;
  std::map<std::pair<std::string, std::string>, UtilSeries> util;  // (model, pool) -> samples
  Time util_last = -1;                                               // time of the latest sample

  StateLoop loop;    // the threads and their hand-offs (Controller's start/stop/answer use it)
  bool dirty = true;  // something changed since the last cycle began: run one soon

  Time now() const { return opt.clock(); }
  // Unix milliseconds within now()'s second: the wall clock's when it is within a second of now()
  // (kept inside that second, should the clock tick between the two reads), else now() * 1000 (a
  // test's clock), so that *_ms and the seconds never disagree.
  int64_t now_ms() const {
    const Time s = now();
    const int64_t wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (wall < (s - 1) * 1000 || wall >= (s + 2) * 1000) return s * 1000;
    return std::clamp<int64_t>(wall, s * 1000, s * 1000 + 999);
  }
  // While set (>= 0): the unix ms at which the change being applied happened (a cycle's decisions),
  // and so the time of every event it records (event(), stamp_ms()). -1: each event is stamped now.
  int64_t moment_ms = -1;
  int64_t stamp_ms() const { return moment_ms >= 0 ? moment_ms : now_ms(); }
  Clock::time_point started_at = Clock::now();

  // A node takes new work when its admin state is ready and (with agents) its agent is ready.
  bool node_usable(NodeId id) const {
    const NodeAdmin& na = node_admin[id.value];
    return na.state == NodeAdminState::kReady && !na.leaving && (!opt.agents_required || na.agent_ready);
  }
  void refresh_schedulable(NodeId id) { (void)cluster.set_schedulable(id, node_usable(id)); }

  // After a change: once min_cycle_gap has passed and the cycle thread has rested twice as long as
  // the last cycle took (so cycles take at most a third of a core, leaving the rest to the API).
  // Otherwise: every cycle_interval.
  Clock::time_point next_cycle_at() const {
    if (!dirty) return loop.last_cycle_start + std::chrono::milliseconds(opt.cycle_interval_ms);
    const Clock::duration rest = std::max<Clock::duration>(std::chrono::milliseconds(opt.min_cycle_gap_ms),
                                                           2 * (loop.last_cycle_end - loop.last_cycle_start));
    return loop.last_cycle_end + rest;
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

  // An event now (stamp_ms()), or at `at_ms` (unix ms from stamp_ms(), which a job field records
  // too); its seconds and milliseconds are one reading.
  EventRow event(int64_t job, EventKind kind, const std::string& actor, Json detail = Json::object(), int64_t at_ms = -1) const {
    const int64_t ms = at_ms >= 0 ? at_ms : stamp_ms();
    // Replace, never throw: every text was checked at the edge, and a slip must not abort the thread.
    return EventRow{0, job, ms / 1000, event_kind_name(kind), actor, detail.dump(-1, ' ', false, Json::error_handler_t::replace), ms};
  }

  JobRow row(const JobRecord& r) const {
    // The record is encoded on the store's writer thread, not here on the state thread.
    return JobRow{r.id, job_state_name(r.job.state), r.queue_name, r.job.user, r.job.submitted, {}, stored_record_encoder(r, cluster)};
  }

  // Queues the batch; `done` gets the store's verdict on the writer thread. Once it is durable, the
  // agents of the nodes it tells something (nodes_told) are woken, except `answered`'s, whose agent
  // gets the change in the answer it is waiting for.
  void persist(WriteBatch b, std::function<void(Status)> done = nullptr, std::optional<NodeId> answered = std::nullopt);

  void reply_when_durable(WriteBatch b, Reply reply, Json answer, std::optional<NodeId> answered = std::nullopt) {
    persist(std::move(b), [reply, answer = std::move(answer)](Status s) {
      if (s.ok())
        reply->set_value(answer);
      else
        reply->set_value(store_failure(s, "the change was not saved"));
    }, answered);
  }

  // ---- agents' watches (controller_watch.cc) ------------------------------------------------------
  // A node's notice number changes whenever what its agent must hear changes (a task to start or
  // stop, a checkpoint or signal, a MIG layout); an agent's watch is answered when it differs from
  // the one the agent saw, so decisions reach agents at once, not on their next heartbeat. Numbers
  // start from the controller's start time in microseconds, so they never repeat across restarts.
  struct NodeWatch {
    int64_t seen = 0;
    Clock::time_point until{};
    std::function<void(Result<Json>)> done;
  };
  static constexpr size_t kMaxWatchesPerNode = 4;  // more: the oldest is answered at once
  std::vector<int64_t> node_seq;                    // by NodeId
  std::map<uint32_t, std::vector<NodeWatch>> watches;  // open watches by node
  Clock::time_point next_watch_expiry = Clock::time_point::max();
  int64_t seq_of(NodeId id);
  std::vector<NodeId> nodes_told(const WriteBatch& b) const;
  void notify_nodes(const std::vector<NodeId>& nodes);
  void watch(NodeId id, NodeWatch w);
  void expire_watches(Clock::time_point now);  // answers watches past their time

  // The job's state changes (start, checkpoint request, leaving, ending) are core's
  // (core/sched/apply.h); what it gives back is released there, except that with agents a task whose
  // process may still run (its agent last reported it running, or was sent it) keeps its GPUs until
  // the agent reports it gone: the next job must not start on a GPU whose memory a stopping process
  // still holds. tasks_kept says which; gave_back holds them as stopping tasks.
  std::vector<bool> tasks_kept(const JobRecord& r) const;
  void gave_back(JobRecord& r, const Vacated& v);

  // Frees the GPUs of stopping tasks on `node` that `still_running` does not hold (all when null).
  void release_stopped(NodeId node, const std::set<std::tuple<int64_t, int64_t, int>>* still_running, WriteBatch& b);

  // Ends a placed or pending job for good.
  void finish(JobRecord& r, JobState final_state, const std::string& reason, WriteBatch& b, const std::string& actor,
              EventKind kind, Json detail = Json::object());

  // The attempt's mean measured GPU utilisation (for accounting), when agents reported any.
  static void add_utilisation(JobRecord& r, Json& detail);

  // Back to pending (preempted, drained, lost): the job keeps its id and place in the order.
  void requeue(JobRecord& r, EventKind kind, const std::string& reason, WriteBatch& b, bool checkpointed,
               Json extra = Json::object());
  // What follows once a job has left at t (core's vacate; `v` is what it gave back): metrics, attained
  // service, stopping tasks, events and its row.
  void requeued(JobRecord& r, const Vacated& v, Time t, EventKind kind, const std::string& reason, WriteBatch& b,
                bool checkpointed, Json extra = Json::object());

  // A placed job lost a task to its node (agent gone, task vanished): requeued by its restart policy
  // (resuming from its last acknowledged checkpoint) after a backoff, or failed past max_restarts.
  // Requeues a job that lost a task (restart policy, backoff). hold_until (unix s): it restarts no
  // sooner, so that an old attempt its silent agent may still run has been fenced (task lease).
  void lose(JobRecord& r, const std::string& reason, WriteBatch& b, Time hold_until = -1);

  // GPU-hours the current attempt of a placed job has held until t.
  static double attempt_gpu_hours(const JobRecord& r, Time t) { return attempt_gpu_hours(gpu_milli(r), r.job.started, t); }
  // GPU-hours of an attempt started at `started` (-1: none) that held `milli` until t.
  static double attempt_gpu_hours(int64_t milli, Time started, Time t) {
    if (started < 0) return 0;
    return double(milli) / 1000.0 * double(std::max<Time>(0, t - started)) / 3600.0;
  }

  static int64_t gpu_milli(const JobRecord& r) { return milli_held(r.job.placement); }

  // Asks a running job to checkpoint and stop (or stops it now if it cannot checkpoint).
  void request_checkpoint(JobRecord& r, Time evict_by, const std::string& reason, WriteBatch& b);
  // The events and row of a job asked to checkpoint (core's request_checkpoint changed its state).
  void checkpoint_requested(JobRecord& r, Time evict_by, const std::string& reason, WriteBatch& b);

  // A draining node with nothing left on it becomes drained.
  void after_release(WriteBatch& b);

  std::pair<std::string, std::string> node_meta(NodeId id) const {
    const NodeAdmin& na = node_admin[id.value];
    return {"node/" + cluster.node(id).name,
            Json{{"state", node_admin_state_name(na.state)}, {"reason", na.reason}, {"interrupted", na.interrupted}, {"reclaimed", na.reclaimed},
                 {"notice_cordon", na.notice_cordon}, {"reclaim_at", na.reclaim_at}, {"last_notice", na.last_notice}}
                .dump()};
  }

  // ---- workflow: arrays, dependencies, holds, begin times, requeues (controller_workflow.cc) -----

  std::map<int64_t, std::vector<int64_t>> arrays;  // array job id -> its elements' ids, in index order

  // The jobs a reference names: a job; an array job id: all its elements; ID_N: that element. Empty = none.
  std::vector<int64_t> resolve(const config::JobRef& ref) const;
  // Sets every pending job's gate at t (held, begin time, dependency, array task limit, backoff) and
  // returns the pending jobs that may go before the scheduler. Jobs whose dependency can never be
  // satisfied and that asked kill_on_invalid_dep are cancelled into `b`.
  std::set<int64_t> gate_pending(Time t, WriteBatch& b);
  // Why a checkpointing job stops: the event that ends its attempt, and its reason with who asked.
  EventKind stop_event(const JobRecord& r) const {
    return r.stop_cause == StopCause::kPreempt ? EventKind::kPreempted : EventKind::kInterrupted;
  }
  std::string stop_text(const JobRecord& r, const std::string& how) const {
    if (r.stop_cause == StopCause::kRequeue) return "requeued by " + r.stop_by + ": " + how;
    if (r.stop_cause == StopCause::kPlannedStop) return "planned stop (" + r.stop_by + "): " + how;
    return how;
  }
  // Stops a placed job for its user's requeue or a planned stop: checkpoint first when it can (by
  // its grace), else now. No restart or preemption is counted; it goes back to pending.
  void interrupt_job(JobRecord& r, StopCause cause, const std::string& by, WriteBatch& b);

  // ---- spot interruptions -----------------------------------------------------------------------

  // The job's checkpoint cost in seconds (rounded up): measured, else its spec's grace (an upper
  // estimate), else 60. `measured` says which.
  static int64_t checkpoint_cost_s(const JobRecord& r, bool* measured = nullptr);

  // How often the agent asks a running job on interrupted spot nodes to save (Young's rule per spot
  // pool it spans, the shortest); 0 = not on such nodes or the job does not checkpoint.
  int64_t spot_save_interval(const JobRecord& r) const;

  // A spot interruption notice for node `id` (reclaimed at `reclaim_at`): cordons it and, per job
  // with a task there, counts the interruption and either asks for a checkpoint by reclaim_at (when
  // its checkpoint fits in the notice) or requeues it from its last checkpoint. Returns what
  // happened to each job; empty and `handled` false when this notice was already handled.
  Json interrupt(NodeId id, Time reclaim_at, const std::string& actor, WriteBatch& b, bool* handled);

  static std::string spot_avoid_text(int n);

  // At its reclaim time an interrupted node is gone: NotReady (with agents) until its agent
  // registers again; jobs still running there are lost (checkpointing ones hit their deadline).
  void reclaim_due(WriteBatch& b, Time t);

  // The job, or nullptr after answering 404.
  JobRecord* find_or_reply(int64_t id, const Reply& reply) {
    JobRecord* r = jobs.find(id);
    if (!r) reply->set_value(not_found("job " + std::to_string(id) + ": no such job"));
    return r;
  }

  // ---- permissions ------------------------------------------------------------------------------

  Status may_read(const Principal& who) const { return perm::may_read(who); }

  Status may_use_class(const Principal& who, const std::string& queue, const std::string& cls) const {
    return perm::may_use_class(who, config, queue, cls);
  }

  // With --agentless nothing runs the tasks: a placed job says so, or it would look stuck unexplained.
  void explain_agentless(const JobRecord& r, Json& j) const {
    if (opt.agents_required || (r.job.state != JobState::kRunning && r.job.state != JobState::kCheckpointing)) return;
    const std::string was = j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>() : "";
    j["reason"] = std::string(kAgentlessReason) + (was.empty() ? "" : "; " + was);
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

  CycleInput cycle_input_now();

  void apply(const Decisions& d, uint64_t generation);

  std::pair<std::string, std::string> mig_meta(GpuRef g) const;

  // Agents silent for agent_timeout make their nodes NotReady; jobs with a task on a node that is not
  // ready (after a restart: that has not registered within agent_timeout) are lost.
  void check_agents(WriteBatch& b, Clock::time_point wall);

  // Time-driven work: MIG layouts ready, checkpoint deadlines, time limits.
  void tick();

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
  void sample_utilisation(Time t);

  static metrics::Family gauge_family(const char* name, const char* help, std::vector<std::string> labels);

  // The gauges, computed from the state now.
  std::vector<metrics::Family> gauges() const;
};

// Loads what the store holds into a fresh State (controller_recovery.cc). Answers the batch that
// records what could not be restored as it was (placements that no longer fit: requeued).
Result<WriteBatch> recover(Controller::State& s, const LoadedState& loaded);

// ---- the one way in: answer() and call() ------------------------------------------------------------

// Answers `reply` with `e` unless the command answered already (a command that threw after its
// answer was set, or after handing the reply to the store).
template <class T>
inline void answer_once(const std::shared_ptr<Answer<T>>& reply, Error e) {
  try {
    reply->set_value(std::move(e));
  } catch (const std::future_error&) {
  }
}

template <class T>
Result<T> Controller::answer(std::function<void(State&, const std::shared_ptr<Answer<T>>&)> fn) {
  auto promise = std::make_shared<std::promise<Result<T>>>();
  auto f = promise->get_future();
  answer_async<T>(std::move(fn), [promise](Result<T> r) { promise->set_value(std::move(r)); });
  return f.get();
}

template <class T>
void Controller::answer_async(std::function<void(State&, const std::shared_ptr<Answer<T>>&)> fn,
                              std::function<void(Result<T>)> done) {
  auto p = std::make_shared<Answer<T>>(std::move(done));
  {
    std::lock_guard lock(state_->loop.mu);
    if (state_->loop.stopping) return p->set_value(Error{ErrorCode::kUnavailable, "the server is shutting down; retry shortly"});
    // No exception leaves a command: it is logged and its caller answered 500; the state thread goes on.
    state_->loop.commands.push_back([p, fn = std::move(fn)](State& s) {
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
  state_->loop.cv.notify_one();
}

template <class T>
Result<T> Controller::call(std::function<Result<T>(State&)> fn) {
  return answer<T>([fn = std::move(fn)](State& s, const std::shared_ptr<Answer<T>>& reply) { reply->set_value(fn(s)); });
}

// Jobs whose tasks changed state (reported by `node`'s agent): requeued (asked to stop, stopped),
// failed, succeeded or lost (controller_agents.cc).
void settle_jobs(Controller::State& s, const std::set<int64_t>& touched, const std::string& node, WriteBatch& b);

}  // namespace tessera::server
