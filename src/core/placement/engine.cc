#include "core/placement/engine.h"

#include "core/placement/engine_internal.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace tessera {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPlaced: return "placed";
    case Outcome::kRetryLater: return "retry-later";
    case Outcome::kNeverFits: return "never-fits";
  }
  return "?";
}

namespace engine_detail {

std::string describe_task(const TaskRequest& t) {
  std::string s;
  if (t.mig()) s = "a MIG " + t.mig_profile + " instance";
  else if (t.whole_gpus()) s = std::to_string(t.gpu_count) + (t.gpu_count == 1 ? " GPU" : " GPUs");
  else if (t.gpu_share()) s = std::to_string(t.milli_per_gpu.v) + " milli-GPU share" + (t.gpu_count > 1 ? " x" + std::to_string(t.gpu_count) : "");
  else s = "no GPU";
  // Only what the task asks: a task with no CPU or memory request says nothing of them.
  if (t.cpu.v > 0) s += ", " + std::to_string(t.cpu.v) + "m CPU";
  if (t.memory.v > 0) s += ", " + std::to_string(t.memory.v) + " MiB";
  if (!t.gpu_models.empty()) {
    s += ", model ";
    for (size_t i = 0; i < t.gpu_models.size(); ++i) s += (i ? "|" : "") + t.gpu_models[i];
  }
  return s;
}

// How many tasks like t an EMPTY node of this shape could hold (for never-fits decisions).
int64_t empty_capacity(const Node& n, const TaskRequest& t) {
  Node empty = n;
  empty.cpu_used = MilliCpu(0);
  empty.memory_used = MiB(0);
  for (Gpu& g : empty.gpus) {
    g.whole_held = false;
    g.shared_milli = MilliGpu(0);
    g.shared_memory = MiB(0);
    g.share_count = 0;
    if (g.mig_enabled) g.mig = MigLayout(g.model);
    g.health = GpuHealth::kHealthy;
  }
  empty.schedulable = true;
  ClusterState::refresh_derived(empty);
  int64_t k = 0;
  GpuPick pick;
  while (k < 64 && check_fit(empty, t) == Misfit::kFits && pick_default(empty, t, pick)) {
    ClusterState::apply_on(empty, make_placement(empty, t, pick));
    ++k;
    if (t.cpu.v == 0 && t.memory.v == 0 && t.cpu_only()) return 64;
  }
  return k;
}

// empty_capacity(n, t) over many nodes: nodes alike in what they offer when empty (capacities, pool,
// and per GPU its index, model and MIG mode: all that empty_capacity reads) hold the same number of
// tasks, computed once per kind of node (clusters have few kinds; past 64, every further kind is
// computed each time).
class EmptyCapacities {
 public:
  explicit EmptyCapacities(const TaskRequest& t) : t_(t) {}
  int64_t of(const Node& n) {
    for (const Kind& k : kinds_)
      if (alike(*k.node, n)) return k.tasks;
    const int64_t c = empty_capacity(n, t_);
    if (kinds_.size() < 64) kinds_.push_back({&n, c});
    return c;
  }

