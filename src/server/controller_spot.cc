// Controller::State: spot pools: checkpoint costs and periodic saves, interruption notices and
// reclaims.
#include "server/controller_state.h"

namespace tessera::server {

int64_t Controller::State::checkpoint_cost_s(const JobRecord& r, bool* measured) {
  if (measured) *measured = r.checkpoint_cost_ms >= 0;
  if (r.checkpoint_cost_ms >= 0) return std::max<int64_t>(1, (r.checkpoint_cost_ms + 999) / 1000);
  return r.spec.checkpoint.grace > 0 ? r.spec.checkpoint.grace : 60;
}

int64_t Controller::State::spot_save_interval(const JobRecord& r) const {
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

Json Controller::State::interrupt(NodeId id, Time reclaim_at, const std::string& actor, WriteBatch& b, bool* handled) {
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
    na.reason = "spot interruption: reclaimed at " + local_time_text(reclaim_at) + " (" + std::to_string(notice) + " s notice)";
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
      why = "already checkpointing; it must finish by the reclaim at " + local_time_text(reclaim_at);
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

std::string Controller::State::spot_avoid_text(int n) {
  return "interrupted " + std::to_string(n) + (n == 1 ? " time" : " times") + " on spot: now prefers other pools";
}

void Controller::State::reclaim_due(WriteBatch& b, Time t) {
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

}  // namespace tessera::server
