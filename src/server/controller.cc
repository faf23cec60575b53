// Controller: start (recovery from the store), the state and cycle threads, reload, health, metrics.
#include "server/controller_state.h"

namespace tessera::server {

Controller::Controller(Store* store, ControllerOptions options) : store_(store), options_(std::move(options)) {}

Result<std::unique_ptr<Controller>> Controller::start(config::ClusterConfig cfg, Store* store, ControllerOptions options) {
  // The system clock's seconds (time() reads a coarser clock that lags it by a few ms, so the two
  // would disagree about which second it is just after a boundary; now_ms reads this one too).
  if (!options.clock)
    options.clock = [] {
      return int64_t(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    };
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
  s.usage_at_ms = s.now_ms();

  // Recovery (controller_recovery.cc): tokens, node states, usage, MIG layouts and jobs from the store.
  auto loaded = store->load();
  if (!loaded.ok()) return loaded.error();
  c->tokens_.load(loaded->tokens);
  Result<WriteBatch> fix = WriteBatch{};
  try {
    fix = recover(s, *loaded);
  } catch (const std::exception& e) {  // a stored value of an unexpected type: refuse to start, say which
    return internal_error(std::string("store: cannot load its contents (") + e.what() +
                          "); restore a backup with `tessera admin restore BACKUP --data DIR --force`");
  }
  if (!fix.ok()) return fix.error();
  if (!fix->empty()) {
    if (Status w = store->write_sync(std::move(*fix)); !w.ok()) return w.error();
  }

  c->state_ = std::move(st);
  State* sp = c->state_.get();
  sp->loop.cycle_thread = std::thread([sp] {
    for (;;) {
      std::optional<CycleInput> in;
      {
        std::unique_lock lock(sp->loop.cycle_mu);
        sp->loop.cycle_cv.wait(lock, [&] { return sp->loop.cycle_stop || sp->loop.cycle_input.has_value(); });
        if (sp->loop.cycle_stop) return;
        in.swap(sp->loop.cycle_input);
      }
      Snapshot snap;
      snap.cluster = &in->cluster;
      snap.queues = in->tree.get();
      snap.jobs = std::move(in->jobs);
      snap.history = std::move(in->history);
      snap.mig_last_changed = std::move(in->mig_last_changed);
      snap.runtimes = &in->runtimes;
      snap.reservation = in->reservation;
      const auto cycle_start = Clock::now();
      auto decisions = std::make_shared<Decisions>(in->scheduler->cycle(snap, in->now));
      sp->m.cycle_seconds->observe({}, std::chrono::duration<double>(Clock::now() - cycle_start).count());
      const uint64_t gen = in->config_generation;
      sp->loop.post([decisions, gen](State& s) {
        s.apply(*decisions, gen);
        s.loop.cycle_in_flight = false;
        s.loop.last_cycle_end = Clock::now();
        std::lock_guard l(s.loop.count_mu);
        ++s.loop.cycles_applied;
        s.loop.count_cv.notify_all();
      });
    }
  });
  sp->loop.state_thread = std::thread([sp] {
    std::unique_lock lock(sp->loop.mu);
    for (;;) {
      const auto interval = std::chrono::milliseconds(sp->opt.cycle_interval_ms);
      sp->loop.cv.wait_until(lock, sp->loop.cycle_in_flight ? Clock::now() + interval : sp->next_cycle_at(),
                        [&] { return sp->loop.stopping || !sp->loop.commands.empty(); });
      if (sp->loop.stopping) break;
      std::deque<std::function<void(State&)>> batch;
      batch.swap(sp->loop.commands);
      lock.unlock();
      for (auto& cmd : batch) sp->run_contained("command", cmd);
      sp->run_contained("tick", [](State& st) { st.tick(); });
      const auto now = Clock::now();
      if (!sp->loop.cycle_in_flight && now >= sp->next_cycle_at()) {
        sp->dirty = false;
        sp->loop.cycle_in_flight = true;
        sp->loop.last_cycle_start = now;
        {
          std::lock_guard l(sp->loop.count_mu);
          ++sp->loop.cycles_launched;
        }
        CycleInput in = sp->cycle_input_now();
        std::lock_guard cl(sp->loop.cycle_mu);
        sp->loop.cycle_input.emplace(std::move(in));
        sp->loop.cycle_cv.notify_one();
      }
      lock.lock();
    }
  });
  return c;
}

Controller::~Controller() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->loop.mu);
    state_->loop.stopping = true;
  }
  state_->loop.cv.notify_all();
  state_->loop.state_thread.join();
  {
    std::lock_guard lock(state_->loop.cycle_mu);
    state_->loop.cycle_stop = true;
  }
  state_->loop.cycle_cv.notify_all();
  state_->loop.cycle_thread.join();
  store_->flush();
}