 private:
  static bool alike(const Node& a, const Node& b) {
    if (a.cpu_capacity != b.cpu_capacity || a.memory_capacity != b.memory_capacity || a.pool != b.pool ||
        a.pool_kind != b.pool_kind || a.gpus.size() != b.gpus.size())
      return false;
    for (size_t i = 0; i < a.gpus.size(); ++i)
      if (a.gpus[i].index != b.gpus[i].index || a.gpus[i].model != b.gpus[i].model ||
          a.gpus[i].mig_enabled != b.gpus[i].mig_enabled)
        return false;
    return true;
  }
  struct Kind {
    const Node* node;
    int64_t tasks;
  };
  const TaskRequest& t_;
  std::vector<Kind> kinds_;
};

// How many tasks like t fit on n now (exact for whole GPUs and CPU-only, an upper bound for shares
// and MIG; the greedy fill finds the exact number).
int64_t room_for(const Node& n, const TaskRequest& t) {
  int64_t k = 64;
  if (t.cpu.v > 0) k = std::min<int64_t>(k, n.cpu_free().v / t.cpu.v);
  if (t.memory.v > 0) k = std::min<int64_t>(k, n.memory_free().v / t.memory.v);
  if (t.whole_gpus()) return std::min<int64_t>(k, n.idle_gpus / t.gpu_count);
  int64_t units = 0;
  if (t.mig()) {
    const MigProfile* p = resolve_mig_profile(n, t);
    if (!p) return 0;
    for (const Gpu& g : n.gpus) {
      if (!g.mig_enabled || g.health != GpuHealth::kHealthy) continue;
      for (const MigInstance& m : g.mig.instances()) units += !m.in_use && m.profile_id == p->id;
      units += g.mig.creatable_count_reclaiming(*p);
    }
    return std::min(k, units);
  }
  if (t.gpu_share()) {
    for (const Gpu& g : n.gpus) {
      if (!gpu_fits_share(g, t)) continue;
      int64_t u = g.free_milli() / t.milli_per_gpu.v;
      if (t.gpu_memory.v > 0) u = std::min<int64_t>(u, g.free_memory().v / t.gpu_memory.v);
      units += u;
    }
    return std::min(k, units / t.gpu_count);
  }
  return k;
}

}  // namespace engine_detail
using namespace engine_detail;

PlacementEngine::PlacementEngine(const ScoringPolicy& policy, EngineOptions options)
    : policy_(&policy), rng_(options.seed), impl_(std::make_unique<Impl>()) {
  node_rank_ = std::move(options.node_rank);
  max_scored_nodes_ = options.max_scored_nodes;
  explain_failures_ = options.explain_failures;
  best_index_ = options.best_index;
}

PlacementEngine::~PlacementEngine() = default;

void PlacementEngine::set_node_rank(std::vector<uint32_t> rank) {
  node_rank_ = std::move(rank);
  ++impl_->rank_epoch;
}

bool PlacementEngine::indexed_shape(size_t shape) {
  if (shape >= Impl::kBestShapes) return false;
  if (impl_->lone_asks.size() <= shape) impl_->lone_asks.resize(shape + 1, 0);
  return ++impl_->lone_asks[shape] >= 2;
}

std::optional<NodeId> PlacementEngine::best_indexed(const ClusterState& cluster, const TaskRequest& t, size_t shape) {
  if (impl_->best.size() <= shape) impl_->best.resize(shape + 1);
  BestIndex& ix = impl_->best[shape];
  const size_t count = cluster.node_count();
  // Other nodes or other ranks: file every node again. (Generations are unique in the process, so a
  // cluster assigned from an older copy needs nothing more: its nodes' generations differ.)
  if (ix.synced.size() != count || ix.rank_epoch != impl_->rank_epoch) {
    ix = BestIndex{};
    ix.synced.assign(count, 0);
    ix.filed.assign(count, {});
    ix.listed.assign(count, 0);
    ix.rank_epoch = impl_->rank_epoch;
  }
  if (ix.cluster_generation != cluster.generation()) {
    for (const Node& n : cluster.nodes()) {
      const uint32_t id = n.id.value;
      if (ix.synced[id] == n.generation) continue;
      ix.synced[id] = n.generation;
      if (ix.listed[id]) ix.order.erase(ix.filed[id]);
      ix.listed[id] = 0;
      NodeChoice c;
      if (check_fit(n, t) != Misfit::kFits || !score_node(n, t, shape, true, c)) continue;
      ix.filed[id] = BestIndex::Key{pool_rank(n.pool_kind, t), c.score, rank(n.id), id};
      ix.listed[id] = 1;
      ix.order.insert(ix.filed[id]);
    }
    ix.cluster_generation = cluster.generation();
  }
  if (ix.order.empty()) return std::nullopt;
  return NodeId(ix.order.begin()->node);
}


