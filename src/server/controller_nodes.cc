// Controller: nodes (the view, cordon/drain/resume, spot interruptions) and GPU utilisation.
#include "server/controller_state.h"

namespace tessera::server {

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
  // A node whose agent never registered (or went silent) takes no work although an admin left it
  // ready: say so, and why.
  const bool agent_ok = !s.opt.agents_required || na.agent_ready;
  std::string reason = na.reason;
  if (!agent_ok && reason.empty())
    reason = na.registered ? "its agent stopped reporting; it takes no work until the agent is back"
                           : "waits for its agent to register (tessera agent --node " + n.name + "); it takes no work until then";
  return Json{{"name", n.name}, {"path", path}, {"gpu_model", n.gpu_model() ? n.gpu_model()->name : ""},
              {"state", node_admin_state_name(na.state)}, {"reason", reason},
              {"takes_work", agent_ok && na.state == NodeAdminState::kReady}, {"cpu_milli", n.cpu_capacity.v}, {"memory_mib", n.memory_capacity.v},
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
      na.state = NodeAdminState::kReady;
      na.reason.clear();

      s.refresh_schedulable(*id);
    } else {
      na.state = op == "cordon" ? NodeAdminState::kCordoned : NodeAdminState::kDraining;
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
    const EventKind kind = op == "cordon" ? EventKind::kNodeCordon : op == "drain" ? EventKind::kNodeDrain : EventKind::kNodeResume;
    b.events.push_back(s.event(0, kind, who.user, Json{{"node", node}, {"reason", reason}}));
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
    if (!handled) answer["note"] = "node " + node + " already has an interruption notice (reclaim at " + local_time_text(na.reclaim_at) + ")";
    s.reply_when_durable(std::move(b), reply, answer);
  });
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

}  // namespace tessera::server
