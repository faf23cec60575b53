// Controller: the agent protocol (registration, heartbeats: reconcile what agents report, answer the
// desired state). Messages are decoded by server/agent_protocol.h before they get here.
#include "server/controller_state.h"

namespace tessera::server {

namespace {

std::string gpu_list_text(const Node& n) {
  std::map<std::string, int> count;
  for (const Gpu& g : n.gpus) ++count[g.model->name];
  std::string out;
  for (const auto& [m, c] : count) out += (out.empty() ? "" : " + ") + std::to_string(c) + " × " + m;
  return out.empty() ? "no GPUs" : out;
}

}  // namespace

// Why an agent's node name is refused, naming the nodes the configuration has: a group with
// `count: N` (N > 1) is named name-0 .. name-(N-1); a node with no count, or `count: 1`, keeps its
// name as written (docs/server.md). An agent started as "mig-0" for a single node "mig" is told so.
std::string unknown_node_text(const ClusterState& c, const std::string& node) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> groups;  // prefix -> indices, in config order
  std::vector<std::string> shown;
  const size_t scan = std::min<size_t>(c.nodes().size(), 4096);  // bounded work on the state thread
  for (size_t k = 0; k < scan; ++k) {
    const std::string& name = c.nodes()[k].name;
    const size_t dash = name.rfind('-');
    const bool indexed = dash != std::string::npos && dash + 1 < name.size() && name.size() - dash <= 7 &&
                         name.find_first_not_of("0123456789", dash + 1) == std::string::npos;
    if (indexed && !groups.empty() && groups.back().first == name.substr(0, dash)) {
      groups.back().second.push_back(std::stoll(name.substr(dash + 1)));
      continue;
    }
    if (indexed) groups.push_back({name.substr(0, dash), {std::stoll(name.substr(dash + 1))}});
    else groups.push_back({name, {}});
  }
  for (const auto& [prefix, idx] : groups) {
    if (idx.empty()) shown.push_back(prefix);
    else if (idx.size() > 2 && idx.front() == 0 && idx.back() == int64_t(idx.size()) - 1)
      shown.push_back(prefix + "-0 .. " + prefix + "-" + std::to_string(idx.back()));
    else
      for (int64_t i : idx) shown.push_back(prefix + "-" + std::to_string(i));
  }
  std::string list;
  for (size_t i = 0; i < shown.size() && i < 12; ++i) list += (i ? ", " : "") + shown[i];
  if (shown.size() > 12 || scan < c.nodes().size()) list += ", ... (" + std::to_string(c.nodes().size()) + " nodes in all)";
  std::string hint;
  if (node.size() > 2 && node.compare(node.size() - 2, 2, "-0") == 0 && c.find_node(node.substr(0, node.size() - 2)).ok())
    hint = "; did you mean " + node.substr(0, node.size() - 2) +
           "? a node without count (or with count: 1) keeps its name; only count: N > 1 adds -0 .. -(N-1)";
  return "node " + node + ": not in the cluster configuration" + hint + "; configured nodes: " + list +
         " (start the agent with --node NAME of one of them, or add it under nodes:)";
}

namespace {

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
      reply->set_value(not_found(unknown_node_text(s.cluster, node)));
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
    na.leaving = false;
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
      if (na.notice_cordon && na.state == NodeAdminState::kCordoned) {
        na.state = NodeAdminState::kReady;
        na.reason.clear();
        b.events.push_back(s.event(0, EventKind::kNodeResume, "agent:" + node,
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
                {"agent_timeout_ms", s.opt.agent_timeout_ms}, {"task_lease_ms", s.opt.lease_ms()}};
    b.events.push_back(s.event(0, was_ready ? EventKind::kNodeRegistered : EventKind::kNodeReady, "agent:" + node,
                               Json{{"node", node}, {"address", address}, {"gpus", gpu_list_text(n)},
                                    {"source", na.gpu_source}}));
    spdlog::info("event=node_ready node={} address={} gpus=\"{}\" source={}", node, address, gpu_list_text(n), na.gpu_source);
    if (!topo_mismatch.empty()) {
      spdlog::warn("event=node_topology_mismatch node={} agent=\"{}\" (the cluster config's path is used)", node, topo_mismatch);
      b.events.push_back(s.event(0, EventKind::kNodeTopologyMismatch, "agent:" + node,
                                 Json{{"node", node}, {"agent_says", topo_mismatch}, {"used", "the cluster config's path"}}));
      answer["warning"] = "--topology disagrees with the cluster config: " + topo_mismatch + "; the config's path is used";
    }
    s.reply_when_durable(std::move(b), reply, answer);
  });
}

