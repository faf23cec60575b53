#include "sim/sim_run.h"
#include "sim/sim_run_internal.h"

namespace tessera::sim {

ApplyOptions simulator_apply_options() {
  ApplyOptions o;
  o.leave = LeaveMode::kAtOnce;
  o.started = StartClock::kNow;  // work resumes after the restart cost (SimJob::progress_from)
  o.checkpoint_on_start = CheckpointOnStart::kFromStart;
  return o;
}

std::vector<std::string> sim_policy_names() {
  std::vector<std::string> v = scheduler_preset_names();
  v.push_back("k8s-default");
  return v;
}


namespace simrun {

Status Simulation::build() {
  k8s_mode_ = opt_.policy == kK8s;
  SchedulerConfig cfg = setup_.config;
  if (!k8s_mode_) {
    auto preset = scheduler_preset(opt_.policy);
    if (!preset.ok()) return invalid_argument("--policy: " + preset.error().message + ", k8s-default");
    // The preset decides the policy's behaviour; the cluster file keeps classes, costs and graces.
    SchedulerConfig p = *preset;
    p.priority_classes = opt_.policy == "tiresias" ? p.priority_classes : cfg.priority_classes;
    p.gpu_class = cfg.gpu_class;
    p.usage_half_life = cfg.usage_half_life;
    p.reclaim_grace = cfg.reclaim_grace;
    p.mig = cfg.mig;
    if (opt_.policy == "tessera") p = cfg;
    p.seed = opt_.seed;
    p.elastic_capacity = setup_.autoscaling.enabled;
    auto s = Scheduler::create(p);
    if (!s.ok()) return s.error();
    sched_ = std::move(s.value());
  } else {
    k8s_ = std::make_unique<K8sDefault>();
  }
  auto tree = QueueTree::build(setup_.queues);
  if (!tree.ok()) return invalid_argument("queues: " + tree.error().message);
  tree_ = std::move(tree.value());
  rng_ = Rng(opt_.seed);

  // Teams = leaf queues. Workload teams without a queue of that name go to a queue named "default"
  // if there is one; otherwise it is an error naming the team.
  for (const Queue& q : tree_.queues())
    if (q.leaf()) teams_.push_back(q.name);
  std::map<std::string, uint32_t> team_index;
  for (uint32_t i = 0; i < teams_.size(); ++i) team_index[teams_[i]] = i;
  int64_t capacity = cluster_.total_gpus() * 1000;
  for (const std::string& t : teams_) {
    const Queue& q = tree_.queue(*tree_.find(t));
    int64_t g = 0;
    for (auto& [c, v] : q.guaranteed) g = c == "any" ? std::max(g, v) : g + v;
    team_guarantee_.push_back(g);
  }
  // Entitlement: the guarantee, or (without one) the weight's share of what guarantees leave.
  int64_t gsum = 0, wsum = 0;
  for (size_t i = 0; i < teams_.size(); ++i) {
    gsum += team_guarantee_[i];
    if (team_guarantee_[i] == 0) wsum += tree_.queue(*tree_.find(teams_[i])).weight;
  }
  for (size_t i = 0; i < teams_.size(); ++i)
    team_entitlement_.push_back(team_guarantee_[i] > 0 ? team_guarantee_[i]
                                                        : std::max<int64_t>(0, capacity - gsum) *
                                                              tree_.queue(*tree_.find(teams_[i])).weight / std::max<int64_t>(1, wsum));
  team_alloc_.assign(teams_.size(), 0);
  team_pending_milli_.assign(teams_.size(), 0);
  below_.since.assign(teams_.size(), -1);
  team_min_pending_milli_.assign(teams_.size(), 0);
  unmet_.since.assign(teams_.size(), -1);
  usage_.assign(tree_.size(), 0);

  jobs_.resize(wl_.jobs.size());
  wait_log_ = JobWaitLog(wl_.jobs.size());
  team_of_.resize(wl_.jobs.size());
  for (size_t i = 0; i < wl_.jobs.size(); ++i) {
    const WorkloadJob& w = wl_.jobs[i];
    auto it = team_index.find(w.team);
    if (it == team_index.end()) it = team_index.find("default");
    if (it == team_index.end())
      return invalid_argument("workload: job " + w.name + " belongs to team '" + w.team +
                              "', which the cluster file has no leaf queue for; add a queue of that name or one named default");
    team_of_[i] = it->second;
    SimJob& s = jobs_[i];
    s.spec = &w;
    Job& j = s.job;
    j.id = JobId(uint32_t(i));
    j.name = w.kind.empty() ? w.name : w.kind;
    j.user = w.user.empty() ? w.team : w.user;
    j.queue = *tree_.find(teams_[it->second]);
    j.priority_class = w.priority_class;
    j.gang = w.gang;
    j.gang.id = j.id;
    j.gang.queue = j.queue;
    if (k8s_mode_ && (j.gang.task.mig() || j.gang.task.milli_per_gpu.v < 1000)) {
      // The default device plugin has no MIG changes and no sharing: a whole GPU per pod.
      j.gang.task.mig_profile.clear();
      j.gang.task.gpu_count = std::max(1, j.gang.task.gpu_count);
      j.gang.task.milli_per_gpu = MilliGpu(1000);
      j.gang.task.gpu_memory = MiB(0);
    }
    j.submitted = w.arrival + opt_.submit_latency;
    j.expected_runtime = w.expected_runtime;
    j.checkpoint = w.checkpoint;
    push(w.arrival + opt_.submit_latency, Ev::kArrive, uint32_t(i));
  }
  first_arrival_ = wl_.jobs.empty() ? 0 : wl_.jobs.front().arrival;
  for (const WorkloadJob& w : wl_.jobs) first_arrival_ = std::min(first_arrival_, w.arrival);
  last_t_ = first_arrival_;
  autoscale_ = setup_.autoscaling.enabled && !k8s_mode_;
  auto prov = SimProvider::create(cluster_, autoscale_, opt_.seed, first_arrival_);
  if (!prov.ok()) return prov.error();
  provider_ = std::move(*prov);
  failed_.assign(cluster_.node_count(), false);
  pool_milli_.assign(cluster_.pools().size(), 0);
  pool_int_.assign(cluster_.pools().size(), 0);
  cordoned_.assign(cluster_.node_count(), false);
  draining_.assign(cluster_.node_count(), false);
  idle_since_.assign(cluster_.node_count(), -1);
  for (const Node& n : cluster_.nodes())
    if (!provider_->up(n.id)) refresh_node(n.id);
  if (opt_.node_mtbf > 0)
    for (const Node& n : cluster_.nodes()) {
      push(first_arrival_ + failure_gap(), Ev::kFail, n.id.value);
    }
  return {};
}

int64_t Simulation::task_useful(const SimJob& j, const TaskPlacement& p) const {
  const int64_t held = milli_held(p);
  int64_t useful = j.spec->useful_milli_per_task > 0 ? std::min(held, j.spec->useful_milli_per_task) : held;
  return useful;
}

void Simulation::start_run(SimJob& j, Time t) {
  last_progress_ = t;
  std::set<uint32_t> nodes;
  for (const TaskPlacement& p : j.job.placement) nodes.insert(p.node.value);
  j.spread = nodes.size() > 1;
  j.rate = nodes.size() > 1 ? 1000.0 / double(std::max<int64_t>(1000, j.spec->spread_slowdown_milli)) : 1.0;
  // On spot, checkpoints come every Young interval (the pool's interruption rate, the job's save
  // cost) and each one stalls the job for its save cost: the checkpoint period is T + C of wall time,
  // T of it progress. Elsewhere the job's own (asynchronous) checkpoints cost nothing, as before.
  j.job.checkpoint.interval = j.spec->checkpoint.interval;
  const Pool* spot = nullptr;
  for (const TaskPlacement& p : j.job.placement)
    if (cluster_.node(p.node).pool_kind == PoolKind::kSpot) spot = &cluster_.pool(cluster_.node(p.node).pool);
  if (spot && j.job.checkpoint.interval > 0) {
    const Duration c = std::max<Duration>(1, j.job.checkpoint.save_cost);
    const Duration tv = spot_checkpoint_interval(*spot, c, int(nodes.size()), j.job.checkpoint.interval);
    j.job.checkpoint.interval = tv + c;
    j.rate *= double(tv) / double(tv + c);
  }
  if (spot && j.job.gang.kind == JobKind::kInference) ++rep_.metrics.inference_spot_starts;
  // State, started, move_to and checkpoint.last were set as the start was applied (core/sched/apply.h).
  j.run_start = t;
  j.progress_from = t + (j.job.preemptions > 0 || j.done > 0 ? j.job.checkpoint.restart_cost : 0) + opt_.start_latency;
  if (j.first_start < 0) j.first_start = t;
  if (j.queued_since >= 0) j.queued_s += double(t - j.queued_since);
  j.queued_since = -1;
  j.gpus_milli = milli_held(j.job.placement);
  j.useful_milli = 0;
  for (const TaskPlacement& p : j.job.placement) j.useful_milli += task_useful(j, p);
  j.useful_milli = int64_t(double(j.useful_milli) * j.rate);
  useful_milli_ += j.useful_milli;
  const double left = std::max(0.0, double(j.spec->work) - j.done);
  ++j.run_gen;
  push(j.progress_from + Time(std::ceil(left / j.rate)) + opt_.finish_latency, Ev::kFinish, j.job.id.value, j.run_gen);
}

void Simulation::end_run(SimJob& j, Time t, bool finished, bool failed) {
  account_left(j, finished ? end_job(j.job, cluster_, JobState::kSucceeded) : vacate(j.job, cluster_, t), t, finished, failed);
}

void Simulation::account_left(SimJob& j, const Vacated& v, Time t, bool finished, bool failed) {
  const double lost_before = lost_gpu_s_;
  const bool interrupted = j.interrupted;
  j.interrupted = false;
  for (const TaskPlacement& p : v.placement) track_kinds(p, -1, j.job.gang.kind == JobKind::kInference);
  const int64_t held = v.milli;
  alloc_milli_ -= held;
  team_alloc_[team_of_[j.job.id.value]] -= held;
  const bool was_running = v.was == JobState::kRunning || v.was == JobState::kCheckpointing;
  if (was_running) {
    useful_milli_ -= j.useful_milli;
    j.job.attained_gpu_s += held / 1000 * std::max<Time>(0, t - j.run_start);
    j.run_s += double(std::max<Time>(0, t - j.run_start));
    if (j.spread) j.spread_run_s += double(std::max<Time>(0, t - j.run_start));
  }
  j.useful_milli = j.gpus_milli = 0;
  ++j.run_gen;
  if (finished) {
    j.finished = true;
    j.finish = t;
    active_.erase(j.job.id.value);
    history_.record(j.job.user, j.job.name, t - j.run_start);
    return;
  }
  if (was_running) {
    const double progressed = std::max<double>(0, double(t - j.progress_from)) * j.rate;
    double safe = 0;
    if (j.saving && !failed) {
      safe = std::max<double>(0, double(t - j.job.checkpoint.save_cost - j.progress_from)) * j.rate;
    } else if (j.job.checkpoint.interval > 0 && t > j.progress_from) {
      const Time iv = j.job.checkpoint.interval;
      safe = double((t - j.progress_from) / iv * iv) * j.rate;
    }
    safe = std::min(safe, progressed);
    lost_gpu_s_ += (progressed - safe + double(std::min<Time>(t, j.progress_from) - j.run_start)) * double(held) / 1000.0;
    j.done += safe;
  }
  if (interrupted) lost_interrupt_gpu_s_ += lost_gpu_s_ - lost_before;
  j.queued_since = t;
  j.stop_at = -1;
  j.saving = false;
}

void Simulation::account(Time t) {
  if (t <= last_t_) return;
  const double dt = double(t - last_t_);
  const int64_t cap = healthy_milli();
  alloc_int_ += double(alloc_milli_) * dt;
  for (size_t k = 0; k < pool_milli_.size(); ++k) pool_int_[k] += double(pool_milli_[k]) * dt;
  inference_spot_int_ += double(inference_spot_milli_) * dt;
  useful_int_ += double(useful_milli_) * dt;
  cap_int_ += double(cap) * dt;
  // Jain's index over teams with demand: x = held / min(entitlement, demand).
  double sx = 0, sxx = 0;
  int n = 0;
  for (size_t i = 0; i < teams_.size(); ++i) {
    const int64_t demand = team_alloc_[i] + team_pending_milli_[i];
    if (demand <= 0) continue;
    const double ent = double(std::max<int64_t>(1, std::min(team_entitlement_[i], demand)));
    const double x = double(team_alloc_[i]) / ent;
    sx += x;
    sxx += x * x;
    ++n;
  }
  if (n > 0) {
    jain_int_ += (sxx > 0 ? sx * sx / (double(n) * sxx) : 1.0) * dt;
    jain_time_ += dt;
  }
  // Decayed usage for fair share (normalised by capacity).
  for (size_t i = 0; i < teams_.size(); ++i) {
    const size_t q = tree_.find(teams_[i])->value;
    const double now_share = cap > 0 ? double(team_alloc_[i]) / double(cap) : 0;
    usage_[q] = decay_usage(usage_[q], now_share, t - last_t_, setup_.config.usage_half_life);
  }
  last_t_ = t;
}

double Simulation::fragmentation() const {
  // Free GPU milli on nodes where no pending request fits now.
  std::vector<const TaskRequest*> shapes;
  std::set<std::string> seen;
  for (uint32_t id : active_) {
    const SimJob& j = jobs_[id];
    if (j.job.state != JobState::kPending || !j.job.placement.empty()) continue;
    const TaskRequest& t = j.job.gang.task;
    const std::string k = std::to_string(t.gpu_count) + "/" + std::to_string(t.milli_per_gpu.v) + "/" + t.mig_profile +
                          "/" + std::to_string(t.cpu.v) + "/" + std::to_string(t.memory.v);
    if (seen.insert(k).second) shapes.push_back(&t);
    if (shapes.size() >= 32) break;
  }
  if (shapes.empty()) return 0;
  int64_t free = 0, unusable = 0;
  for (const Node& n : cluster_.nodes()) {
    if (n.free_gpu_milli <= 0) continue;
    free += n.free_gpu_milli;
    bool any = false;
    for (const TaskRequest* t : shapes) any = any || check_fit(n, *t) == Misfit::kFits;
    if (!any) unusable += n.free_gpu_milli;
  }
  const int64_t cap = cluster_.total_gpus() * 1000;
  return cap > 0 ? double(unusable) * 100.0 / double(cap) : 0;
}

void Simulation::sample(Time t) {
  SimSample s;
  s.t = t;
  const int64_t cap = healthy_milli();
  s.allocation_pct = cap > 0 ? double(alloc_milli_) * 100.0 / double(cap) : 0;
  s.effective_pct = cap > 0 ? double(useful_milli_) * 100.0 / double(cap) : 0;
  for (uint32_t id : active_) (jobs_[id].job.state == JobState::kPending ? s.pending : s.running) += 1;
  for (int64_t a : team_alloc_) s.team_gpus.push_back(double(a) / 1000.0);
  rep_.timeline.push_back(std::move(s));
  const double f = fragmentation();
  frag_int_ += f;
  frag_time_ += 1;
}

void Simulation::cycle(Time t) {
  last_cycle_ = t;
  dirty_ = false;
  ++rep_.metrics.cycles;
  wait_log_.attribute(t);
  Snapshot snap;
  snap.cluster = &cluster_;
  snap.queues = &tree_;
  snap.jobs.reserve(active_.size());
  for (uint32_t id : active_) {
    Job j = jobs_[id].job;
    if (j.state == JobState::kRunning || j.state == JobState::kCheckpointing)
      j.attained_gpu_s += jobs_[id].gpus_milli / 1000 * (t - jobs_[id].run_start);
    snap.jobs.push_back(std::move(j));
  }
  snap.history.resize(tree_.size());
  for (size_t q = 0; q < tree_.size(); ++q) snap.history[q].decayed_usage = usage_[q];
  snap.mig_last_changed = mig_changed_;
  snap.runtimes = &history_;
  snap.reservation = reservation_;
  Decisions d = k8s_mode_ ? k8s_->cycle(snap) : sched_->cycle(snap, t);
  reservation_ = d.reservation;
  // The state changes are core's (core/sched/apply.h); here: timing, metrics and events. A start that
  // no longer applies cannot happen with a consistent policy; it is skipped. A moved job gets one
  // cycle to restart on its held GPUs; after that it waits like any job.
  const ApplyResult applied = apply_decisions(
      d, cluster_, [this](JobId id) { return id.value < jobs_.size() ? &jobs_[id.value].job : nullptr; }, t,
      simulator_apply_options());
  for (const PreemptedJob& p : applied.preempted) {
    SimJob& v = jobs_[p.job.value];
    if (p.was == JobState::kRunning) {
      if (p.move) ++v.moved;
      else if (p.reason.starts_with("reclaim")) ++v.reclaimed;
      else if (p.reason.starts_with("least attained")) ++v.by_las;
      else ++v.by_priority;
    }
    if (p.effect == PreemptEffect::kCheckpointRequested) {
      ++rep_.metrics.preemptions;
      if (p.move) ++rep_.metrics.defrag_moves;  // the scheduler holds its new GPUs and restarts it there
      v.saving = true;
      v.stop_at = std::min(t + v.job.checkpoint.save_cost, p.evict_by);
      push(v.stop_at, Ev::kStop, p.job.value, v.run_gen);
    } else {  // left at once
      if (p.was == JobState::kRunning) ++rep_.metrics.preemptions;
      v.saving = v.saving && p.was == JobState::kCheckpointing && t >= v.stop_at;
      account_left(v, p.vacated, t, false, false);
      dirty_ = true;
    }
  }
  for (const MigChange& m : applied.reconfigured) {
    ++out_of_service_;  // healthy until now, reconfiguring until its ready event
    mig_changed_[m.gpu] = t;
    ++rep_.metrics.mig_reconfigurations;
    mig_pending_.push_back(m.gpu);
    push(std::max(m.ready_at, t + 1), Ev::kMigReady, 0, mig_pending_.size() - 1);
  }
  for (const StartedJob& s : applied.started) {
    SimJob& j = jobs_[s.job.value];
    const int64_t held = milli_held(s.placement);
    alloc_milli_ += held;
    team_alloc_[team_of_[s.job.value]] += held;
    for (const TaskPlacement& p : s.placement) track_kinds(p, +1, j.job.gang.kind == JobKind::kInference);
    if (s.running) start_run(j, t);
    if (j.first_start == t) wait_log_.first_started(s.job.value);
  }
  // Pending demand per team (for fairness and guarantees).
  std::fill(team_pending_milli_.begin(), team_pending_milli_.end(), 0);
  std::fill(team_min_pending_milli_.begin(), team_min_pending_milli_.end(), 0);
  // GPUs per queue (its subtree), for the limits: a job they hold back is owed nothing.
  std::vector<int64_t> queue_alloc(tree_.size(), 0);
  for (size_t i = 0; i < teams_.size(); ++i)
    for (QueueId a : tree_.path_to_root(*tree_.find(teams_[i]))) queue_alloc[a.value] += team_alloc_[i];
  // Per queue and model class, only when some queue limits a model class (as the core checks a
  // request's limits in "any" and in its models' class).
  const SchedulerConfig& cfg = setup_.config;
  auto class_of_model = [&](const std::string& name) {
    auto m = cluster_.catalog().find(name);
    return cfg.model_class(m.ok() ? m.value()->name : name);
  };
  bool class_limits = false;
  for (const Queue& q : tree_.queues())
    for (const auto& [c, l] : q.limit) class_limits = class_limits || c != "any";
  std::vector<ClassAmounts> class_alloc(class_limits ? tree_.size() : 0);
  if (class_limits)
    for (uint32_t id : active_) {
      const SimJob& j = jobs_[id];
      if (j.job.state == JobState::kPending) continue;
      for (const TaskPlacement& p : j.job.placement)
        for (const GpuGrant& g : p.gpus) {
          const GpuModel* m = cluster_.node(p.node).gpus[g.gpu].model;
          if (!m) continue;
          const std::string c = cfg.model_class(m->name);
          for (QueueId a : tree_.path_to_root(j.job.queue)) class_alloc[a.value][c] += g.milli_held();
        }
    }
  bool waiting = false;
  for (uint32_t id : active_) {
    const SimJob& j = jobs_[id];
    if (j.job.state != JobState::kPending) continue;
    waiting = true;
    const int64_t need = need_milli(j.job);
    team_pending_milli_[team_of_[id]] += need;
    int64_t& least = team_min_pending_milli_[team_of_[id]];
    // The request's own class: its models' class when they all share one.
    const TaskRequest& tr = j.job.gang.task;
    std::string cls;
    if (class_limits && !tr.gpu_models.empty()) {
      cls = class_of_model(tr.gpu_models.front());
      for (const std::string& m : tr.gpu_models)
        if (class_of_model(m) != cls) cls.clear();
    }
    bool held_back = false;
    for (QueueId a : tree_.path_to_root(j.job.queue)) {
      const auto& limit = tree_.queue(a).limit;
      auto lim = limit.find("any");
      held_back = held_back || (lim != limit.end() && queue_alloc[a.value] + need > lim->second);
      if (auto cl = cls.empty() || cls == "any" ? limit.end() : limit.find(cls); cl != limit.end()) {
        auto have = class_alloc[a.value].find(cls);
        held_back = held_back || (have == class_alloc[a.value].end() ? 0 : have->second) + need > cl->second;
      }
    }
    if (need > 0 && !held_back && (least == 0 || need < least)) least = need;
  }
  if (waiting) want_tick(t + opt_.cycle_interval);
  if (autoscale_) autoscale(t, d);
  wait_log_.observe(t, std::move(d.pending), [this](uint32_t id) {
    const uint32_t team = team_of_[id];
    return team_alloc_[team] + need_milli(jobs_[id].job) > team_guarantee_[team];
  });
}

// One event of the simulation's own at t; `finished` counts the jobs that have finished.
void Simulation::handle(const Event& e, Time t, int64_t& finished) {
  switch (e.kind) {
    case Ev::kArrive: {
      SimJob& j = jobs_[e.id];
      j.arrived = true;
      j.queued_since = j.spec->arrival;  // waiting since it arrived (before submit_latency too)
      active_.insert(e.id);
      ++arrived_;
      last_progress_ = t;
      dirty_ = true;
      break;
    }
    case Ev::kFinish: {
      SimJob& j = jobs_[e.id];
      if (j.run_gen != e.gen || j.finished) break;
      end_run(j, t, true, false);
      ++finished;
      last_progress_ = t;
      if (opt_.progress) opt_.progress(finished, int64_t(jobs_.size()));
      dirty_ = true;
      break;
    }
    case Ev::kStop: {
      SimJob& j = jobs_[e.id];
      if (j.run_gen != e.gen || j.job.state != JobState::kCheckpointing) break;
      end_run(j, t, false, false);
      dirty_ = true;
      break;
    }
    case Ev::kFail: {
      const NodeId n(e.id);
      if (!provider_->up(n)) {  // not running now: nothing to fail; try again later
        push(t + failure_gap() + 1, Ev::kFail, e.id);
        break;
      }
      ++rep_.metrics.failures;
      lose_jobs_on(n, t);
      failed_[n.value] = true;
      refresh_node(n);
      push(t + opt_.node_repair, Ev::kRepair, e.id);
      dirty_ = true;
      break;
    }
    case Ev::kRepair: {
      const NodeId n(e.id);
      failed_[n.value] = false;
      refresh_node(n);
      push(t + failure_gap() + 1, Ev::kFail, e.id);
      dirty_ = true;
      break;
    }
    case Ev::kMigReady: {
      const GpuRef g = mig_pending_[e.gen];
      mig_ready(g);
      dirty_ = true;
      break;
    }
    case Ev::kTick:
      if (e.id == 1) {
        scale_tick_pending_ = false;
      } else {
        if (e.t != tick_at_) break;  // replaced by an earlier tick
        tick_at_ = -1;
      }
      dirty_ = true;
      break;
  }
}

// Guarantees at t: a team below its guarantee with demand pending, and one owed and not given.
void Simulation::track_guarantees(Time t) {
  SimMetrics& m = rep_.metrics;
  for (size_t i = 0; i < teams_.size(); ++i) {
    const bool below = team_guarantee_[i] > 0 && team_pending_milli_[i] > 0 && team_alloc_[i] < team_guarantee_[i];
    below_.update(i, below, t, m.below_guarantee_s, m.max_below_guarantee_s);
    // Owed and not given: a waiting job would fit within the team's unused guarantee.
    const bool unmet = team_guarantee_[i] > 0 && team_min_pending_milli_[i] > 0 &&
                       team_alloc_[i] + team_min_pending_milli_[i] <= team_guarantee_[i];
    unmet_.update(i, unmet, t, m.guarantee_unmet_s, m.max_guarantee_unmet_s);
  }
}

bool Simulation::stalled(Time t) const {
  if (opt_.stall_limit <= 0 || arrived_ < int64_t(jobs_.size()) || t - last_progress_ < opt_.stall_limit) return false;
  return std::none_of(active_.begin(), active_.end(), [&](uint32_t id) { return jobs_[id].queued_since < 0; });
}

Result<SimReport> Simulation::run() {
  if (Status s = build(); !s.ok()) return s.error();
  rep_.metrics.policy = opt_.policy;
  rep_.metrics.jobs = int64_t(jobs_.size());
  rep_.teams = teams_;
  Time span = 0;
  for (const WorkloadJob& w : wl_.jobs) span = std::max(span, w.arrival + w.work);
  const Duration sample_every = opt_.sample_interval > 0 ? opt_.sample_interval : std::max<Duration>(60, (span - first_arrival_) / 400);
  Time next_sample = first_arrival_;
  int64_t finished = 0;
  while (!events_.empty()) {
    const std::optional<Time> pt = provider_->next_event_time();
    const Time t = pt ? std::min(*pt, events_.top().t) : events_.top().t;
    if (opt_.horizon > 0 && t > opt_.horizon) break;
    while (next_sample <= t) {
      account(next_sample);
      sample(next_sample);
      next_sample += sample_every;
    }
    account(t);
    // Provider events at t (nodes up, notices, reclaims), then the simulation's own, then one cycle.
    if (pt && *pt == t)
      for (const ProviderEvent& e : provider_->poll(t)) provider_event(e, t);
    while (!events_.empty() && events_.top().t == t) {
      const Event e = events_.top();
      events_.pop();
      handle(e, t, finished);
    }
    if (finished == int64_t(jobs_.size())) break;
    if (dirty_) {
      if (last_cycle_ < 0 || t >= last_cycle_ + opt_.min_cycle_gap) {
        cycle(t);
      } else {
        want_tick(last_cycle_ + opt_.min_cycle_gap);
      }
    }
    track_guarantees(t);
    if (stalled(t)) {
      rep_.metrics.stalled_at = t;
      break;
    }
  }
  const Time end = last_t_;
  for (size_t i = 0; i < teams_.size(); ++i) {
    below_.update(i, false, end, rep_.metrics.below_guarantee_s, rep_.metrics.max_below_guarantee_s);
    unmet_.update(i, false, end, rep_.metrics.guarantee_unmet_s, rep_.metrics.max_guarantee_unmet_s);
  }
  sample(end);

  report(end);
  return std::move(rep_);
}

}  // namespace simrun


Result<SimReport> run_simulation(const SimCluster& cluster, const Workload& workload, const SimRunOptions& options) {
  if (options.cycle_interval <= 0) return invalid_argument("cycle_interval: must be > 0 seconds");
  if (options.min_cycle_gap < 0) return invalid_argument("min_cycle_gap: must be >= 0 seconds");
  if (options.node_mtbf < 0) return invalid_argument("--mtbf: must be >= 0 seconds");
  if (options.stall_limit < 0) return invalid_argument("--stall-limit: must be >= 0 seconds");
  if (options.submit_latency < 0 || options.start_latency < 0 || options.finish_latency < 0)
    return invalid_argument("submit_latency, start_latency, finish_latency: must be >= 0");
  simrun::Simulation s(cluster, workload, options);
  return s.run();
}

}  // namespace tessera::sim
