// Controller::State: the scheduling cycle's input and its decisions applied, agent liveness and the
// time-driven work (tick), fair-share usage and utilisation samples.
#include "server/controller_state.h"

namespace tessera::server {

void Controller::State::advance_usage(int64_t t_ms) {
  if (usage.size() != tree->size()) usage.assign(tree->size(), 0.0);
  const int64_t elapsed = t_ms - usage_at_ms;
  if (elapsed <= 0) return;  // nothing to integrate (or a clock stepped back: wait for it)
  usage_at_ms = t_ms;
  const double cap = double(std::max<int64_t>(1, cluster.total_gpus() * 1000));
  const double d = usage_decay_factor_ms(elapsed, config.scheduler.usage_half_life);  // once, for every queue
  for (size_t q = 0; q < usage.size(); ++q) {
    const int64_t placed_milli = q < queue_milli.size() ? queue_milli[q] : 0;
    usage[q] = decay_usage_by(usage[q], double(placed_milli) / cap, d);
  }
}

void Controller::State::recount_usage() {
  queue_milli.assign(tree->size(), 0);
  for (auto& [id, x] : placed_index) {
    x.queue = jobs.at(id).job.queue.value;
    count_usage(x, +1);
  }
}

CycleInput Controller::State::cycle_input_now() {
  const Time t = now();
  advance_usage(now_ms());
  if (t - usage_saved_at >= 60) {  // fair-share history survives restarts (to the last minute)
    usage_saved_at = t;
    WriteBatch b;
    for (const Queue& q : tree->queues()) b.meta.push_back({"usage/" + q.name, Json{{"usage", usage[q.id.value]}, {"at", t}}.dump()});
    persist(std::move(b));
  }
  CycleInput in{scheduler, tree, cluster, {}, {}, mig_last_changed, runtimes, reservation, t, config_generation};
  in.jobs.reserve(active_ids.size());
  WriteBatch gated;
  const std::set<int64_t> eligible = gate_pending(t, gated);  // holds, begin times, dependencies, array limits, backoff
  if (!gated.empty()) persist(std::move(gated));
  for (int64_t id : active_ids) {
    const JobRecord& r = jobs.at(id);
    if (r.job.state == JobState::kPending && !eligible.count(id)) continue;
    Job j = r.job;
    if (placed(j.state) && j.started >= 0) j.attained_gpu_s += gpu_milli(jobs.at(id)) / 1000 * (t - j.started);
    in.jobs.push_back(std::move(j));
  }
  in.history.resize(tree->size());
  for (size_t q = 0; q < tree->size(); ++q) in.history[q].decayed_usage = usage[q];
  return in;
}

ApplyOptions controller_apply_options() {
  ApplyOptions o;
  o.leave = LeaveMode::kAtOnce;
  o.started = StartClock::kNow;
  o.checkpoint_on_start = CheckpointOnStart::kKeep;  // from the agents' checkpoint acks
  return o;
}

// Decisions are checked again as they are applied (core/sched/apply.h): the job is still pending or
// running, its nodes still take work (node_usable), the placement still applies, the GPU is still
// idle and healthy. Core changes the cluster and the jobs; here: events, the store, agents (through
// the stopping tasks and the desired sets), metrics.
void Controller::State::apply(const Decisions& d, uint64_t generation) {
  if (generation != config_generation) {  // config reloaded meanwhile: the next cycle decides
    m.cycle_decisions->observe({}, 0);
    return;
  }
  // One reading for the whole application: the jobs' started (seconds) and started_ms, and the time
  // of every event it records, so that they agree and follow the order of the log.
  const int64_t t_ms = now_ms();
  const Time t = t_ms / 1000;
  moment_ms = t_ms;
  struct EndMoment {
    int64_t& moment;
    ~EndMoment() { moment = -1; }
  } end_moment{moment_ms};
  WriteBatch b;
  ApplyOptions how = controller_apply_options();
  how.takes_work = [this](NodeId n) { return node_usable(n); };
  how.keep_held = [this](const Job& j) { return tasks_kept(jobs.at(int64_t(j.id.value))); };
  const ApplyResult applied = apply_decisions(
      d, cluster,
      [this](JobId id) -> Job* {
        JobRecord* r = jobs.find(int64_t(id.value));
        if (r && r->job.state == JobState::kPending && r->held) return nullptr;  // held since the cycle began
        return r ? &r->job : nullptr;
      },
      t, how);
  int64_t preempted = 0, reconfigured = 0, started = 0;
  for (const PreemptedJob& p : applied.preempted) {
    JobRecord& v = jobs.at(int64_t(p.job.value));
    ++preempted;
    if (p.effect == PreemptEffect::kCheckpointRequested) {
      // A defragmenting move (Job::move_to): the scheduler holds those GPUs while it checkpoints and
      // restarts it there in the next cycle (kept in memory only: after a restart it is placed like any job).
      checkpoint_requested(v, p.evict_by, p.reason, b);
    } else {
      const std::string why = p.phase == PreemptPhase::kEvict ? " (checkpoint not finished in time: stopped)"
                                                              : " (the job does not checkpoint: stopped now)";
      requeued(v, p.vacated, t, EventKind::kPreempted, p.reason + why, b, false);
    }
  }
  for (const MigChange& mc : applied.reconfigured) {
    const MigReconfigDecision& mr = d.reconfigure_mig[mc.decision];
    ++reconfigured;
    mig_last_changed[mc.gpu] = t;
    mig_ready.push_back({mc.ready_at, mc.gpu});
    const Node& n = cluster.node(mc.gpu.node);
    b.events.push_back(event(0, EventKind::kMigReconfigured, "scheduler",
                             Json{{"node", n.name}, {"gpu", mc.gpu.index}, {"mig", mc.enable_mig}, {"reason", mr.reason}}));
    b.meta.push_back(mig_meta(mc.gpu));
  }
  for (const StartedJob& s : applied.started) {  // whole gangs (the scheduler starts no partial gang)
    JobRecord& r = jobs.at(int64_t(s.job.value));
    ++r.attempt;
    r.not_before = -1;
    r.master_port = 0;
    r.last_nodes.clear();
    for (const TaskPlacement& p : r.job.placement) r.last_nodes.push_back(cluster.node(p.node).name);
    r.tasks.assign(r.job.placement.size(), TaskRun{});
    r.fail_verdict_at.reset();
    r.pending.reset();
    r.gate.reset();
    r.started_ms = t_ms;
    r.start_sent = Clock::now();
    if (r.attempt == 1 && r.submitted_ms >= 0)
      m.submit_to_start->observe({}, double(std::max<int64_t>(0, r.started_ms - r.submitted_ms)) / 1000.0);
    mark_placed(r);
    ++started;
    b.events.push_back(event(r.id, EventKind::kStarted, "scheduler",
                             Json{{"attempt", r.attempt}, {"placement", placement_json(r, cluster)}}));
    b.jobs.push_back(row(r));
  }
  // (A moved job gets one cycle to restart on its held GPUs: core gave up the moves of those still pending.)
  for (const PendingInfo& p : d.pending) {
    JobRecord* r = jobs.find(int64_t(p.job.value));
    if (r && r->job.state == JobState::kPending) r->pending = p;
  }
  if (d.reservation != reservation) {  // held until the next cycle, and across a restart
    reservation = d.reservation;
    Json held = Json::object();
    if (reservation) {
      Json ahead = Json::array();
      for (JobId a : reservation->ahead) ahead.push_back(a.value);
      held = Json{{"job", reservation->job.value},
                  {"start", reservation->start},
                  {"promised", reservation->promised},
                  {"ahead", std::move(ahead)}};
    }
    b.meta.push_back({"scheduler/reservation", held.dump()});
  }
  m.decisions->inc({"start"}, double(started));
  m.decisions->inc({"preempt"}, double(preempted));
  m.decisions->inc({"mig"}, double(reconfigured));
  m.cycle_decisions->observe({}, double(started + preempted + reconfigured));
  if (!b.empty()) persist(std::move(b));
}

std::pair<std::string, std::string> Controller::State::mig_meta(GpuRef g) const {
  const Node& n = cluster.node(g.node);
  const Gpu& gpu = n.gpus[g.index];
  Json layout = Json::array();
  for (const MigInstance& m : gpu.mig.instances()) layout.push_back(Json{{"profile", m.profile_id}, {"start", m.start}});
  return {"mig/" + n.name + "/" + std::to_string(g.index), Json{{"enabled", gpu.mig_enabled}, {"layout", layout}}.dump()};
}

namespace {
// A time limit for people: "2h", "90m", "45s".
std::string limit_text(int64_t s) {
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}
}  // namespace

void Controller::State::check_agents(WriteBatch& b, Clock::time_point wall) {
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
  // The jobs on nodes that are not ready (a look at each such node's jobs, not at every placed job).
  std::set<int64_t> stranded;
  for (size_t i = 0; i < node_admin.size(); ++i)
    if (!node_admin[i].agent_ready)
      for (int64_t id : jobs_on(NodeId{uint32_t(i)})) stranded.insert(id);
  for (int64_t id : stranded) {
    JobRecord& r = jobs.at(id);
    if (!placed(r.job.state)) continue;
    for (const TaskPlacement& p : r.job.placement) {
      const NodeAdmin& na = node_admin[p.node.value];
      if (na.agent_ready) continue;
      // Its agent may still run the old attempt (a partition): it kills its tasks once the lease
      // has passed without an answered heartbeat, so the new attempt waits that long.
      const Time hold = (na.last_seen >= 0 ? na.last_seen : now()) + (opt.lease_ms() + 999) / 1000;
      lose(r, "node " + cluster.node(p.node).name + " is not ready (its agent stopped reporting)", b, hold);
      break;
    }
  }
  // Failed tasks of gangs whose other nodes all kept reporting: now the job's own failure.
  std::set<int64_t> due;
  for (int64_t id : placed_ids)
    if (const JobRecord& r = jobs.at(id); r.fail_verdict_at && opt.steady_clock() >= *r.fail_verdict_at) due.insert(id);
  if (!due.empty()) settle_jobs(*this, due, "", b);
}

void Controller::State::tick() {
  const Time t = now();
  sample_utilisation(t);  // cheap unless a step began
  const auto wall = Clock::now();
  if (wall < loop.next_tick) return;
  loop.next_tick = wall + std::chrono::milliseconds(100);
  expire_watches(wall);
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
      requeue(r, stop_event(r), stop_text(r, "checkpoint not acknowledged by its deadline: stopped"), b, false);
    } else if (placed(r.job.state) && r.job.max_runtime > 0 && r.job.started >= 0 &&
               t >= r.job.started + r.job.max_runtime) {
      finish(r, JobState::kTimeout,
             "timed out: stopped at its time limit of " + limit_text(r.job.max_runtime) + " (max_runtime " +
                 std::to_string(r.job.max_runtime) + " s)",
             b, "scheduler", EventKind::kTimedOut);
    }
  }
  if (!b.empty()) persist(std::move(b));
}

void Controller::State::sample_utilisation(Time t) {
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

}  // namespace tessera::server
