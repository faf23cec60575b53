// The simulated cluster's own events: node failures and provider events, consolidation and the
// autoscaler (Simulation, sim_run_internal.h).
#include "sim/sim_run_internal.h"

namespace tessera::sim::simrun {

std::vector<uint32_t> Simulation::jobs_on(NodeId n) const {
  std::vector<uint32_t> v;
  for (uint32_t id : active_)
    for (const TaskPlacement& p : jobs_[id].job.placement)
      if (p.node == n) {
        v.push_back(id);
        break;
      }
  return v;
}

void Simulation::lose_jobs_on(NodeId n, Time t) {
  for (uint32_t id : jobs_on(n)) {
    SimJob& j = jobs_[id];
    const bool running = j.job.state != JobState::kPending;
    j.saving = false;
    end_run(j, t, false, true);
    if (!running) --j.job.preemptions;  // a partially bound gang just loses its pods
  }
}

void Simulation::provider_event(const ProviderEvent& e, Time t) {
  const NodeId n = e.node;
  switch (e.kind) {
    case ProviderEventKind::kNodeReady:
      cordoned_[n.value] = false;
      draining_[n.value] = false;
      refresh_node(n);
      ++rep_.metrics.nodes_provisioned;
      break;
    case ProviderEventKind::kInterruptionNotice: {
      // Cordon; a job whose checkpoint fits in the notice saves and leaves; the others run on until
      // the reclaim and then resume from their last periodic checkpoint.
      ++rep_.metrics.spot_reclaims;
      cordoned_[n.value] = true;
      refresh_node(n);
      for (uint32_t id : jobs_on(n)) {
        SimJob& j = jobs_[id];
        if (j.job.state == JobState::kPending) continue;
        if (!j.interrupted) ++j.job.spot_interruptions, ++rep_.metrics.job_interruptions;
        j.interrupted = true;
        if (j.job.checkpoint.save_cost <= e.reclaim_at - t && !request_checkpoint(j.job, e.reclaim_at)) {
          j.saving = true;
          j.stop_at = t + j.job.checkpoint.save_cost;
          push(j.stop_at, Ev::kStop, id, j.run_gen);
        }
      }
      break;
    }
    case ProviderEventKind::kNodeReclaimed:
      lose_jobs_on(n, t);
      refresh_node(n);
      idle_since_[n.value] = -1;
      break;
    case ProviderEventKind::kRequestFailed:
      break;
  }
  dirty_ = true;
}

void Simulation::consolidate(Time t) {
  if (t < next_consolidation_ || setup_.autoscaling.consolidate_below_pct <= 0) return;
  next_consolidation_ = t + std::max<Duration>(opt_.cycle_interval, 600);
  std::vector<NodeId> elastic;
  for (const Node& n : cluster_.nodes())
    if (provider_->elastic(n.id) && provider_->up(n.id) && !cordoned_[n.id.value]) elastic.push_back(n.id);
  std::vector<MovableJob> running;
  for (uint32_t id : active_) {
    const SimJob& j = jobs_[id];
    if (j.job.state != JobState::kRunning) continue;
    MovableJob m;
    m.job = j.job.id;
    m.gang = j.job.gang;
    m.gang.id = j.job.id;
    apply_job_pool_rules(m.gang, j.job, setup_.config.pool_rules, kNoHold);  // moving: no fallback hold
    m.placement = j.job.placement;
    m.checkpointable = j.job.checkpoint.interval > 0;
    m.started = j.run_start;
    running.push_back(std::move(m));
  }
  const std::optional<Consolidation> c = plan_consolidation(cluster_, elastic, running, setup_.autoscaling, t);
  if (!c) {
    // Come back while some elastic node is under-used (its jobs may become movable).
    bool under = false;
    for (NodeId id : elastic) under = under || under_used(cluster_.node(id), setup_.autoscaling.consolidate_below_pct);
    if (under && !scale_tick_pending_) {
      scale_tick_pending_ = true;
      push(next_consolidation_, Ev::kTick, 1);
    }
    return;
  }
  ++rep_.metrics.consolidations;
  cordoned_[c->node.value] = draining_[c->node.value] = true;
  refresh_node(c->node);
  for (JobId id : c->jobs) {
    SimJob& j = jobs_[id.value];
    ++rep_.metrics.consolidation_moves;
    (void)request_checkpoint(j.job, t + j.job.checkpoint.grace);  // running and checkpointable (plan_consolidation)
    j.saving = true;
    j.stop_at = t + j.job.checkpoint.save_cost;
    push(j.stop_at, Ev::kStop, id.value, j.run_gen);
  }
  dirty_ = true;
}

void Simulation::autoscale(Time t, const Decisions& d) {
  AutoscaleInput in;
  in.now = t;
  in.config = setup_.autoscaling;
  // Elastic pools with their slots.
  std::vector<int> slot_count(cluster_.pools().size(), 0);
  std::vector<const Node*> first(cluster_.pools().size(), nullptr);
  for (const Node& n : cluster_.nodes()) {
    if (!provider_->elastic(n.id)) continue;
    ++slot_count[n.pool.value];
    if (!first[n.pool.value]) first[n.pool.value] = &n;
  }
  for (const Pool& p : cluster_.pools()) {
    if (!first[p.id.value]) continue;
    const Node& n = *first[p.id.value];
    ElasticPool e;
    e.pool = p.id;
    e.name = p.name;
    e.kind = p.kind;
    e.gpu_model = n.gpu_model() ? n.gpu_model()->name : "";
    e.gpus_per_node = int(n.gpus.size());
    e.price_micro_per_gpu_hour = p.price_micro_per_gpu_hour.value_or(0);
    e.min_nodes = p.min_nodes;
    e.max_nodes = p.max_nodes > 0 ? std::min(p.max_nodes, slot_count[p.id.value]) : slot_count[p.id.value];
    e.running = provider_->running(p.id);
    e.provisioning = provider_->provisioning(p.id);
    if (e.gpus_per_node > 0) in.pools.push_back(std::move(e));
  }
  for (const PendingInfo& pi : d.pending) {
    if (!pi.short_of_room) continue;
    const SimJob& j = jobs_[pi.job.value];
    Gang g = j.job.gang;
    apply_job_pool_rules(g, j.job, setup_.config.pool_rules, t);
    DemandItem di;
    di.job = pi.job;
    di.tasks = std::max(1, g.tasks - int(j.job.placement.size()));
    di.gpus_per_task = std::max(1, g.task.gpu_count);
    di.gpu_models = g.task.gpu_models;
    di.pool_kinds = g.task.pool_kinds;
    di.prefer_spot = g.task.prefer_spot;
    di.avoid_spot = g.task.avoid_spot;
    const uint32_t team = team_of_[pi.job.value];
    di.within_guarantee = team_alloc_[team] < team_guarantee_[team];
    for (const PriorityClass& pc : setup_.config.priority_classes)
      if (pc.name == j.job.priority_class) di.priority = pc.value;
    di.submitted = j.job.submitted;
    in.demand.push_back(std::move(di));
  }
  bool any_idle = false;
  for (const Node& n : cluster_.nodes()) {
    if (draining_[n.id.value] && provider_->up(n.id) && n.free_gpu_milli == int64_t(n.gpus.size()) * 1000) {
      // Emptied by consolidation: back now.
      if (provider_->release_node(n.id, t).ok()) ++rep_.metrics.nodes_released;
      draining_[n.id.value] = false;
      cordoned_[n.id.value] = false;
      refresh_node(n.id);
      continue;
    }
    const bool idle = provider_->elastic(n.id) && provider_->up(n.id) && !cordoned_[n.id.value] &&
                      n.free_gpu_milli == int64_t(n.gpus.size()) * 1000;
    if (!idle) {
      idle_since_[n.id.value] = -1;
      continue;
    }
    if (idle_since_[n.id.value] < 0) idle_since_[n.id.value] = t;
    in.idle.push_back({n.id, n.pool, idle_since_[n.id.value]});
    any_idle = true;
  }
  const AutoscalePlan plan = plan_autoscaling(in);
  consolidate(t);
  for (const ScaleUp& u : plan.up) {
    Status s = provider_->request_nodes(u.pool, u.nodes, t);
    (void)s;
  }
  for (const ScaleDown& dn : plan.down) {
    if (!provider_->release_node(dn.node, t).ok()) continue;
    ++rep_.metrics.nodes_released;
    idle_since_[dn.node.value] = -1;
    refresh_node(dn.node);
  }
  if (any_idle && !scale_tick_pending_) {  // come back to give idle nodes back
    scale_tick_pending_ = true;
    push(t + std::max<int64_t>(1, setup_.autoscaling.scale_down_idle_s), Ev::kTick, 1);
  }
}


}  // namespace tessera::sim::simrun
