// run_schedule_scenario (schedule_sim.h): the event loop of a timed scheduling scenario. Each step:
// usage history, MIG layouts ready, completions/time-outs/exits, cluster events, arrivals, one
// Scheduler cycle whose decisions are applied as a controller would (docs/scenarios.md), then the
// invariants and the expectations due (schedule_sim_checks.cc). Single-threaded.
#include <algorithm>
#include <limits>

#include "config/cluster_config.h"
#include "core/sched/apply.h"
#include "sim/schedule_sim_run.h"

namespace tessera::sim {

ApplyOptions scenario_apply_options() {
  ApplyOptions o;
  o.leave = LeaveMode::kByCaller;  // jobs leave as the step settles (stop_at = now), after the checks
  o.started = StartClock::kAfterRestartCost;
  o.checkpoint_on_start = CheckpointOnStart::kFromStart;
  return o;
}

namespace detail {
namespace {

constexpr Time kNever = std::numeric_limits<Time>::max();
constexpr int kMaxCycles = 20000;

Time floor_div(Time a, Duration b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::string layout_text(const ClusterState& c, GpuRef g, const std::vector<MigInstance>& layout) {
  const GpuModel* m = c.node(g.node).gpus[g.index].model;
  std::string s;
  for (const MigInstance& i : layout) {
    const MigProfile* p = m ? m->find_profile_id(i.profile_id) : nullptr;
    s += (s.empty() ? "" : " ") + (p ? p->name : "?") + "@" + std::to_string(i.start);
  }
  return s.empty() ? "(empty)" : s;
}

}  // namespace

std::string ScenarioRun::gpu_text(GpuRef g) const {
  return "node " + cluster_.node(g.node).name + " GPU " + std::to_string(g.index);
}

Time ScenarioRun::timeout_time(const LiveJob& l) const {
  return l.job.max_runtime > 0 ? l.job.started + l.job.max_runtime : kNever;
}

Time ScenarioRun::last_checkpoint(const LiveJob& l, Time until) const {
  const Time start = l.job.started;
  if (until < start) return -1;
  const Time last_at = spec(l).checkpoint.last;
  const bool anchored = l.runs == 1 && last_at >= 0;  // the first run checkpoints at last_at + k * interval
  const Time anchor = anchored ? last_at : start;
  const Duration every = l.job.checkpoint.interval;
  if (every <= 0) return anchored && anchor >= start && anchor <= until ? anchor : -1;
  const Time c = anchor + floor_div(until - anchor, every) * every;
  return c >= start ? c : -1;
}

Status ScenarioRun::init() {
  for (size_t i = 0; i < sc_.jobs.size(); ++i) {
    const SimJobSpec& s = sc_.jobs[i];
    const std::string at = "jobs[" + std::to_string(i) + "].queue";
    LiveJob l;
    l.job.id = JobId(uint32_t(i));
    l.job.name = s.job_name.empty() ? s.name : s.job_name;
    l.job.user = s.user;
    auto q = tree_.find(s.queue);
    if (!q.ok()) return invalid_argument(at + ": " + q.error().message);
    if (!tree_.queue(*q).leaf()) return invalid_argument(at + ": \"" + s.queue + "\" is not a leaf queue");
    l.job.queue = *q;
    l.job.priority_class = s.priority_class;
    l.job.gang = s.gang;
    l.job.gang.id = l.job.id;
    l.job.submitted = s.at;
    l.job.expected_runtime = s.expected_runtime;
    l.job.max_runtime = s.max_runtime;
    l.job.checkpoint = s.checkpoint;
    l.job.checkpoint.last = -1;  // last_at applies once the first run reaches it
    by_name_[s.name] = i;
    jobs_.push_back(std::move(l));
  }
  // Fair-share history: per-queue decayed usage (decay_usage, as the simulator keeps it). A seed of
  // G GPU-seconds is that usage after G GPU-seconds in the last second before t=0: a share of
  // G / total GPUs for one second.
  usage_.assign(tree_.size(), 0.0);
  for (const auto& [qname, gpu_s] : sc_.usage) {
    auto q = tree_.find(qname);
    if (!q.ok()) return invalid_argument("usage." + qname + ": " + q.error().message);
    if (cluster_.total_gpus() > 0)
      usage_[q->value] = decay_usage(0, gpu_s / double(cluster_.total_gpus()), 1, cfg_.usage_half_life);
  }
  queue_last_start_.assign(tree_.size(), -1);
  down_.assign(cluster_.node_count(), false);
  admin_.assign(cluster_.node_count(), NodeAdmin::kReady);
  for (const SimJobSpec& s : sc_.jobs) times_.insert(s.at);
  for (const ClusterEvent& e : sc_.events) {
    times_.insert(e.at);
    for (const std::string& n : e.nodes)
      if (!cluster_.find_node(n).ok()) return invalid_argument(e.text + ": unknown node \"" + n + "\"");
  }
  for (const Expectation& e : sc_.expect) times_.insert(e.at);
  horizon_ = times_.empty() ? 0 : *times_.rbegin();
  last_t_ = std::min<Time>(0, times_.empty() ? 0 : *times_.begin());  // usage seeds are at t=0
  return {};
}

// Usage history over [last_t, t) with the allocation as it was.
void ScenarioRun::account_usage(Time t) {
  if (t <= last_t_) return;
  int64_t cap = 0;
  for (const Node& n : cluster_.nodes())
    for (const Gpu& g : n.gpus) cap += g.health == GpuHealth::kHealthy ? 1000 : 0;
  std::vector<int64_t> alloc(tree_.size(), 0);
  for (const LiveJob& l : jobs_)
    if (holding(l)) alloc[l.job.queue.value] += milli_held(l.job.placement);
  for (size_t q = 0; q < usage_.size(); ++q) {
    const double share = cap > 0 ? double(alloc[q]) / double(cap) : 0;
    usage_[q] = decay_usage(usage_[q], share, t - last_t_, cfg_.usage_half_life);
  }
  last_t_ = t;
}

void ScenarioRun::mig_ready(Time t) {
  for (auto it = reconfiguring_.begin(); it != reconfiguring_.end();) {
    if (it->second > t) {
      ++it;
      continue;
    }
    const GpuRef g = it->first;
    it = reconfiguring_.erase(it);
    refresh_gpu(g);
    log(t, "MIG ready: " + gpu_text(g) +
               (cluster_.node(g.node).gpus[g.index].health == GpuHealth::kUnhealthy ? " (but unhealthy)" : ""));
  }
}

// A GPU's health from what happened to it: its node down or the GPU marked unhealthy, else
// reconfiguring until its layout is ready, else healthy. Set only when it changes.
void ScenarioRun::refresh_gpu(GpuRef g) {
  const GpuHealth h = down_[g.node.value] || bad_gpus_.count(g) ? GpuHealth::kUnhealthy
                      : reconfiguring_.count(g)                  ? GpuHealth::kReconfiguring
                                                                 : GpuHealth::kHealthy;
  if (cluster_.node(g.node).gpus[g.index].health != h) (void)cluster_.set_health(g, h);
}

// A node takes new work when it is up and its admin state is ready (as the controller's node_usable).
void ScenarioRun::refresh_node(NodeId n) {
  const bool usable = !down_[n.value] && admin_[n.value] == NodeAdmin::kReady;
  if (cluster_.node(n).schedulable != usable) (void)cluster_.set_schedulable(n, usable);
  for (const Gpu& g : cluster_.node(n).gpus) refresh_gpu({n, g.index});
}

Status ScenarioRun::stop_run(LiveJob& l, Time t, bool lost, const std::string& why) {
  // Work is kept up to the last completed checkpoint: the one asked for, if it finished saving
  // before the job left, else the last periodic one (periodic checkpoints stop when the job is
  // asked to checkpoint: it is busy saving that one).
  const bool asked = l.job.state == JobState::kCheckpointing;
  const bool saved = asked && t >= l.ckpt_at + l.job.checkpoint.save_cost;
  Time safe = std::max(l.job.started, last_checkpoint(l, asked ? std::min(t, l.ckpt_at) : t));
  if (saved) safe = std::max(safe, l.ckpt_at);
  // As the controller's lose(): a lost job is not restarted on GPUs held for a move.
  VacateOptions how;
  how.drop_move = lost;
  const Vacated v = vacate(l.job, cluster_, t, how);
  if (!v.released.ok()) return Error{ErrorCode::kInternal, "release: " + v.released.message()};
  l.attained_milli_s += v.milli * std::max<Time>(0, t - l.run_start);
  l.run_from += std::max<Time>(0, safe - l.job.started);
  l.run_from = std::min(l.run_from, spec(l).duration);
  l.stop_at = -1;
  l.ckpt_at = -1;
  if (lost) {
    ++l.lost;
    ++res_.lost;
    log(t, "lost " + spec(l).name + " (" + why + "), resumes from " + std::to_string(l.run_from) + "s of work");
  } else {
    log(t, std::string(l.stop_cause == StopCause::kDrained ? "drained " : "preempted ") + spec(l).name + " left" +
               (saved ? " after its checkpoint" : " without a new checkpoint") + ", resumes from " +
               std::to_string(l.run_from) + "s of work");
  }
  return {};
}

Status ScenarioRun::settle(Time t) {
  for (LiveJob& l : jobs_) {
    if (!holding(l)) continue;
    const bool done = end_time(l) <= t;
    const bool timeout = !done && timeout_time(l) <= t;
    const bool stop = !done && !timeout && l.stop_at >= 0 && l.stop_at <= t;
    if (!done && !timeout && !stop) continue;
    if (stop) {
      if (Status s = stop_run(l, t, false, ""); !s.ok()) return s;
      continue;
    }
    const Vacated v = end_job(l.job, cluster_, done ? JobState::kSucceeded : JobState::kFailed);
    if (!v.released.ok()) return Error{ErrorCode::kInternal, "release: " + v.released.message()};
    l.attained_milli_s += v.milli * std::max<Time>(0, t - l.run_start);
    if (done) {
      l.finished = true;
      runtimes_.record(l.job.user, l.job.name, t - l.run_start);
      log(t, "finished " + spec(l).name);
    } else {
      l.timed_out = true;
      log(t, "timed out " + spec(l).name + " after its max_runtime of " + std::to_string(l.job.max_runtime) + "s");
    }
  }
  return {};
}

void ScenarioRun::lose_jobs(Time t, NodeId node, int gpu, const std::string& why) {
  for (LiveJob& l : jobs_) {
    if (!holding(l)) continue;
    const bool hit = std::any_of(l.job.placement.begin(), l.job.placement.end(), [&](const TaskPlacement& p) {
      return p.node == node && (gpu < 0 || std::any_of(p.gpus.begin(), p.gpus.end(), [&](const GpuGrant& g) { return g.gpu == gpu; }));
    });
    if (!hit) continue;
    if (Status s = stop_run(l, t, true, why); !s.ok()) fail(t, s.message());
  }
}

// A job moved out of an owed gang's way restarts on the GPUs held for it; when they can no longer
// take it, the move is off and it waits like any other job.
void ScenarioRun::cancel_moves(NodeId node, Time t, const std::string& why) {
  for (LiveJob& l : jobs_) {
    const bool there = std::any_of(l.job.move_to.begin(), l.job.move_to.end(), [&](const TaskPlacement& p) { return p.node == node; });
    if (!there || !cancel_move(l.job)) continue;
    log(t, "move of " + spec(l).name + " cancelled: " + why);
  }
}

void ScenarioRun::apply_event(const ClusterEvent& e, Time t) {
  using K = ClusterEvent::Kind;
  for (const std::string& name : e.nodes) {
    const NodeId n = *cluster_.find_node(name);
    switch (e.kind) {
      case K::kNodeDown:
        log(t, e.text + ": node " + name + " down");
        down_[n.value] = true;
        lose_jobs(t, n, -1, "node " + name + " down");
        cancel_moves(n, t, "node " + name + " down");
        break;
      case K::kNodeUp:
        log(t, e.text + ": node " + name + " up");
        down_[n.value] = false;
        break;
      case K::kCordon:
        log(t, e.text + ": node " + name + " cordoned");
        admin_[n.value] = NodeAdmin::kCordoned;
        cancel_moves(n, t, "node " + name + " cordoned");
        break;
      case K::kUncordon:
        log(t, e.text + ": node " + name + " ready (uncordoned)");
        admin_[n.value] = NodeAdmin::kReady;
        break;
      case K::kDrain:
        // As `tessera drain`: no new work, and each running job with a task there is asked to
        // checkpoint and leave by now + its grace (one that does not checkpoint leaves now).
        log(t, e.text + ": node " + name + " draining");
        admin_[n.value] = NodeAdmin::kDraining;
        cancel_moves(n, t, "node " + name + " draining");
        for (LiveJob& l : jobs_) {
          if (l.job.state != JobState::kRunning) continue;
          if (std::none_of(l.job.placement.begin(), l.job.placement.end(), [&](const TaskPlacement& p) { return p.node == n; }))
            continue;
          l.stop_cause = StopCause::kDrained;
          if (!request_checkpoint(l.job, t + l.job.checkpoint.grace)) {
            l.ckpt_at = t;
            l.stop_at = std::max(t, std::min(t + l.job.checkpoint.save_cost, l.job.evict_by));
          } else {
            l.stop_at = t;
          }
          if (l.stop_at > t) times_.insert(l.stop_at);  // else it leaves in this step's second settle
          log(t, "drain " + spec(l).name + " (leaves at t=" + std::to_string(l.stop_at) + ")");
        }
        break;
      case K::kGpuUnhealthy: {
        const GpuRef g{n, uint16_t(e.gpu)};
        log(t, e.text + ": " + gpu_text(g) + " unhealthy");
        bad_gpus_.insert(g);
        lose_jobs(t, n, e.gpu, gpu_text(g) + " unhealthy");
        for (LiveJob& l : jobs_) {
          bool there = false;
          for (const TaskPlacement& p : l.job.move_to)
            for (const GpuGrant& gr : p.gpus) there = there || (p.node == n && gr.gpu == e.gpu);
          if (!there || !cancel_move(l.job)) continue;
          log(t, "move of " + spec(l).name + " cancelled: " + gpu_text(g) + " unhealthy");
        }
        break;
      }
      case K::kGpuHealthy:
        log(t, e.text + ": " + gpu_text({n, uint16_t(e.gpu)}) + " healthy");
        bad_gpus_.erase({n, uint16_t(e.gpu)});
        break;
    }
    refresh_node(n);
  }
}

void ScenarioRun::apply_events(Time t) {
  for (; next_event_ < sc_.events.size() && sc_.events[next_event_].at <= t; ++next_event_)
    apply_event(sc_.events[next_event_], t);
}

Snapshot ScenarioRun::snapshot(Time t) {
  // Periodic checkpoints of running jobs (the scheduler's lost-work cost uses the last one).
  for (LiveJob& l : jobs_) {
    if (l.job.state != JobState::kRunning || t <= l.job.started) continue;
    const Time c = last_checkpoint(l, t);
    if (c >= 0) l.job.checkpoint.last = c;
  }
  Snapshot snap;
  snap.cluster = &cluster_;
  snap.queues = &tree_;
  for (const LiveJob& l : jobs_) {
    if (!l.arrived || l.finished || l.timed_out) continue;
    snap.jobs.push_back(l.job);
    int64_t attained = l.attained_milli_s;
    if (holding(l)) attained += milli_held(l.job.placement) * std::max<Time>(0, t - l.run_start);
    snap.jobs.back().attained_gpu_s = attained / 1000;
  }
  snap.history.assign(tree_.size(), QueueLoad{});
  for (size_t q = 0; q < usage_.size(); ++q) snap.history[q].decayed_usage = usage_[q];
  snap.mig_last_changed = mig_last_changed_;
  snap.runtimes = &runtimes_;
  snap.reservation = reservation_;
  return snap;
}

// The state changes are core's (core/sched/apply.h); here: when jobs leave, the invariants that
// concern decisions, counts and the log. Jobs that must leave now do so as the step settles.
Status ScenarioRun::apply(const Decisions& d, Time t) {
  const ApplyResult applied = apply_decisions(
      d, cluster_, [this](JobId id) { return id.value < jobs_.size() ? &jobs_[id.value].job : nullptr; }, t,
      scenario_apply_options());
  for (const PreemptedJob& p : applied.preempted) {
    LiveJob& v = jobs_[p.job.value];
    const std::string& vname = spec(v).name;
    if (p.was == JobState::kCheckpointing) {  // phase two
      v.stop_at = t;  // its grace is over: evicted now, the checkpoint it was writing is lost
      times_.insert(t);
      log(t, "evict " + vname + ": " + p.reason);
      continue;
    }
    v.preempt_decided = t;
    v.stop_cause = StopCause::kPreempted;
    ++v.preempted;
    ++res_.preemptions;
    preemption_times_.push_back(t);
    const bool for_known = p.for_job.valid() && p.for_job.value < jobs_.size();
    const std::string for_text = for_known ? " for " + sc_.jobs[p.for_job.value].name : "";
    if (for_known) {
      // Invariant 3: no preemption cycles.
      const auto back = preempted_for_.find({p.for_job.value, p.job.value});
      if (back != preempted_for_.end())
        fail(t, "preemption cycle: " + vname + " is preempted for " + sc_.jobs[p.for_job.value].name +
                    ", which was preempted for it at t=" + std::to_string(back->second));
      preempted_for_.emplace(std::pair{p.job.value, p.for_job.value}, t);
    }
    if (p.effect == PreemptEffect::kCheckpointRequested) {  // a move keeps its held GPUs in Job::move_to
      v.ckpt_at = t;
      v.stop_at = std::max(t, std::min(t + v.job.checkpoint.save_cost, p.evict_by));
      log(t, "preempt " + vname + for_text + " (checkpoint, leaves at t=" + std::to_string(v.stop_at) + ", evict_by t=" +
                 std::to_string(p.evict_by) + "): " + p.reason);
    } else {
      v.stop_at = t;
      log(t, "preempt " + vname + for_text + " (evict now): " + p.reason);
    }
    times_.insert(v.stop_at);
  }
  for (const Refused& r : applied.refused) {
    if (r.decision != DecisionKind::kStart) continue;
    const std::string name = spec(jobs_[r.job.value]).name;
    if (r.reason == Refusal::kNodeTakesNoWork) {
      // Invariant 5: starts only on nodes that take new work (up, not cordoned or draining).
      const NodeId n = r.node;
      fail(t, "started " + name + " on node " + cluster_.node(n).name + ", which takes no new work (" +
                  (down_[n.value] ? "down" : admin_[n.value] == NodeAdmin::kDraining ? "draining" : "cordoned") + ")");
    } else {
      // Invariant 6: the cycle's starts fit the cluster it was given. The job stays pending and the
      // run goes on, so that its trace (-v) shows how the cycle came to it.
      fail(t, "invariant broken: start of " + name + " rejected (" + refusal_name(r.reason) + "): " + r.detail);
    }
  }
  for (const StartedJob& s : applied.started) {
    LiveJob& l = jobs_[s.job.value];
    if (s.off_move) fail(t, "moved job " + spec(l).name + " restarted elsewhere than on the GPUs held for it");
    l.run_start = t;
    ++l.runs;
    times_.insert(end_time(l));
    if (timeout_time(l) != kNever) times_.insert(timeout_time(l));
    // A job that checkpoints counts its start as its last checkpoint (set as applied); one that does
    // not has only its first run's checkpoint.last_at, when it starts right then.
    if (l.job.checkpoint.interval <= 0) l.job.checkpoint.last = last_checkpoint(l, t);
    queue_last_start_[l.job.queue.value] = t;
    std::string on;  // "n0 x2, n1": the nodes its tasks went to
    for (size_t k = 0; k < s.placement.size();) {
      size_t e = k;
      while (e < s.placement.size() && s.placement[e].node == s.placement[k].node) ++e;
      on += (on.empty() ? "" : ", ") + cluster_.node(s.placement[k].node).name + (e - k > 1 ? " x" + std::to_string(e - k) : "");
      k = e;
    }
    log(t, "start " + spec(l).name + " on " + on);
  }
  // Dynamic MIG: the planner's layout changes are applied to the (idle) GPUs, which are out of
  // service until ready_at.
  for (const Refused& r : applied.refused)
    if (r.decision == DecisionKind::kMigReconfigure) fail(t, "MIG change on " + gpu_text(r.gpu) + " rejected: " + r.detail);
  for (const MigChange& m : applied.reconfigured) {
    const MigReconfigDecision& r = d.reconfigure_mig[m.decision];
    ++res_.mig_changes;
    mig_change_times_.push_back(t);
    mig_last_changed_[r.gpu] = t;
    log(t, "MIG " + gpu_text(r.gpu) + " -> " +
               (r.enable_mig ? "MIG " + layout_text(cluster_, r.gpu, r.layout) : std::string("whole")) +
               " (ready at t=" + std::to_string(r.ready_at) + "): " + r.reason);
    if (r.ready_at > t) {
      reconfiguring_[r.gpu] = r.ready_at;
      times_.insert(r.ready_at);
    } else {
      times_.insert(t);  // ready now: cycle again
    }
    refresh_gpu(r.gpu);  // reconfiguring until ready_at (healthy at once when ready now)
  }
  // A moved job restarts on its held GPUs in the first cycle after it left.
  for (JobId id : applied.moves_dropped) {
    std::string why;
    for (const PendingInfo& p : d.pending)
      if (p.job == id) why = p.reason;
    fail(t, "moved job " + spec(jobs_[id.value]).name + " did not restart on the GPUs held for it: " + why);
  }
  return {};
}

Result<ScheduleRunResult> ScenarioRun::run() {
  if (Status s = init(); !s.ok()) return s.error();
  Time same_t = -1;
  int cycles_at_t = 0;
  std::vector<std::string> last_waits;  // the last cycle's pending reasons, while cycles repeat at one time
  while (!times_.empty()) {
    const Time t = *times_.begin();
    times_.erase(times_.begin());
    if (res_.cycles >= kMaxCycles) {  // e.g. a preemption livelock that never lets a job finish
      fail(t, "stopped after " + std::to_string(kMaxCycles) + " cycles (events never run out: a livelock?)");
      return res_;
    }
    if (t == same_t) {
      if (++cycles_at_t > 64) {
        fail(t, "more than 64 cycles at one time (decisions never settle)");
        for (const std::string& w : last_waits) log(t, w);  // what the trace (-v) ends with
        return res_;
      }
    } else {
      same_t = t;
      cycles_at_t = 1;
    }
    account_usage(t);
    mig_ready(t);
    if (Status s = settle(t); !s.ok()) return s.error();
    if (next_event_ < sc_.events.size() && sc_.events[next_event_].at <= t) {
      apply_events(t);
      if (Status s = settle(t); !s.ok()) return s.error();  // jobs drained that leave at once
    }
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (!jobs_[i].arrived && sc_.jobs[i].at <= t) jobs_[i].arrived = true;
    const Decisions d = sched_->cycle(snapshot(t), t);
    reservation_ = d.reservation;
    ++res_.cycles;
    // While anything waits, the controller cycles again after cycle_interval (if nothing comes sooner).
    // Periodic cycles stop at the horizon; completions go on.
    if ((!d.pending.empty() || !d.preempt.empty()) && t + sc_.cycle_interval <= horizon_) times_.insert(t + sc_.cycle_interval);
    if (Status s = apply(d, t); !s.ok()) return s.error();
    last_waits.clear();
    if (cycles_at_t > 1)
      for (const PendingInfo& p : d.pending) last_waits.push_back("waits " + spec(jobs_[p.job.value]).name + ": " + p.reason);
    check_invariants(t);
    // Expectations due now, after the last cycle at this time.
    if (!times_.empty() && *times_.begin() == t) continue;
    check_expectations(d, t);
  }
  return res_;
}

}  // namespace detail

Result<ScheduleRunResult> run_schedule_scenario(const ScheduleScenario& sc) {
  auto built = config::build_cluster(sc.levels, sc.nodes, sc.catalog ? *sc.catalog : GpuCatalog::builtin(), sc.pools);
  if (!built.ok()) return built.error();
  auto tree = QueueTree::build(sc.queues);
  if (!tree.ok()) return tree.error();
  auto sched = Scheduler::create(sc.config);
  if (!sched.ok()) return sched.error();
  detail::ScenarioRun r(sc, std::move(*built), std::move(*tree), std::move(*sched));
  return r.run();
}

}  // namespace tessera::sim