// Scores one node (cached when the node is unchanged and the policy allows).
bool PlacementEngine::score_node(const Node& n, const TaskRequest& t, size_t shape, bool from_cluster,
                                 NodeChoice& out) {
  if (from_cluster && policy_->cacheable()) {
    auto& row = impl_->cache[impl_->score_row[shape]];
    if (row.size() < impl_->cluster->node_count()) row.resize(impl_->cluster->node_count());
    auto& e = row[n.id.value];
    if (e.generation == n.generation) {
      out = e.choice;
      return e.ok;
    }
    PolicyContext ctx{*impl_->cluster, rng_};
    auto c = policy_->score(n, t, ctx);
    e.generation = n.generation;
    e.ok = c.has_value();
    if (c) e.choice = *c;
    if (c) out = *c;
    return e.ok;
  }
  PolicyContext ctx{*impl_->cluster, rng_};
  auto c = policy_->score(n, t, ctx);
  if (c) out = *c;
  return c.has_value();
}

const std::vector<int>& PlacementEngine::mig_shapes(const ClusterState& cluster, const TaskRequest& t, size_t shape) {
  auto& memo = impl_->mig_shapes;
  if (memo.size() <= shape) memo.resize(shape + 1);
  auto& v = memo[shape];
  if (!v.empty()) return v;
  for (const std::string& name : cluster.catalog().names()) {
    const GpuModel* m = *cluster.catalog().find(name);
    if (const MigProfile* p = m->find_profile(t.mig_profile)) {
      const int sh = ClusterState::mig_shape(*p);
      if (std::find(v.begin(), v.end(), sh) == v.end()) v.push_back(sh);
    }
  }
  if (v.empty()) v.push_back(-1);  // no model has it: nothing to visit
  return v;
}

template <class F>
void PlacementEngine::visit_candidates(const ClusterState& cluster, const TaskRequest& t, size_t shape, F&& fn) {
  auto visit = [&](const std::set<uint32_t>& bucket) {
    for (uint32_t id : bucket)
      if (!fn(id)) return false;
    return true;
  };
  if (t.whole_gpus()) {
    for (int k = t.gpu_count; k <= 16; ++k)
      if (!visit(cluster.by_idle(k))) return;
  } else if (t.mig()) {
    // Idle instances first (no reconfiguration), then GPUs with the fewest free slices.
    const auto& shapes = mig_shapes(cluster, t, shape);
    for (int sh : shapes)
      if (sh >= 0 && !visit(cluster.mig_idle(sh))) return;
    for (int k = 0; k <= 8; ++k)
      for (int sh : shapes)
        if (sh >= 0 && !visit(cluster.mig_creatable(sh, k))) return;
  } else if (t.gpu_share()) {
    for (int b = int(t.milli_per_gpu.v / 10); b <= 100; ++b)
      if (!visit(cluster.by_max_share(b))) return;
  } else {
    for (const Node& n : cluster.nodes())
      if (!fn(n.id.value)) return;
  }
}

uint32_t PlacementEngine::rank(NodeId id) const {
  return node_rank_.empty() ? id.value : node_rank_[id.value];
}

PlacementResult PlacementEngine::place_within(const ClusterState& cluster, const Gang& gang,
                                              const std::vector<NodeId>& nodes) {
  // Only where the best of `nodes` is what place() finds: one task, scores that do not depend on
  // which nodes were scored before (cacheable: no random draws), and no cap on the nodes scored.
  if (gang.tasks != 1 || gang.varied() || !policy_->cacheable() || max_scored_nodes_ > 0) return place(cluster, gang);
  struct Reset {
    const std::vector<NodeId>*& p;
    ~Reset() { p = nullptr; }
  } reset{impl_->within};
  impl_->within = &nodes;
  return place(cluster, gang);
}

PlacementResult PlacementEngine::place(const ClusterState& cluster, const Gang& gang) {
  const std::vector<std::string>& models = gang.task.gpu_models;
  if (gang.tasks <= 1 || models.size() <= 1 || gang.task.mix_models) return place_one(cluster, gang);
  PlacementResult out;
  out.outcome = Outcome::kNeverFits;
  std::string reasons;
  Gang one = gang;
  for (const std::string& m : models) {
    one.task.gpu_models = {m};
    PlacementResult r = place_one(cluster, one);
    if (r.outcome == Outcome::kPlaced) return r;
    if (r.outcome == Outcome::kRetryLater) out.outcome = Outcome::kRetryLater;
    out.nodes_scored += r.nodes_scored;
    reasons += (reasons.empty() ? "on " : "; on ") + m + ": " + r.reason;
  }
  out.reason = "the gang runs on one GPU model (resources.mix_models: true allows mixing); " + reasons;
  return out;
}

