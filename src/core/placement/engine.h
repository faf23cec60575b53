// The placement engine: places one gang onto a cluster. Every task of the gang is tried on a
// scratch view (overlay of changed nodes) and the result is returned whole; the caller commits it
// with ClusterState::apply_all. Nothing is placed partially.
// Owned by one thread; keeps a score cache keyed by node generation (see ScoringPolicy::cacheable).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/placement/policy.h"
#include "core/request.h"
#include "core/rng.h"

namespace tessera {

enum class Outcome : uint8_t { kPlaced, kRetryLater, kNeverFits };
const char* outcome_name(Outcome o);

struct PlacementResult {
  Outcome outcome = Outcome::kRetryLater;
  std::vector<TaskPlacement> tasks;  // kPlaced: one per placed task (>= required tasks)
  std::string reason;                // why not placed, in words a user can act on
  int nodes_scored = 0;
};

struct EngineOptions {
  uint64_t seed = 0;
  // Tie-break order: rank[node id] (lower wins). Empty = node id order.
  std::vector<uint32_t> node_rank;
  // 0: score every fitting node. N > 0: for single GPU tasks, visit nodes tightest first (fewest
  // idle GPUs / smallest sufficient free share / MIG nodes, via the cluster's candidate index) and
  // stop after N fitting nodes were scored - Kubernetes' percentageOfNodesToScore, made best-fit.
  // If none fits, every node is checked before the answer is retry-later.
  int max_scored_nodes = 0;
  // false: a failed placement returns retry-later with a short reason, skipping the full scan that
  // counts why each node does not fit and the never-fits check (for trial placements).
  bool explain_failures = true;
  // true: with max_scored_nodes 0 and a cacheable policy, a lone task's best node comes from a
  // per-shape ordered index of the fitting nodes, kept up to date from the nodes that changed (the
  // same answer as scoring every node; false scores every node, for reference runs that check it).
  bool best_index = true;
};

class PlacementEngine {
 public:
  PlacementEngine(const ScoringPolicy& policy, EngineOptions options);
  ~PlacementEngine();

  const ScoringPolicy& policy() const { return *policy_; }
  // Decides where `gang` goes on `cluster` now. Does not modify the cluster. A gang of several tasks
  // that allows several GPU models runs on one of them (unless TaskRequest::mix_models): each model
  // is tried in the order listed, the first that holds the whole gang wins.
  PlacementResult place(const ClusterState& cluster, const Gang& gang);
  // place() and, if placed, apply it.
  PlacementResult place_and_commit(ClusterState& cluster, const Gang& gang);
  // place() when the caller knows that no node outside `nodes` can hold `gang` (e.g. it fit nowhere,
  // and only these nodes have changed since): for a lone task and a cacheable policy, only `nodes`
  // are looked at and the answer is place()'s (the best node, or retry-later, without the
  // explanation); anything else is place() itself.
  PlacementResult place_within(const ClusterState& cluster, const Gang& gang, const std::vector<NodeId>& nodes);
  void set_node_rank(std::vector<uint32_t> rank);
  Rng& rng() { return rng_; }

 private:
  struct Impl;
  PlacementResult place_one(const ClusterState& cluster, const Gang& gang);  // the models mixed as allowed
  PlacementResult place_varied(const ClusterState& cluster, const Gang& gang);  // tasks that differ (engine_varied.cc)
  bool score_node(const Node& n, const TaskRequest& t, size_t shape, bool from_cluster, NodeChoice& out);
  // The best node for one task of `shape` on `cluster` (unchanged since the index's last look except
  // for nodes whose generation moved), from Impl::best; nullopt when no node fits and accepts.
  std::optional<NodeId> best_indexed(const ClusterState& cluster, const TaskRequest& t, size_t shape);
  bool indexed_shape(size_t shape);  // counts the ask; true when `shape` is answered from the index
  uint32_t rank(NodeId id) const;
  // Calls fn(node id) for every node that may fit t now (a superset: check_fit decides), tightest
  // first, from the cluster's candidate index; stops when fn returns false.
  template <class F>
  void visit_candidates(const ClusterState& cluster, const TaskRequest& t, size_t shape, F&& fn);
  const std::vector<int>& mig_shapes(const ClusterState& cluster, const TaskRequest& t, size_t shape);
  const ScoringPolicy* policy_;
  std::vector<uint32_t> node_rank_;
  int max_scored_nodes_ = 0;
  bool explain_failures_ = true;
  bool best_index_ = true;
  Rng rng_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
