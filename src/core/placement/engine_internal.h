// Internals shared by the placement engine's files (engine.cc: uniform gangs; engine_varied.cc:
// gangs whose tasks differ). Not part of the engine's interface; owned by one engine, one thread.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/placement/engine.h"
#include "core/placement/fit.h"

namespace tessera {
namespace engine_detail {

// Nodes changed by the gang being placed; everything else is read from the cluster.
class ScratchView {
 public:
  explicit ScratchView(const ClusterState& c) : cluster_(&c) {}
  void reset() { changed_.clear(); }
  const Node& node(NodeId id) const {
    for (const auto& n : changed_)
      if (n.id == id) return n;
    return cluster_->node(id);
  }
  bool changed(NodeId id) const {
    return std::any_of(changed_.begin(), changed_.end(), [&](const Node& n) { return n.id == id; });
  }
  void apply(const TaskPlacement& p) {
    Node* n = nullptr;
    for (auto& c : changed_)
      if (c.id == p.node) n = &c;
    if (!n) {
      changed_.push_back(cluster_->node(p.node));
      n = &changed_.back();
    }
    ClusterState::apply_on(*n, p);
    n->generation = 0;  // scratch nodes are never cached
  }

 private:
  const ClusterState* cluster_;
  std::vector<Node> changed_;
};

struct MisfitCounts {
  std::array<int, kMisfitKinds> n{};
  int declined = 0;  // fit, but the policy found no acceptable GPU choice
  void add(Misfit m) { ++n[int(m)]; }
  bool all_permanent(int total) const {
    int perm = 0;
    for (int i = 0; i < kMisfitKinds; ++i) perm += misfit_is_permanent(Misfit(i)) ? n[i] : 0;
    return perm == total;
  }
  std::string describe() const {
    std::vector<std::pair<int, int>> v;  // (count, kind), largest first, then kind
    for (int i = 1; i < kMisfitKinds; ++i)
      if (n[i] > 0) v.push_back({n[i], i});
    std::sort(v.begin(), v.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    std::string s;
    for (auto [c, k] : v) {
      if (!s.empty()) s += ", ";
      s += std::to_string(c) + (c == 1 ? " node: " : " nodes: ") + misfit_name(Misfit(k)) +
           (misfit_is_permanent(Misfit(k)) ? " (never)" : "");
    }
    if (declined > 0) s += (s.empty() ? "" : ", ") + std::to_string(declined) + " nodes: no suitable GPU choice";
    return s;
  }
};

// The task may never use the node (its GPU model or pool kind is not allowed).
inline bool misfit_excludes_node(Misfit m) { return m == Misfit::kGpuModel || m == Misfit::kPool; }
std::string describe_task(const TaskRequest& t);
// How many tasks like t an EMPTY node of this shape could hold (for never-fits decisions).
int64_t empty_capacity(const Node& n, const TaskRequest& t);
// How many tasks like t fit on n now (exact for whole GPUs and CPU-only, an upper bound for shares
// and MIG; the greedy fill finds the exact number).
int64_t room_for(const Node& n, const TaskRequest& t);

struct Candidate {
  bool valid = false;
  bool gang_node = false;  // already holds a task of this gang
  int pool_rank = 0;       // pool_rank(): cheaper-to-use pools first
  int64_t score = 0;
  uint32_t rank = 0;
  NodeId node;
  GpuPick pick;
};
// Lower is better. Capacity already paid for (owned, reserved) first, then spot, then on-demand;
// spot first for a task preferring it, last for one avoiding it. Without pools every node ranks 0.
inline int pool_rank(PoolKind k, const TaskRequest& t) {
  switch (k) {
    case PoolKind::kOwned:
    case PoolKind::kReserved: return t.prefer_spot ? 1 : 0;
    case PoolKind::kSpot: return t.prefer_spot ? 0 : t.avoid_spot ? 3 : 1;
    case PoolKind::kOnDemand: return 2;
  }
  return 0;
}
// Total order: gang node first (if the policy packs gangs), cheaper pool first (pool_rank),
// higher score, lower rank, lower id.
inline bool better(const Candidate& a, const Candidate& b, bool packs) {
  if (!b.valid) return a.valid;
  if (!a.valid) return false;
  if (packs && a.gang_node != b.gang_node) return a.gang_node;
  if (a.pool_rank != b.pool_rank) return a.pool_rank < b.pool_rank;
  if (a.score != b.score) return a.score > b.score;
  if (a.rank != b.rank) return a.rank < b.rank;
  return a.node < b.node;
}
// The network level the gang must stay within (NetworkLevels::count() is "node"), or -1 when it need
// not; nullopt, with r set to never-fits, when the gang names an unknown level.
inline std::optional<int> required_level(const NetworkLevels& net, const Gang& gang, PlacementResult& r) {
  if (gang.topology.mode != TopologyMode::kRequired) return -1;
  auto li = net.level_index(gang.topology.level);
  if (li.ok()) return *li;
  r.outcome = Outcome::kNeverFits;
  r.reason = "invalid request: gang.topology.level: " + li.error().message;
  return std::nullopt;
}
// The domain of n at `level` (its own id at the node level; 0, the whole cluster, at -1).
inline uint32_t domain_at(const NetworkLevels& net, const Node& n, int level) {
  return level < 0 ? 0 : level == net.count() ? n.id.value : n.path[size_t(level)];
}
}  // namespace engine_detail

// For one task shape: every node of the cluster where a task of that shape fits and the policy
// accepts, in the engine's order (`better` for a lone task: cheaper pool, higher score, lower rank,
// lower id), brought up to date from the nodes whose generation changed since the last look. A lone
// task's best node is then the first entry, not a scan that scores every node.
struct BestIndex {
  struct Key {
    int pool_rank = 0;
    int64_t score = 0;
    uint32_t rank = 0;
    uint32_t node = 0;
    bool operator<(const Key& o) const {
      if (pool_rank != o.pool_rank) return pool_rank < o.pool_rank;
      if (score != o.score) return score > o.score;
      if (rank != o.rank) return rank < o.rank;
      return node < o.node;
    }
  };
  uint64_t cluster_generation = 0;  // ClusterState::generation() when last brought up to date
  uint64_t rank_epoch = 0;          // the engine's node ranks it was filed with
  std::vector<uint64_t> synced;     // per node: the Node::generation filed (0: none yet)
  std::vector<Key> filed;           // per node: its key, when listed
  std::vector<char> listed;         // per node: in `order`
  std::set<Key> order;
};

struct PlacementEngine::Impl {
  const ClusterState* cluster = nullptr;
  struct Entry {
    uint64_t generation = 0;  // 0 = empty
    bool ok = false;
    NodeChoice choice;
  };
  std::map<std::tuple<int64_t, int64_t, int, int64_t, int64_t, std::string, std::vector<std::string>, int>, size_t>
      shape_ids;
  // Scores by node, one row per shape but for its GPU models: score() does not read them (check_fit
  // has), so tasks that differ only in the models they name share a row.
  std::map<std::tuple<int64_t, int64_t, int, int64_t, int64_t, std::string, int>, size_t> score_rows;
  std::vector<size_t> score_row;          // [shape] -> row of `cache`
  std::vector<std::vector<Entry>> cache;  // [row][node]
  std::vector<std::vector<int>> mig_shapes;  // [shape] -> MIG profile shapes it resolves to
  // (shape, required level) -> (capacity generation + 1, tasks an empty cluster holds).
  std::map<std::pair<size_t, int>, std::pair<uint64_t, int64_t>> never_fits_memo;
  // [shape], see EngineOptions::best_index: for the first kBestShapes shapes (memory: a few vectors
  // per node each), once a shape is asked a second time (a shape asked once is cheaper to scan).
  static constexpr size_t kBestShapes = 32;
  std::vector<BestIndex> best;
  std::vector<uint32_t> lone_asks;  // [shape]: lone-task placements asked
  uint64_t rank_epoch = 1;      // changes whenever the node ranks do
  const std::vector<NodeId>* within = nullptr;  // place_within's nodes, while it runs

  size_t shape_id(const TaskRequest& t) {
    const int pools = int(t.pool_kinds) * 4 + int(t.prefer_spot) + 2 * int(t.avoid_spot);
    auto key = std::make_tuple(t.cpu.v, t.memory.v, t.gpu_count, t.milli_per_gpu.v, t.gpu_memory.v, t.mig_profile,
                               t.gpu_models, pools);
    auto [it, inserted] = shape_ids.emplace(std::move(key), score_row.size());
    if (inserted) {
      auto [row, fresh] = score_rows.emplace(
          std::make_tuple(t.cpu.v, t.memory.v, t.gpu_count, t.milli_per_gpu.v, t.gpu_memory.v, t.mig_profile, pools),
          cache.size());
      if (fresh) cache.emplace_back();
      score_row.push_back(row->second);
    }
    return it->second;
  }
};

}  // namespace tessera
