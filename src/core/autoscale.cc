#include "core/autoscale.h"

#include <algorithm>
#include <map>

#include "core/placement/engine.h"
#include "core/placement/policy.h"

namespace tessera {

namespace {

std::string money_per_hour(int64_t micro) {
  const int64_t cents = (micro + 5000) / 10000;
  std::string c = std::to_string(cents % 100);
  return "$" + std::to_string(cents / 100) + "." + (c.size() < 2 ? "0" : "") + c + "/h";
}

bool may_use(const DemandItem& d, const ElasticPool& p) {
  if (!(d.pool_kinds & pool_kind_bit(p.kind))) return false;
  if (p.gpus_per_node < d.gpus_per_task || p.gpus_per_node <= 0) return false;
  return d.gpu_models.empty() || std::find(d.gpu_models.begin(), d.gpu_models.end(), p.gpu_model) != d.gpu_models.end();
}

}  // namespace

AutoscalePlan plan_autoscaling(const AutoscaleInput& in) {
  AutoscalePlan plan;
  if (!in.config.enabled) return plan;

  std::vector<DemandItem> demand = in.demand;
  std::sort(demand.begin(), demand.end(), [](const DemandItem& a, const DemandItem& b) {
    if (a.within_guarantee != b.within_guarantee) return a.within_guarantee;
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.submitted != b.submitted) return a.submitted < b.submitted;
    return a.job < b.job;
  });

  struct State {
    const ElasticPool* p;
    int64_t incoming_free_gpus;  // GPUs on the way not yet claimed by earlier demand
    int added = 0;
  };
  std::vector<State> pools;
  int64_t spend = 0;  // elastic price per hour of what runs or is on the way
  for (const ElasticPool& p : in.pools) {
    pools.push_back({&p, int64_t(p.provisioning) * p.gpus_per_node, 0});
    spend += int64_t(p.running + p.provisioning) * p.gpus_per_node * p.price_micro_per_gpu_hour;
  }
  std::sort(pools.begin(), pools.end(), [](const State& a, const State& b) { return a.p->pool < b.p->pool; });

  for (const DemandItem& d : demand) {
    std::vector<State*> order;
    for (State& s : pools)
      if (may_use(d, *s.p)) order.push_back(&s);
    if (order.empty()) {
      plan.held.push_back({d.job, "no elastic pool of a kind it may use (" + pool_kinds_text(d.pool_kinds) + ") with its GPUs"});
      continue;
    }
    std::sort(order.begin(), order.end(), [&](const State* a, const State* b) {
      const bool as = a->p->kind == PoolKind::kSpot, bs = b->p->kind == PoolKind::kSpot;
      if (as != bs) {
        if (d.prefer_spot) return as;
        if (d.avoid_spot) return bs;
      }
      if (a->p->price_micro_per_gpu_hour != b->p->price_micro_per_gpu_hour)
        return a->p->price_micro_per_gpu_hour < b->p->price_micro_per_gpu_hour;
      return a->p->pool < b->p->pool;
    });
    const int64_t need = int64_t(std::max(1, d.tasks)) * std::max(1, d.gpus_per_task);
    // Capacity on the way first (no new spend).
    bool served = false;
    for (State* s : order)
      if (s->incoming_free_gpus >= need) {
        s->incoming_free_gpus -= need;
        served = true;
        break;
      }
    if (served) continue;
    std::string why;
    for (State* s : order) {
      const ElasticPool& p = *s->p;
      const int per_node_tasks = p.gpus_per_node / std::max(1, d.gpus_per_task);
      // A multi-node gang takes whole nodes; a smaller one tops up what is on the way in this pool.
      const int64_t short_gpus = std::max<int64_t>(0, need - s->incoming_free_gpus);
      int64_t nodes = d.tasks > per_node_tasks ? (d.tasks + per_node_tasks - 1) / per_node_tasks
                                               : (short_gpus + p.gpus_per_node - 1) / p.gpus_per_node;
      nodes = std::max<int64_t>(1, nodes);
      if (p.running + p.provisioning + s->added + nodes > p.max_nodes) {
        why += std::string(why.empty() ? "" : "; ") + pool_kind_name(p.kind) + " pool " + p.name + " is at its max_nodes " +
               std::to_string(p.max_nodes);
        continue;
      }
      const int64_t cost = nodes * p.gpus_per_node * p.price_micro_per_gpu_hour;
      if (in.config.budget_micro_per_hour && spend + cost > *in.config.budget_micro_per_hour) {
        why += std::string(why.empty() ? "" : "; ") + "budget " + money_per_hour(*in.config.budget_micro_per_hour) +
               " would be exceeded by pool " + p.name + " (" + money_per_hour(spend) + " now, +" + money_per_hour(cost) + ")";
        continue;
      }
      s->added += int(nodes);
      spend += cost;
      s->incoming_free_gpus = std::max<int64_t>(0, s->incoming_free_gpus + nodes * p.gpus_per_node - need);
      served = true;
      break;
    }
    if (!served) plan.held.push_back({d.job, why});
  }
  for (const State& s : pools)
    if (s.added > 0)
      plan.up.push_back({s.p->pool, s.added, "queued demand: " + std::to_string(s.added) + " node(s) of " + s.p->name});

