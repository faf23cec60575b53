// Placement of a gang whose tasks differ (Gang::sizes): the largest tasks first, each on the best
// node for it on the scratch view, inside the smallest domain (one node, then each network level up
// to the required one, else the whole cluster) whose free GPUs, CPU and memory cover the gang, best
// fit first. The gang is placed whole or not at all; result slot i is task i.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/placement/engine.h"
#include "core/placement/engine_internal.h"

namespace tessera {

using namespace engine_detail;

namespace {

std::string describe_sizes(const Gang& g) {
  std::string s = std::to_string(g.total_gpus()) + " GPUs (" + std::to_string(g.tasks) + " tasks of ";
  for (size_t i = 0; i < g.sizes.size(); ++i) s += (i ? "+" : "") + std::to_string(g.sizes[i].gpu_count);
  return s + " GPUs)";
}

// Free room of a set of nodes for the gang.
struct Room {
  int64_t gpus = 0, cpu = 0, memory = 0;
  void add(const Node& n, bool gpus_usable) {
    if (!n.schedulable) return;
    if (gpus_usable) gpus += n.idle_gpus;
    cpu += n.cpu_free().v;
    memory += n.memory_free().v;
  }
  bool holds(const Room& need) const { return gpus >= need.gpus && cpu >= need.cpu && memory >= need.memory; }
};

}  // namespace

PlacementResult PlacementEngine::place_varied(const ClusterState& cluster, const Gang& gang) {
  PlacementResult r;
  const int n = gang.tasks;
  std::vector<TaskRequest> reqs;
  std::vector<size_t> shapes;
  Room need;
  for (int i = 0; i < n; ++i) {
    reqs.push_back(gang.request(i));
    shapes.push_back(impl_->shape_id(reqs.back()));
    need.gpus += reqs.back().gpu_count;
    need.cpu += reqs.back().cpu.v;
    need.memory += reqs.back().memory.v;
  }
  // Largest first (GPUs, CPU, memory), then task index.
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const TaskRequest &x = reqs[size_t(a)], &y = reqs[size_t(b)];
    if (x.gpu_count != y.gpu_count) return x.gpu_count > y.gpu_count;
    if (x.cpu.v != y.cpu.v) return x.cpu.v > y.cpu.v;
    return x.memory.v > y.memory.v;
  });
  const bool packs = policy_->packs_gangs();
  ScratchView view(cluster);
  std::vector<TaskPlacement> slots;

  // Places every task inside `nodes` (all nodes if null); true if all placed.
  auto fill = [&](const std::vector<NodeId>* nodes) {
    view.reset();
    slots.assign(size_t(n), TaskPlacement{});
    std::vector<NodeId> gang_nodes;
    for (int i : order) {
      const TaskRequest& t = reqs[size_t(i)];
      Candidate best;
      auto consider = [&](NodeId id) {
        const bool changed = view.changed(id);
        const Node& nd = view.node(id);
        if (check_fit(nd, t) != Misfit::kFits) return;
        NodeChoice c;
        ++r.nodes_scored;
        if (!score_node(nd, t, shapes[size_t(i)], !changed, c)) return;
        Candidate cand{true, false, pool_rank(nd.pool_kind, t), c.score, rank(id), id, c.pick};
        cand.gang_node = packs && std::find(gang_nodes.begin(), gang_nodes.end(), id) != gang_nodes.end();
        if (better(cand, best, packs)) best = cand;
      };
      if (nodes) {
        for (NodeId id : *nodes) consider(id);
      } else {
        for (const Node& nd : cluster.nodes()) consider(nd.id);
      }
      if (!best.valid) return false;
      TaskPlacement p = make_placement(view.node(best.node), t, best.pick);
      view.apply(p);
      slots[size_t(i)] = std::move(p);
      if (std::find(gang_nodes.begin(), gang_nodes.end(), best.node) == gang_nodes.end()) gang_nodes.push_back(best.node);
    }
    return true;
  };
  auto placed = [&] {
    r.outcome = Outcome::kPlaced;
    r.tasks = std::move(slots);
    return r;
  };

  const NetworkLevels& net = cluster.network();
  const std::optional<int> required = required_level(net, gang, r);
  if (!required) return r;
  const int innermost = net.count();  // "node"
  const int last = *required;
  // A node's GPUs count for the gang when its largest task may use them (model, pool).
  std::vector<char> usable(cluster.node_count(), 0);
  for (const Node& nd : cluster.nodes()) usable[nd.id.value] = !misfit_excludes_node(check_fit(nd, gang.task));
  int64_t best_free = 0;
  std::string best_free_domain;
  for (int level = innermost; level >= last; --level) {
    std::map<uint32_t, std::pair<Room, std::vector<NodeId>>> domains;
    for (const Node& nd : cluster.nodes()) {
      auto& d = domains[domain_at(net, nd, level)];
      d.first.add(nd, usable[nd.id.value]);
      d.second.push_back(nd.id);
    }
    std::vector<std::tuple<int64_t, int64_t, uint32_t>> fitting;  // (free GPUs, free CPU, domain)
    for (auto& [id, d] : domains) {
      if (level == last && d.first.gpus > best_free) {
        best_free = d.first.gpus;
        best_free_domain = level < 0 ? "the cluster" : level == innermost ? cluster.node(NodeId(id)).name : net.domain_name(level, id);
      }
      if (d.first.holds(need)) fitting.push_back({d.first.gpus, d.first.cpu, id});
    }
    std::sort(fitting.begin(), fitting.end());
    for (auto& [g, c, id] : fitting)
      if (fill(level < 0 ? nullptr : &domains[id].second)) return placed();
  }
  r.tasks.clear();
  r.outcome = Outcome::kRetryLater;
  if (!explain_failures_) {
    r.reason = "no room for the gang now";
    return r;
  }
  const std::string scope = last >= 0 ? " within one " + (last == innermost ? std::string("node") : net.names()[size_t(last)]) : "";
  // Never fits: a task no node could hold even empty, or too few GPUs in any one domain when empty.
  for (int i = 0; i < n; ++i) {
    bool somewhere = false;
    for (const Node& nd : cluster.nodes()) {
      const Misfit m = check_fit(nd, reqs[size_t(i)]);
      if (misfit_is_permanent(m) && m != Misfit::kUnschedulable) continue;
      if (empty_capacity(nd, reqs[size_t(i)]) >= 1) {
        somewhere = true;
        break;
      }
    }
    if (!somewhere) {
      r.outcome = Outcome::kNeverFits;
      r.reason = "task " + std::to_string(i) + " (" + describe_task(reqs[size_t(i)]) +
                 ") fits no node even when it is empty - ask for less or for other GPU models";
      return r;
    }
  }
  TaskRequest unit = gang.task;  // one whole GPU of an allowed model
  unit.gpu_count = 1, unit.cpu = MilliCpu(0), unit.memory = MiB(0);
  std::map<uint32_t, int64_t> empty_gpus;
  for (const Node& nd : cluster.nodes()) {
    const Misfit m = check_fit(nd, unit);
    if (misfit_is_permanent(m) && m != Misfit::kUnschedulable) continue;
    empty_gpus[domain_at(net, nd, last)] += empty_capacity(nd, unit);
  }
  int64_t most = 0;
  for (auto& [d, g] : empty_gpus) most = std::max(most, g);
  if (most < need.gpus) {
    r.outcome = Outcome::kNeverFits;
    r.reason = "needs " + describe_sizes(gang) + scope + "; even an empty cluster holds at most " + std::to_string(most) +
               " GPUs" + (last >= 0 ? " in any one domain" : "") + " - ask for less or for other GPU models";
    return r;
  }
  r.reason = "needs " + describe_sizes(gang) + scope + "; the largest free block is " + std::to_string(best_free) +
             " GPUs" + (best_free_domain.empty() ? "" : " in " + best_free_domain);
  return r;
}

}  // namespace tessera