PlacementResult PlacementEngine::place_one(const ClusterState& cluster, const Gang& gang) {
  PlacementResult r;
  if (Status s = gang.validate(); !s.ok()) {
    r.outcome = Outcome::kNeverFits;
    r.reason = "invalid request: " + s.message();
    return r;
  }
  if (impl_->cluster != &cluster) {
    impl_->cluster = &cluster;
    impl_->cache.assign(impl_->cache.size(), {});
    impl_->never_fits_memo.clear();
    impl_->best.clear();
  }
  if (!node_rank_.empty() && node_rank_.size() != cluster.node_count()) {
    node_rank_.clear();
    ++impl_->rank_epoch;
  }
  if (gang.varied()) return place_varied(cluster, gang);
  const TaskRequest& t = gang.task;
  const size_t shape = impl_->shape_id(t);
  const int required = gang.required_tasks();
  const bool packs = policy_->packs_gangs();
  ScratchView view(cluster);

  // Best node for one more task among `nodes` (all nodes if null), on the scratch view.
  auto best_in = [&](const std::vector<NodeId>* nodes, const std::vector<NodeId>& gang_nodes, MisfitCounts* why,
                     bool capped) {
    Candidate best;
    auto consider = [&](NodeId id) {
      const bool changed = view.changed(id);
      const Node& n = view.node(id);
      const Misfit m = check_fit(n, t);
      if (m != Misfit::kFits) {
        if (why) why->add(m);
        return;
      }
      NodeChoice c;
      ++r.nodes_scored;
      if (!score_node(n, t, shape, !changed, c)) {
        if (why) ++why->declined;
        return;
      }
      Candidate cand{true, false, pool_rank(n.pool_kind, t), c.score, rank(id), id, c.pick};
      cand.gang_node = packs && std::find(gang_nodes.begin(), gang_nodes.end(), id) != gang_nodes.end();
      if (better(cand, best, packs)) best = cand;
    };
    if (nodes) {
      for (NodeId id : *nodes) consider(id);
    } else if (why == nullptr) {
      // Only nodes that may fit, tightest first; capped if asked (EngineOptions::max_scored_nodes).
      const int before = r.nodes_scored;
      visit_candidates(cluster, t, shape, [&](uint32_t id) {
        if (capped && r.nodes_scored - before >= max_scored_nodes_) return false;
        consider(NodeId(id));
        return true;
      });
    } else {
      for (const Node& n : cluster.nodes()) consider(n.id);
    }
    return best;
  };

  // Greedy: place up to gang.tasks tasks inside `nodes`; true if at least `required` placed.
  auto fill = [&](const std::vector<NodeId>* nodes, MisfitCounts* why, bool capped = false) {
    std::vector<NodeId> gang_nodes;
    r.tasks.clear();
    view.reset();
    while (int(r.tasks.size()) < gang.tasks) {
      Candidate c = best_in(nodes, gang_nodes, r.tasks.empty() ? why : nullptr, capped);
      if (!c.valid) break;
      TaskPlacement p = make_placement(view.node(c.node), t, c.pick);
      view.apply(p);
      r.tasks.push_back(std::move(p));
      if (std::find(gang_nodes.begin(), gang_nodes.end(), c.node) == gang_nodes.end()) gang_nodes.push_back(c.node);
    }
    return int(r.tasks.size()) >= required;
  };

  // The topology levels to try, innermost (node) first; -1 = the whole cluster.
  const NetworkLevels& net = cluster.network();
  const std::optional<int> level = required_level(net, gang, r);
  if (!level) return r;
  const int outermost = *level;

  // How many tasks an empty cluster could hold (in its best domain, for a required level).
  auto empty_cluster_room = [&]() -> int64_t {
    std::map<uint32_t, int64_t> cap_by_domain;
    int64_t total_cap = 0;
    EmptyCapacities empty(t);
    for (const Node& n : cluster.nodes()) {
      const Misfit m = check_fit(n, t);
      if (misfit_is_permanent(m) && m != Misfit::kUnschedulable) continue;
      const int64_t c = empty.of(n);
      total_cap += c;
      if (outermost >= 0) cap_by_domain[domain_at(net, n, outermost)] += c;
    }
    if (outermost < 0) return total_cap;
    int64_t best_domain = 0;
    for (auto& [d, c] : cap_by_domain) best_domain = std::max(best_domain, c);
    return best_domain;
  };
  // Run only when placement failed: could the gang fit at all on an empty cluster (inside one
  // domain if required)? If not, sets the never-fits outcome. Cached per capacity generation.
  MisfitCounts why;
  auto never_fits = [&]() -> bool {
    auto& memo = impl_->never_fits_memo[{shape, outermost}];
    if (memo.first != cluster.capacity_generation() + 1) memo = {cluster.capacity_generation() + 1, empty_cluster_room()};
    const int64_t best_domain = memo.second;
    if (best_domain >= required) return false;
    r.outcome = Outcome::kNeverFits;
    const std::string where =
        outermost >= 0 ? " inside one " + (outermost == net.count() ? std::string("node") : net.names()[outermost]) : "";
    r.reason = "needs " + std::to_string(required) + " task(s) of " + describe_task(t) + where +
               "; even an empty cluster holds at most " + std::to_string(best_domain) +
               (outermost >= 0 ? " in any one domain" : "") + " - ask for less or for other GPU models";
    if (const std::string w = why.describe(); !w.empty()) r.reason += " (" + w + ")";
    return true;
  };

  if (required == 1 && gang.tasks == 1) {
    if (const std::vector<NodeId>* within = impl_->within) {  // place_within: nothing else can fit
      if (fill(within, nullptr)) {
        r.outcome = Outcome::kPlaced;
        return r;
      }
      r.outcome = Outcome::kRetryLater;
      r.reason = "no node fits " + describe_task(t) + " now";
      return r;
    }
    if (best_index_ && max_scored_nodes_ == 0 && policy_->cacheable() && indexed_shape(shape)) {
      if (std::optional<NodeId> best = best_indexed(cluster, t, shape)) {
        NodeChoice c;
        score_node(cluster.node(*best), t, shape, true, c);  // from the score cache
        r.tasks.push_back(make_placement(cluster.node(*best), t, c.pick));
        r.nodes_scored = 1;
        r.outcome = Outcome::kPlaced;
        return r;
      }
    } else if (fill(nullptr, nullptr, max_scored_nodes_ > 0)) {  // indexed candidates
      r.outcome = Outcome::kPlaced;
      return r;
    }
    if (!explain_failures_) {
      r.outcome = Outcome::kRetryLater;
      r.reason = "no node fits " + describe_task(t) + " now";
      return r;
    }
    if (fill(nullptr, &why)) {  // every node, counting why each does not fit
      r.outcome = Outcome::kPlaced;
      return r;
    }
    if (never_fits()) return r;
    r.outcome = Outcome::kRetryLater;
    r.reason = "no node fits " + describe_task(t) + " now: " + why.describe();
    return r;
  }

  // Gangs: span the lowest level possible. At each level, try domains best-fit first: the domain
  // whose current room for this task is the smallest that still holds the gang, then domain id.
  const int innermost = net.count();  // "node"
  const int last = outermost >= 0 ? outermost : -1;
  std::vector<int64_t> room(cluster.node_count(), 0);
  std::vector<uint32_t> roomy;  // the nodes with room, by id
  visit_candidates(cluster, t, shape, [&](uint32_t id) {
    const Node& n = cluster.node(NodeId(id));
    if (room[id] == 0 && check_fit(n, t) == Misfit::kFits && (room[id] = room_for(n, t)) > 0) roomy.push_back(id);
    return true;
  });
  std::sort(roomy.begin(), roomy.end());
  // For the reason: the domain (at the outermost level tried) with the most room, and the most idle
  // GPUs of an allowed model in one domain (scans of every node: only when failures are explained).
  int64_t best_room_seen = 0, best_free_gpus = 0;
  std::string best_room_domain, best_free_domain;
  std::map<uint32_t, int64_t> free_gpus;
  auto note_free = [&](int64_t g, const std::string& name) {
    if (g > best_free_gpus) best_free_gpus = g, best_free_domain = name;
  };
  for (int level = innermost; level >= last; --level) {
    if (level == innermost) {  // one node: no grouping needed
      std::vector<std::tuple<int64_t, uint32_t, uint32_t>> nodes;  // (room, rank, id)
      for (uint32_t id : roomy) {
        const Node& n = cluster.node(NodeId(id));
        const int64_t k = room[id];
        if (level == last && k > best_room_seen) {
          best_room_seen = k;
          best_room_domain = n.name;
        }
        if (k >= required) nodes.push_back({k, rank(n.id), n.id.value});
      }
      if (explain_failures_ && level == last && t.whole_gpus())
        for (const Node& n : cluster.nodes())
          if (n.schedulable && !misfit_excludes_node(check_fit(n, t))) note_free(n.idle_gpus, n.name);
      std::sort(nodes.begin(), nodes.end());
      for (auto& [k, rk, id] : nodes) {
        std::vector<NodeId> one{NodeId(id)};
        if (fill(&one, level == last ? &why : nullptr)) {
          r.outcome = Outcome::kPlaced;
          return r;
        }
      }
      continue;
    }
    std::map<uint32_t, std::pair<int64_t, std::vector<NodeId>>> domains;
    for (uint32_t id : roomy) {
      const Node& n = cluster.node(NodeId(id));
      auto& e = domains[level < 0 ? 0 : n.path[level]];
      e.first += room[id];
      e.second.push_back(n.id);
    }
    if (explain_failures_ && level == last && t.whole_gpus()) {
      free_gpus.clear();
      for (const Node& n : cluster.nodes())
        if (n.schedulable && !misfit_excludes_node(check_fit(n, t))) free_gpus[level < 0 ? 0 : n.path[level]] += n.idle_gpus;
      for (auto& [d, g] : free_gpus) note_free(g, level < 0 ? "the cluster" : net.domain_name(level, d));
    }
    std::vector<std::pair<int64_t, uint32_t>> order;
    for (auto& [d, e] : domains) {
      if (e.first > best_room_seen && level == last) {
        best_room_seen = e.first;
        best_room_domain = level < 0 ? "the cluster" : net.domain_name(level, d);
      }
      if (e.first >= required) order.push_back({e.first, d});
    }
    std::sort(order.begin(), order.end());
    for (auto& [cap, d] : order) {
      if (fill(&domains[d].second, level == last ? &why : nullptr)) {
        r.outcome = Outcome::kPlaced;
        return r;
      }
    }
  }
  r.tasks.clear();
  if (!explain_failures_) {
    r.outcome = Outcome::kRetryLater;
    r.reason = "no room for the gang now";
    return r;
  }
  if (never_fits()) return r;
  r.outcome = Outcome::kRetryLater;
  const std::string scope =
      last >= 0 ? " within one " + (last == innermost ? std::string("node") : net.names()[last]) : "";
  r.reason = "needs ";
  if (t.whole_gpus())
    r.reason += std::to_string(int64_t(required) * t.gpu_count) + " GPUs (" + std::to_string(required) + " tasks of " +
                describe_task(t) + ")" + scope + "; the largest free block is " + std::to_string(best_free_gpus) +
                " GPUs" + (best_free_domain.empty() ? "" : " in " + best_free_domain) + ", room for " +
                std::to_string(best_room_seen) + (best_room_seen == 1 ? " task" : " tasks");
  else
    r.reason += std::to_string(required) + " tasks of " + describe_task(t) + scope + "; the most room is " +
                std::to_string(best_room_seen) + (best_room_seen == 1 ? " task" : " tasks") +
                (best_room_domain.empty() ? "" : " in " + best_room_domain);
  const std::string w = why.describe();
  if (!w.empty()) r.reason += " (" + w + ")";
  return r;
}

PlacementResult PlacementEngine::place_and_commit(ClusterState& cluster, const Gang& gang) {
  PlacementResult r = place(cluster, gang);
  if (r.outcome == Outcome::kPlaced) {
    Status s = cluster.apply_all(r.tasks);
    assert(s.ok() && "engine produced a placement the cluster rejects");
    (void)s;
  }
  return r;
}

}  // namespace tessera