namespace {

using State = Controller::State;

// ---- the heartbeat's phases, in order; each returns what it found ---------------------------------

// What a beat says of the node's GPUs' use since the previous one.
struct BeatSample {
  std::vector<GpuSample> held;  // the previous report's samples: they held until this beat
  int64_t dt_ms = 0;            // time they held (at most 3 intervals)
  int64_t beat = 0;             // this beat's number since the controller started
  bool charge() const { return dt_ms > 0 && !held.empty(); }
};

// Liveness and the utilisation sample; a node back from NotReady is ready again.
BeatSample observe_beat(State& s, NodeId nid, const HeartbeatReport& report, WriteBatch& b) {
  NodeAdmin& na = s.node_admin[nid.value];
  na.last_seen = s.now();
  const auto beat_at = s.opt.steady_clock();
  BeatSample out;
  out.dt_ms = std::min<int64_t>(3 * s.opt.heartbeat_interval_ms,
                                std::chrono::duration_cast<std::chrono::milliseconds>(beat_at - na.last_beat).count());
  na.last_beat = beat_at;
  out.held = std::exchange(na.gpu_stats, report.gpus);
  if (s.opt.agents_required && !na.agent_ready) {
    na.agent_ready = true;
    s.refresh_schedulable(nid);
    s.dirty = true;
    b.events.push_back(s.event(0, EventKind::kNodeReady, "agent:" + report.node,
                               Json{{"node", report.node}, {"reason", "heartbeats resumed"}}));
  }
  out.beat = ++na.beats;
  return out;
}

// A spot interruption notice the agent found: handled once per reclaim time; ignored (and said so)
// off spot pools.
void take_notice(State& s, NodeId nid, const HeartbeatReport& report, WriteBatch& b) {
  if (!report.notice) return;
  NodeAdmin& na = s.node_admin[nid.value];
  const Pool& pool = s.cluster.pool(s.cluster.node(nid).pool);
  const Time reclaim = report.reclaim_at >= 0 ? report.reclaim_at : (report.noticed_at > 0 ? report.noticed_at : s.now()) + pool.notice_s;
  if (pool.kind == PoolKind::kSpot) {
    bool handled = false;
    (void)s.interrupt(nid, reclaim, "agent:" + report.node, b, &handled);
    return;
  }
  if (na.last_notice == reclaim) return;
  na.last_notice = reclaim;
  b.events.push_back(s.event(0, EventKind::kInterruptionNoticeIgnored, "agent:" + report.node,
                             Json{{"node", report.node},
                                  {"reason", "node is in pool " + pool.name + " (kind " + pool_kind_name(pool.kind) + "), not spot"}}));
}

// The reported tasks against what the controller placed here.
struct Reconciled {
  Json stop = Json::array();                 // tasks the agent runs that are not wanted here
  std::set<std::pair<int64_t, int>> seen;    // (job, task) reported for a current attempt
  std::set<int64_t> touched;                 // jobs whose tasks changed state
};

Reconciled reconcile(State& s, NodeId nid, int64_t beat, const std::vector<TaskReport>& reported, const std::string& node,
                     WriteBatch& b) {
  Reconciled out;
  Json& stop = out.stop;
  auto& seen = out.seen;
  auto& touched = out.touched;
  for (const TaskReport& rep : reported) {
    JobRecord* r = s.jobs.find(rep.job);
    const bool current = r && placed(r->job.state) && rep.attempt == r->attempt && rep.task >= 0 &&
                         rep.task < int(r->job.placement.size()) && r->job.placement[rep.task].node == nid;
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
        b.events.push_back(s.event(r->id, EventKind::kCheckpointAcknowledged, "agent:" + node,
                                   Json{{"task", rep.task}, {"path", rep.checkpoint}, {"attempt", r->attempt}}));
        b.jobs.push_back(s.row(*r));
      }
    }
    if (r->start_sent) {  // the attempt's first report: a task running (or already ended: it ran)
      s.m.start_to_running->observe({}, std::chrono::duration<double>(Clock::now() - *r->start_sent).count());
      r->start_sent.reset();
    }
    if (tr.state != rep.state) {
      tr.state = rep.state;
      tr.exit_code = rep.exit_code;
      tr.message = rep.message;
      touched.insert(rep.job);
    }
  }
  return out;
}