void Controller::wait_for_cycle() {
  int64_t target = 0;
  (void)call<int>([&target](State& s) -> Result<int> {
    s.dirty = true;
    std::lock_guard l(s.loop.count_mu);
    target = s.loop.cycles_launched + (s.loop.cycle_in_flight ? 2 : 1);
    return 0;
  });
  std::unique_lock l(state_->loop.count_mu);
  state_->loop.count_cv.wait(l, [&] { return state_->loop.cycles_applied >= target; });
}

// ---- jobs --------------------------------------------------------------------------------------

std::vector<metrics::Family> Controller::metric_families() {
  auto g = call<std::vector<metrics::Family>>(
      [](State& s) -> Result<std::vector<metrics::Family>> { return s.gauges(); });
  std::vector<metrics::Family> out;
  if (g.ok()) out = std::move(*g);
  for (metrics::Family& f : state_->m.registry.collect()) out.push_back(std::move(f));
  return out;
}

config::ClusterConfig Controller::config_snapshot() {
  auto r = call<config::ClusterConfig>([](State& s) -> Result<config::ClusterConfig> { return s.config; });
  return r.ok() ? *r : config::ClusterConfig{};
}

// ---- agents -----------------------------------------------------------------------------------

const char* pending_metric_category(WaitCategory c) {
  switch (c) {
    case WaitCategory::kQuota: return "quota";
    case WaitCategory::kOrder:
    case WaitCategory::kReservation: return "priority";
    case WaitCategory::kPreempting: return "preempting";
    case WaitCategory::kMigReconfiguring: return "mig_reconfiguring";
    case WaitCategory::kTopology: return "topology";
    case WaitCategory::kCapacity: return "capacity";
    case WaitCategory::kInvalid:
    case WaitCategory::kOther: return "other";
  }
  return "other";
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
    s.advance_usage(s.now_ms());  // integrated under the old queues up to now
    std::vector<double> usage(new_tree->size(), 0.0);
    for (const Queue& q : s.tree->queues()) {
      auto nq = new_tree->find(q.name);
      if (nq.ok() && q.id.value < s.usage.size()) usage[nq->value] = s.usage[q.id.value];
    }
    s.usage = std::move(usage);
    s.tree = std::move(new_tree);
    s.recount_usage();
    s.scheduler = std::move(*sched);
    s.fit_policy = std::move(*pol);
    s.config.queues = cfg.queues;
    s.config.queue_classes = cfg.queue_classes;
    s.config.class_roles = cfg.class_roles;
    s.config.scheduler = cfg.scheduler;
    s.config.chargeback = cfg.chargeback;  // rates apply to reports from now on
    s.config.pools = cfg.pools;            // pool prices too
    s.never_fits_cache.clear();
    ++s.config_generation;
    s.dirty = true;
    WriteBatch b;
    b.events.push_back(s.event(0, EventKind::kConfigReloaded, who, Json{{"queues", cfg.queues.size()}}));
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
