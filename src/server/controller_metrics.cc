// Controller::State: the gauges computed at each scrape (docs/metrics.md).
#include "server/controller_state.h"

namespace tessera::server {

metrics::Family Controller::State::gauge_family(const char* name, const char* help, std::vector<std::string> labels) {
  auto f = metrics::make_family(name, help, metrics::Type::kGauge, std::move(labels));
  if (!f.ok()) {  // the names are constants: a programming error (the metrics tests render them all)
    spdlog::critical("metrics: {}", f.error().message);
    std::abort();
  }
  return std::move(*f);
}

std::vector<metrics::Family> Controller::State::gauges() const {
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
  static const char* const kCategories[] = {"array_limit", "backoff",  "begin_time", "capacity", "dependency", "held",
                                            "mig_reconfiguring", "new", "other", "preempting", "priority", "quota",
                                            "topology"};
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
    const char* cat = r.gate ? (r.gate->gate == JobGate::kHeld                       ? "held"
                                : r.gate->gate == JobGate::kBeginTime                ? "begin_time"
                                : r.gate->gate == JobGate::kArrayTaskLimit           ? "array_limit"
                                : r.gate->gate == JobGate::kBackoff                  ? "backoff"
                                                                                     : "dependency")
                      : r.not_before > t ? "backoff"
                      : r.pending        ? pending_metric_category(r.pending->category)
                                         : "new";
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

}  // namespace tessera::server