// Charges the utilisation sample to the jobs placed here, and loses the tasks the agent should run
// but did not report.
void charge_and_find_lost(State& s, NodeId nid, const BeatSample& sample, const Reconciled& rec, const std::string& node,
                          WriteBatch& b) {
  const int64_t beat = sample.beat;
  const auto& seen = rec.seen;
  const auto& held = sample.held;
  const int64_t dt_ms = sample.dt_ms;
  for (int64_t jid : s.jobs_on(nid)) {
    JobRecord& r = s.jobs.at(jid);
    if (!placed(r.job.state)) continue;
    if (sample.charge()) add_utilisation_sample(r, nid, held, dt_ms);
    for (size_t t = 0; t < r.job.placement.size(); ++t) {
      if (r.job.placement[t].node != nid || seen.count({jid, int(t)})) continue;
      TaskRun& tr = r.tasks[t];
      // Lost: loaded after a restart and not confirmed, or offered at an earlier heartbeat and no
      // longer (or never) reported running.
      const bool offered_before = tr.offered_beat >= 0 && tr.offered_beat < beat;
      if (tr.recovered || (offered_before && (tr.state == ReportedState::kRunning || !tr.state))) {
        s.lose(r, "task " + std::to_string(t) + " is not running on node " + node + " (the agent did not report it)", b);
        break;
      }
      if (tr.offered_beat < 0) tr.offered_beat = beat;
    }
  }
}

// A GPU being reconfigured is ready once its agent reports the new layout.
void take_mig_layouts(State& s, NodeId nid, const HeartbeatReport& report) {
  const Node& n = s.cluster.node(nid);
  for (const MigLayoutReport& m : report.mig) {
    const int gi = m.gpu;
    if (gi < 0 || size_t(gi) >= n.gpus.size()) continue;
    const Gpu& g = n.gpus[size_t(gi)];
    if (g.health != GpuHealth::kReconfiguring || !layout_matches(g, m)) continue;
    const GpuRef ref{nid, uint16_t(gi)};
    (void)s.cluster.set_health(ref, GpuHealth::kHealthy);
    std::erase_if(s.mig_ready, [&](const auto& e) { return e.second == ref; });
    s.dirty = true;
  }
}