  // Scale down: idle long enough, above min_nodes, and the pool is not growing.
  std::vector<IdleNode> idle = in.idle;
  std::sort(idle.begin(), idle.end(), [](const IdleNode& a, const IdleNode& b) {
    return a.idle_since != b.idle_since ? a.idle_since < b.idle_since : a.node < b.node;
  });
  std::map<PoolId, int> released;
  for (const IdleNode& n : idle) {
    if (in.now - n.idle_since < in.config.scale_down_idle_s) continue;
    auto it = std::find_if(pools.begin(), pools.end(), [&](const State& s) { return s.p->pool == n.pool; });
    if (it == pools.end() || it->added > 0) continue;
    if (it->p->running - released[n.pool] <= it->p->min_nodes) continue;
    ++released[n.pool];
    plan.down.push_back({n.node, n.pool, "idle for " + std::to_string(in.now - n.idle_since) + " s"});
  }
  return plan;
}

bool under_used(const Node& n, int below_pct) {
  const int64_t cap = int64_t(n.gpus.size()) * 1000;
  const int64_t used = cap - n.free_gpu_milli;
  return cap > 0 && used > 0 && used * 100 <= cap * below_pct;
}

std::optional<Consolidation> plan_consolidation(const ClusterState& cluster, const std::vector<NodeId>& elastic,
                                                const std::vector<MovableJob>& running, const AutoscaleConfig& config,
                                                int64_t now) {
  if (config.consolidate_below_pct <= 0) return std::nullopt;
  // Jobs per node; a job on several nodes pins them all.
  std::map<NodeId, std::vector<const MovableJob*>> on;
  std::map<NodeId, bool> pinned;
  for (const MovableJob& j : running) {
    std::vector<NodeId> nodes;
    for (const TaskPlacement& p : j.placement)
      if (std::find(nodes.begin(), nodes.end(), p.node) == nodes.end()) nodes.push_back(p.node);
    const bool movable = nodes.size() == 1 && j.checkpointable && now - j.started >= config.consolidate_min_runtime_s;
    for (NodeId n : nodes) {
      on[n].push_back(&j);
      if (!movable) pinned[n] = true;
    }
  }
  struct Cand {
    int64_t used;
    NodeId node;
  };
  std::vector<Cand> cands;
  for (NodeId id : elastic) {
    const Node& n = cluster.node(id);
    const int64_t cap = int64_t(n.gpus.size()) * 1000;
    const int64_t used = cap - n.free_gpu_milli;
    if (!n.schedulable || pinned[id] || !under_used(n, config.consolidate_below_pct)) continue;
    int64_t listed = 0;  // every GPU in use must belong to a listed job
    for (const MovableJob* j : on[id])
      for (const TaskPlacement& p : j->placement) listed += p.node == id ? milli_held(p) : 0;
    if (listed != used) continue;
    cands.push_back({used, id});
  }
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.used != b.used ? a.used < b.used : a.node < b.node; });
  if (cands.empty()) return std::nullopt;
  auto policy = make_policy("best-fit");
  if (!policy.ok()) return std::nullopt;
  PlacementEngine engine(**policy, EngineOptions{});
  for (size_t k = 0; k < cands.size() && k < 4; ++k) {
    const NodeId id = cands[k].node;
    std::vector<const MovableJob*> jobs = on[id];
    std::sort(jobs.begin(), jobs.end(), [](const MovableJob* a, const MovableJob* b) { return a->job < b->job; });
    ClusterState scratch = cluster;
    bool ok = scratch.set_schedulable(id, false).ok();
    for (const MovableJob* j : jobs)
      for (const TaskPlacement& p : j->placement) ok = ok && scratch.release(p).ok();
    const PoolKind here = cluster.node(id).pool_kind;
    for (const MovableJob* j : jobs) {
      if (!ok) break;
      Gang g = j->gang;
      if (here == PoolKind::kSpot) g.task.pool_kinds &= PoolKindMask(~pool_kind_bit(PoolKind::kOnDemand));
      ok = engine.place_and_commit(scratch, g).outcome == Outcome::kPlaced;
    }
    if (!ok) continue;
    Consolidation c;
    c.node = id;
    for (const MovableJob* j : jobs) c.jobs.push_back(j->job);
    c.reason = "consolidation: " + std::to_string(cands[k].used / 1000) + " of " +
               std::to_string(cluster.node(id).gpus.size()) + " GPUs used on " + std::string(pool_kind_name(here)) +
               " node " + cluster.node(id).name + "; its jobs fit elsewhere";
    return c;
  }
  return std::nullopt;
}

}  // namespace tessera
