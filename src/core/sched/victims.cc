// Victim order (cycle.h, "preempt.cc"): the order in which find_victims_inner tries candidates, and
// for shapes that need their room on one node or in one topology domain, candidates taken group by
// group. Internal to src/core/sched; not thread-safe (one cycle, one thread).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "core/sched/cycle.h"

namespace tessera::sched {

namespace {

// What the victim order compares, read once per candidate (from its packed facts where it has them).
struct VictimKey {
  bool leaving = false;
  bool inside_own = false;
  int class_value = 0;
  int64_t attained = 0;  // 0 unless config.victims_least_attained
  int64_t cost = 0;
  Time started = -1;
  JobId id;
};

VictimKey key_of(const CycleState& cs, const VictimCandidate& c) {
  VictimKey k{c.leaving, c.inside_own, 0, 0, c.cost, -1, {}};
  if (const RunningFacts* f = c.fact) {
    k.class_value = f->class_value;
    k.attained = f->attained_gpu_s;
    k.started = f->started;
    k.id = f->id;
  } else {
    const Entry& e = cs.entries[c.idx];
    k.class_value = e.pc->value;
    k.attained = e.job->attained_gpu_s;
    k.started = e.job->started;
    k.id = e.job->id;
  }
  if (!cs.cfg.victims_least_attained) k.attained = 0;
  return k;
}

// Jobs already leaving, then (reclaim) borrowers' jobs before those inside their own leaf's
// guarantee, then the lowest priority class, (with config.victims_least_attained: the least attained
// service,) then the least lost work (as KAI and Slurm order victims): a lower class that can serve
// the preemptor is used up before a higher one. Ends in the job id.
bool key_before(const VictimKey& a, const VictimKey& b) {
  if (a.leaving != b.leaving) return a.leaving;
  if (a.inside_own != b.inside_own) return b.inside_own;
  if (a.class_value != b.class_value) return a.class_value < b.class_value;
  if (a.attained != b.attained) return a.attained < b.attained;  // the least served first
  if (a.cost != b.cost) return a.cost < b.cost;
  if (a.started != b.started) return a.started > b.started;  // newest first
  return a.id < b.id;
}

}  // namespace

void visit_victims(const CycleState& cs, const Gang& gang, std::vector<VictimCandidate> cands,
                   const std::function<bool(const VictimCandidate&)>& take) {
  // Tasks of several whole GPUs (or a gang that must share one node) need them on one node, and a
  // gang required inside one topology domain (leaf, spine) needs all its room in one domain: victims
  // are taken group by group (node, or domain), the group whose candidates lose the least work
  // first, with every candidate in it (a gang's tasks elsewhere go too); groups where even all
  // candidates leave too little room come last. Other shapes take the cheapest victims anywhere.
  const bool one_node = gang.topology.mode == TopologyMode::kRequired && gang.topology.level == "node";
  int level = -1;  // the required domain's level (network().count() is "node"), or -1
  if (gang.topology.mode == TopologyMode::kRequired && gang.tasks > 1)
    if (auto li = cs.work.network().level_index(gang.topology.level); li.ok()) level = *li;
  const bool by_domain = level >= 0 && level < cs.work.network().count();
  const bool grouped_shape =
      gang.task.whole_gpus() && (gang.task.gpu_count > 1 || (one_node && gang.tasks > 1) || by_domain);
  // Taken group by group, only the order inside a group matters (and among the jobs leaving, and those
  // in no group): outside the reference run, those are sorted instead of every candidate, and only
  // once the search reaches them.
  const bool sort_all = cs.reference || !grouped_shape;
  std::vector<VictimKey> keys;
  keys.reserve(cands.size());
  for (const VictimCandidate& c : cands) keys.push_back(key_of(cs, c));
  auto before = [&](size_t x, size_t y) { return key_before(keys[x], keys[y]); };  // by position in cands
  if (sort_all) {
    std::vector<size_t> pos(cands.size());
    for (size_t k = 0; k < pos.size(); ++k) pos[k] = k;
    std::sort(pos.begin(), pos.end(), before);
    std::vector<VictimCandidate> sorted;
    std::vector<VictimKey> sorted_keys;
    sorted.reserve(cands.size());
    sorted_keys.reserve(cands.size());
    for (size_t k : pos) sorted.push_back(cands[k]), sorted_keys.push_back(keys[k]);
    cands = std::move(sorted);
    keys = std::move(sorted_keys);
  }
  if (!grouped_shape) {
    for (const VictimCandidate& c : cands)
      if (!take(c)) return;
    return;
  }
  // Group of a node: its domain at the required level, else the node itself.
  auto group = [&](const Node& n) {
    return by_domain && size_t(level) < n.path.size() ? n.path[size_t(level)] : n.id.value;
  };
  // (group, candidate position) pairs, and per group the room and cost of its candidates (flat by
  // id: maps here cost a tenth of a cycle at 10,000 nodes).
  const size_t ng = by_domain ? std::max<size_t>(cs.work.network().domain_count(level), cs.work.nodes().size())
                              : cs.work.nodes().size();
  std::vector<int64_t> cost_on(ng, 0), room_on(ng, 0), inside_on(ng, 0), free_on(ng, 0);
  std::vector<int> top_class_on(ng, std::numeric_limits<int>::min());  // highest victim class per group
  // Free room per domain; per node it is read where a group is made (most nodes hold no candidate).
  if (by_domain)
    for (const Node& n : cs.work.nodes()) free_on[group(n)] += n.free_gpu_milli;
  std::vector<std::pair<uint32_t, size_t>> at;
  std::vector<uint32_t> touched;
  for (size_t k = 0; k < cands.size(); ++k) {
    if (cands[k].leaving) continue;
    if (const RunningFacts* f = cands[k].fact; f && (f->flags & RunningFacts::kOneNode)) {  // one group
      const uint32_t n = group(cs.work.node(NodeId(f->node)));
      room_on[n] += f->held_milli;
      at.emplace_back(n, k), cost_on[n] += cands[k].cost, inside_on[n] += cands[k].inside_own;
      top_class_on[n] = std::max(top_class_on[n], f->class_value);
      continue;
    }
    touched.clear();
    for (const TaskPlacement& p : cs.entries[cands[k].idx].holding) {
      const uint32_t gid = group(cs.work.node(p.node));
      touched.push_back(gid);
      for (const GpuGrant& g : p.gpus) room_on[gid] += g.milli_held();
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint32_t n : touched) {
      at.emplace_back(n, k), cost_on[n] += cands[k].cost, inside_on[n] += cands[k].inside_own;
      top_class_on[n] = std::max(top_class_on[n], cs.entries[cands[k].idx].pc->value);
    }
  }
  if (sort_all) {
    std::sort(at.begin(), at.end());  // by group, then candidate position (cheapest first)
  } else {  // bucketed by group (no comparisons); sorted inside a group once the search reaches it
    std::vector<uint32_t> begin(ng + 1, 0);
    for (const auto& [n, k] : at) ++begin[n + 1];
    for (size_t n = 0; n < ng; ++n) begin[n + 1] += begin[n];
    std::vector<std::pair<uint32_t, size_t>> by_group(at.size());
    std::vector<uint32_t> next(begin.begin(), begin.end() - 1);
    for (const auto& x : at) by_group[next[x.first]++] = x;
    at = std::move(by_group);
  }
  // Candidates by victim order among `ks` (already so when every candidate was sorted).
  auto in_order = [&](std::vector<size_t> ks) {
    if (!sort_all)
      std::sort(ks.begin(), ks.end(), before);
    return ks;
  };
  const int64_t need = (one_node || by_domain ? gang.total_gpus() : int64_t(gang.task.gpu_count)) * 1000;
  // (too small, candidates inside their own guarantee, highest victim class, cost, group, first pair
  // of the group in `at`): a group whose victims are all of a lower class comes first. A heap: a
  // search usually stops after a few groups.
  using GroupKey = std::tuple<bool, int64_t, int, int64_t, uint32_t, size_t>;
  std::vector<GroupKey> groups;
  for (size_t a = 0; a < at.size(); ++a)
    if (a == 0 || at[a].first != at[a - 1].first) {
      const uint32_t n = at[a].first;
      if (!by_domain) free_on[n] = cs.work.node(NodeId(n)).free_gpu_milli;
      groups.emplace_back(free_on[n] + room_on[n] < need, inside_on[n], top_class_on[n], cost_on[n], n, a);
    }
  std::make_heap(groups.begin(), groups.end(), std::greater<GroupKey>());
  std::vector<bool> taken(cands.size(), false);
  std::vector<size_t> leaving, members, rest;
  for (size_t k = 0; k < cands.size(); ++k)
    if (cands[k].leaving) leaving.push_back(k);
  for (size_t k : in_order(std::move(leaving))) {
    taken[k] = true;
    if (!take(cands[k])) return;
  }
  while (!groups.empty()) {
    std::pop_heap(groups.begin(), groups.end(), std::greater<GroupKey>());
    const uint32_t n = std::get<4>(groups.back());
    const size_t first = std::get<5>(groups.back());
    groups.pop_back();
    members.clear();
    for (size_t a = first; a < at.size() && at[a].first == n; ++a)
      if (!taken[at[a].second]) members.push_back(at[a].second);
    for (size_t k : in_order(std::move(members))) {
      taken[k] = true;
      if (!take(cands[k])) return;
    }
  }
  for (size_t k = 0; k < cands.size(); ++k)
    if (!taken[k]) rest.push_back(k);
  for (size_t k : in_order(std::move(rest)))
    if (!take(cands[k])) return;
}

}  // namespace tessera::sched