// The node's desired state: every task to run here, and checkpoint-stops for jobs asked to stop.
Json desired_state(State& s, NodeId nid, Json stop) {
  Json run = Json::array();
  for (int64_t jid : s.jobs_on(nid)) {
    const JobRecord& r = s.jobs.at(jid);
    if (!placed(r.job.state)) continue;
    for (size_t t = 0; t < r.job.placement.size(); ++t) {
      if (r.job.placement[t].node != nid) continue;
      Json a = task_assignment_json(r, int(t), s.cluster);
      // The container, and the data mounts and checkpoint store as paths on this node's pool.
      const Json data = task_data_json(r.spec, s.config.storage, s.cluster.pool(s.cluster.node(nid).pool).name, r.id);
      a["container"] = data["container"];
      a["mounts"] = data["mounts"];
      a["checkpoint"]["host_dir"] = data["checkpoint_host_dir"];
      const NodeAdmin& master = s.node_admin[r.job.placement[0].node.value];
      a["master_addr"] = master.address.empty() ? s.cluster.node(r.job.placement[0].node).name : master.address;
      a["master_port"] = r.master_port;
      a["resume_from"] = r.resume_from;
      a["restarts"] = r.restarts;
      a["signal_seq"] = r.signal_seq;  // the agent sends each new one once
      a["signal"] = r.signal_name;
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
  return Json{{"run", run}, {"stop", stop}, {"mig", desired_mig(s.cluster.node(nid))},
              {"heartbeat_interval_ms", s.opt.heartbeat_interval_ms}, {"task_lease_ms", s.opt.lease_ms()},
              {"seq", s.seq_of(nid)}};
}

}  // namespace

// A planned stop of the node's agent: the node takes no new work, and each job with a task there is
// checkpointed (when it can) and requeued as interrupted: no restart, failure or preemption counted.
// Its next start resumes them (from the checkpoint).
static void plan_stop(Controller::State& s, NodeId nid, WriteBatch& b) {
  NodeAdmin& na = s.node_admin[nid.value];
  const std::string node = s.cluster.node(nid).name;
  if (!na.leaving) {
    na.leaving = true;
    s.refresh_schedulable(nid);
    spdlog::info("event=node_leaving node={} (planned stop: its jobs checkpoint and are requeued)", node);
    b.events.push_back(s.event(0, EventKind::kNodeLeaving, "agent", Json{{"node", node}}));
  }
  for (int64_t id : s.jobs_on(nid)) {
    JobRecord& r = s.jobs.at(id);
    if (r.job.state == JobState::kCheckpointing && r.stop_cause == StopCause::kPlannedStop) continue;
    bool here = false;
    for (const TaskPlacement& p : r.job.placement) here = here || p.node == nid;
    if (here) s.interrupt_job(r, StopCause::kPlannedStop, "node " + node + " stopping", b);
  }
}

// Jobs whose tasks changed state: requeued (asked to stop, stopped), failed, succeeded or lost.
void settle_jobs(Controller::State& s, const std::set<int64_t>& touched, const std::string& node, WriteBatch& b) {
  for (int64_t jid : touched) {
    JobRecord& r = s.jobs.at(jid);
    if (!placed(r.job.state)) continue;
    bool any_failed = false, all_done = true, all_stopped = true;
    int exit_code = 0, failed_task = -1;
    for (size_t t = 0; t < r.tasks.size(); ++t) {
      const TaskRun& tr = r.tasks[t];
      const auto st = tr.state;
      if (st == ReportedState::kFailed && !any_failed) any_failed = true, exit_code = tr.exit_code, failed_task = int(t);
      all_done = all_done && st == ReportedState::kSucceeded;
      all_stopped = all_stopped && (st == ReportedState::kCheckpointed || st == ReportedState::kStopped ||
                                    st == ReportedState::kSucceeded ||
                                    (r.job.state == JobState::kCheckpointing && st == ReportedState::kFailed));
    }
    if (r.job.state == JobState::kCheckpointing) {
      // Asked to stop: a task that fails now was stopped, not broken.
      if (all_stopped) {
        bool acked = false;
        for (const TaskRun& tr : r.tasks) acked = acked || tr.answered_request || tr.state == ReportedState::kCheckpointed;
        s.requeue(r, s.stop_event(r), s.stop_text(r, acked ? "checkpointed and stopped as asked" : "stopped without a checkpoint"), b, acked);
      }
    } else if (any_failed) {
      std::set<uint32_t> nodes;
      for (const TaskPlacement& p : r.job.placement) nodes.insert(p.node.value);
      if (nodes.size() > 1) {
        // Wait one agent timeout for the other nodes' word: a rank fails when a peer's node dies.
        if (!r.fail_verdict_at) r.fail_verdict_at = s.opt.steady_clock() + std::chrono::milliseconds(s.opt.agent_timeout_ms);
        if (s.opt.steady_clock() < *r.fail_verdict_at) continue;
      }
      r.exit_code = exit_code;
      const std::string& why = r.tasks[size_t(failed_task)].message;
      Json detail{{"exit_code", exit_code}, {"task", failed_task}};
      if (!why.empty()) detail["message"] = why;
      s.finish(r, JobState::kFailed,
               "task " + std::to_string(failed_task) + " exited with code " + std::to_string(exit_code) + (why.empty() ? "" : ": " + why),
               b, node.empty() ? "scheduler" : "agent:" + node, EventKind::kFailed, detail);
    } else if (all_done) {
      r.exit_code = 0;
      s.finish(r, JobState::kSucceeded, "all tasks exited with code 0", b, node.empty() ? "scheduler" : "agent:" + node, EventKind::kSucceeded);
    } else if (all_stopped) {
      s.lose(r, "tasks stopped without being asked", b);
    }
  }
}

Result<Json> Controller::agent_heartbeat(const Principal& who, const Json& body) {
  auto promise = std::make_shared<std::promise<Result<Json>>>();
  auto f = promise->get_future();
  agent_heartbeat_async(who, body, [promise](Result<Json> r) { promise->set_value(std::move(r)); });
  return f.get();
}

void Controller::agent_heartbeat_async(const Principal& who, const Json& body, std::function<void(Result<Json>)> done) {
  const auto received = Clock::now();
  auto parsed = parse_heartbeat(body);  // typed and checked here, off the state thread
  if (!parsed.ok()) return done(parsed.error());
  const auto report = std::make_shared<const HeartbeatReport>(std::move(*parsed));
  metrics::HistogramFamily* took = state_->m.heartbeat_seconds;
  auto timed = [took, received, done = std::move(done)](Result<Json> r) {
    took->observe({}, std::chrono::duration<double>(Clock::now() - received).count());
    done(std::move(r));
  };
  answer_async<Json>([=, this](State& s, const Reply& reply) {
    const std::string& node = report->node;
    if (Status st = s.may_speak_for(who, node, "heartbeat"); !st.ok()) return reply->set_value(st.error());
    auto nid = s.cluster.find_node(node);
    if (!nid.ok()) return reply->set_value(not_found(unknown_node_text(s.cluster, node)));
    const NodeAdmin& na = s.node_admin[nid->value];
    if (s.opt.agents_required && !na.registered)
      return reply->set_value(failed_precondition("not_registered: node " + node +
                                                  " has not registered with this controller (it restarted?); register first"));
    if (s.opt.agents_required && na.reclaimed)
      return reply->set_value(failed_precondition("not_registered: node " + node + " was reclaimed by its spot pool at " +
                                                  local_time_text(na.reclaim_at) + "; its agent must register again"));
    if (report->round_trip_ms >= 0) s.m.heartbeat_round_trip->observe({}, double(report->round_trip_ms) / 1000.0);
    WriteBatch b;
    const BeatSample sample = observe_beat(s, *nid, *report, b);
    take_notice(s, *nid, *report, b);
    if (report->leaving) plan_stop(s, *nid, b);
    Reconciled rec = reconcile(s, *nid, sample.beat, report->tasks, node, b);
    charge_and_find_lost(s, *nid, sample, rec, node, b);
    settle_jobs(s, rec.touched, node, b);
    if (!s.stopping_tasks.empty()) {  // tasks of ended attempts this agent no longer runs give their resources back
      std::set<std::tuple<int64_t, int64_t, int>> running_here;
      for (const TaskReport& rep : report->tasks)
        if (rep.state == ReportedState::kRunning) running_here.insert({rep.job, rep.attempt, rep.task});
      s.release_stopped(*nid, &running_here, b);
    }
    take_mig_layouts(s, *nid, *report);
    Json answer = desired_state(s, *nid, std::move(rec.stop));
    if (b.empty()) return reply->set_value(answer);
    s.dirty = true;
    s.reply_when_durable(std::move(b), reply, answer, *nid);
  }, std::move(timed));
}

}  // namespace tessera::server
