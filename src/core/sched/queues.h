// Hierarchical queues with guarantees, limits and weights per GPU class, and the fair-share
// computation the scheduling cycle orders queues by. Quantities are milli-GPU per class: a whole
// GPU is 1000, a MIG instance its compute fraction, a share its milli. A GPU model belongs to a
// class through QueueConfig::gpu_class (default: the model's canonical name).
// QueueTree is immutable after build(); FairShare is recomputed each cycle. Thread-compatible.
#pragma once

#include "core/generation.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace tessera {

using ClassAmounts = std::map<std::string, int64_t>;  // GPU class -> milli-GPU

struct QueueSpec {
  std::string name;
  std::string parent;          // empty = child of the root
  ClassAmounts guaranteed;     // deserved minimum per class (absent = 0)
  ClassAmounts limit;          // hard cap per class (absent = unlimited)
  int64_t weight = 1;          // share of what is beyond guarantees, among siblings (>= 1)
};

struct Queue {
  QueueId id;
  std::string name;
  QueueId parent;                 // invalid for top-level queues
  std::vector<QueueId> children;  // sorted by id
  ClassAmounts guaranteed, limit;
  int64_t weight = 1;
  int depth = 0;
  bool leaf() const { return children.empty(); }
};

class QueueTree {
 public:
  // Validates: unique non-empty names, known parents, no cycles, weight >= 1, amounts >= 0,
  // guaranteed <= limit, children's guarantees summing to at most the parent's (per class).
  // Errors name the queue and the field. Ids are assigned in name order (independent of the order
  // of `specs`); children and top_level are sorted by id.
  static Result<QueueTree> build(const std::vector<QueueSpec>& specs);
  size_t size() const { return queues_.size(); }
  const Queue& queue(QueueId id) const { return queues_[id.value]; }
  const std::vector<Queue>& queues() const { return queues_; }
  Result<QueueId> find(const std::string& name) const;
  const std::vector<QueueId>& top_level() const { return top_; }
  // The queue and its ancestors, leaf first (made once by build: asked on every guarantee check).
  const std::vector<QueueId>& path_to_root(QueueId leaf) const { return paths_[leaf.value]; }

 private:
  std::vector<Queue> queues_;
  std::vector<QueueId> top_;
  std::vector<std::vector<QueueId>> paths_;  // per queue: path_to_root
};

// Per-queue inputs of one cycle (indexed by QueueId; leaf values, the computation aggregates).
// Only leaf entries are read; a shorter vector means empty loads for the remaining queues.
struct QueueLoad {
  ClassAmounts allocated;     // running now
  ClassAmounts demand;        // running + pending
  double decayed_usage = 0;   // historical usage (GPU-class-normalised, decayed by the half-life)
};

// The one definition of decayed usage over time: after `elapsed_s` seconds at `share` (the queue's
// allocated milli-GPU over the healthy capacity, 0..1), usage = usage * d + share * (1 - d) with
// d = 2^(-elapsed / half_life) (half_life at least 1 s). Whoever keeps QueueLoad::decayed_usage calls it.
double decay_usage(double usage, double share, int64_t elapsed_s, int64_t half_life_s);
// The same in two steps, over milliseconds, for whoever decays many queues over one interval (the
// controller, at every change of what is placed): d once, then each queue's usage with it.
double usage_decay_factor_ms(int64_t elapsed_ms, int64_t half_life_s);
inline double decay_usage_by(double usage, double share, double d) { return usage * d + share * (1 - d); }

// Fair share of one cycle. Holds a pointer to the tree, which must outlive it.
// Invariants: allocated and demand of an inner queue are sums over its subtree's leaves; fair
// shares are fixed at compute() (add() moves allocated only); siblings' fair shares sum to at most
// the parent's (root: the capacity), each within min(subtree demand, limit) beyond its guarantee.
class FairShare {
 public:
  // How much decayed usage raises saturation: saturation = raw * (1 + kUsageWeight * usage).
  static constexpr double kUsageWeight = 1.0;
  // Saturation of a class a queue uses but has no fair share of (more than any finite ratio seen).
  static constexpr double kUnfundedSaturation = 1e9;

  // Fair share per queue and class, top-down: each queue gets min(guaranteed, demand), then what
  // remains at each level is split among siblings by weight (water-filling, capped by demand and
  // limit). `capacity` is the cluster's milli-GPU per class; only its classes get fair shares.
  // Integer arithmetic: guarantees are served in id order while the parent's amount lasts, weighted
  // parts are floored and the leftover milli go one each to uncapped children in id order.
  static FairShare compute(const QueueTree& tree, const ClassAmounts& capacity, const std::vector<QueueLoad>& load);

  int64_t fair_share(QueueId q, const std::string& cls) const;
  int64_t allocated(QueueId q, const std::string& cls) const;  // aggregated over the subtree
  int64_t demand(QueueId q, const std::string& cls) const;     // aggregated over the subtree
  // Dominant saturation allocated/fair_share over classes (lower = more deserving), with the
  // decayed-usage adjustment; used to order siblings.
  double saturation(QueueId q) const;
  double raw_saturation(QueueId q) const;  // without the usage adjustment
  // Allocated below its guarantee in some class where its demand is higher than its allocation.
  // Deserved quota takes precedence over saturation and usage: such queues come first.
  bool below_guarantee(QueueId q) const;
  // Total order among siblings: below-guarantee first, then lower saturation, then lower decayed
  // usage, then id.
  bool before(QueueId a, QueueId b) const;
  // Would adding `extra` to leaf q keep q and its ancestors within their limits? The error
  // (kResourceExhausted) says which queue is at which limit ("queue team-a at its limit of 64 GPUs
  // of class h100"); the leaf is checked first, then ancestors upwards, classes in name order.
  Status within_limits(QueueId q, const ClassAmounts& extra) const;
  // Is q (or an ancestor) using more than its guarantee in class cls (i.e. borrowing)?
  bool borrowing(QueueId q, const std::string& cls) const;
  // Record an allocation/release during the cycle (keeps allocated and orderings current).
  // sign is +1 or -1; fair shares and demand stay as computed.
  void add(QueueId leaf, const ClassAmounts& delta, int sign);
  // Changes with every add() and differs between any two states of any FairShare in the process (a
  // copy shares its original's): while it stays, before() answers every question as it did.
  uint64_t generation() const { return generation_; }

 private:
  uint64_t generation_ = fresh_generation();
  const QueueTree* tree_ = nullptr;
  std::vector<ClassAmounts> fair_, alloc_, demand_;
  std::vector<double> usage_;  // aggregated over the subtree
  // before()'s sort key per queue, computed on first use and dropped by add() along the path.
  struct Key {
    bool valid = false, below = false;
    double saturation = 0;
  };
  mutable std::vector<Key> key_;
  const Key& key(QueueId q) const;
};

}  // namespace tessera
