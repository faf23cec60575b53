#include "core/autoscale.h"

#include <algorithm>
#include <map>

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

}  // namespace tessera
