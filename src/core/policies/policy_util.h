// Internal helpers shared by the scoring policies in src/core/policies (not a public API):
// the FGD artifact's score units, the workload's "typical shapes" and the fragmentation measure.
// Pure functions and immutable-after-build values; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/placement/policy.h"
#include "core/request.h"

namespace tessera::policies {

// "norm max" of the FGD artifact: CPU is measured against 128 cores, GPU against 8 GPUs.
inline constexpr int64_t kCpuNorm = 128000;
inline constexpr int64_t kGpuNorm = 8000;

// CPU as scores see it: a request of 0 counts as 100 milli (Kubernetes' non-zero default).
inline int64_t score_cpu(const TaskRequest& t) { return t.cpu.v == 0 ? 100 : t.cpu.v; }
// GPU milli a task takes on `n` (whole GPUs 1000 each; a MIG instance its share of compute).
int64_t gpu_ask_milli(const Node& n, const TaskRequest& t);
// Best-fit GPU choice of fact 20 (shares: least free that fits; whole: lowest idle; MIG: first fit).
inline bool pick_best_fit(const Node& n, const TaskRequest& t, GpuPick& out) { return pick_default(n, t, out); }

// One typical shape: FGD's key (CPU, milli per GPU, GPU count, model constraint), memory ignored.
struct TypicalShape {
  int64_t cpu = 0;    // score CPU (0 -> 100)
  int64_t milli = 0;  // per GPU; 0 for CPU-only, 1000 for whole GPUs
  int gpus = 0;
  std::vector<std::string> models;  // allowed GPU models; empty = any
  std::string mig_profile;          // MIG shapes never fit plain GPU capacity
  int64_t mem = 0;                  // MiB, mean of its tasks (multi-resource model only; else 0)
  int64_t count = 0;                // occurrences in the original workload
  uint64_t model_mask = 0;          // bits of the allowed models in FragModel's model table
};

// The typical set: the most frequent shapes covering `coverage_pct` % of all tasks (fact 14), and
// the fragmentation measure of fact 15 over them, weighted by count (divide by total() for FGD's
// frequencies). Shapes are grouped by milli so that a node's GPUs are scanned once per group.
//
// Multi-resource (build's `multi_resource`; Tessera's policy, while FGD's stays as published): a
// shape fits only where its memory fits too (a shape's memory is the mean of its tasks'), and a
// node's GPU milli that its free CPU or memory cannot carry is stranded: with the whole workload's
// CPU and memory per GPU milli (CPU-only tasks included, as they compete for CPU), the free CPU
// reaches free_cpu x milli / cpu GPU milli, likewise memory; what lies beyond the lesser reach is
// stranded and counts as a fragment every typical task sees (weight total()). So a CPU-only task
// goes where CPU is plentiful for the GPUs left, and a CPU-hungry GPU task where it strands least.
class FragModel {
 public:
  // excluded_fragments: a GPU shape that excludes a node's model counts all the node's idle milli as
  // its fragment (FGD as published). Tessera passes false: such a shape does not see the node at
  // all, since no placement there changes what it can use. Counted, it rewards any task for filling
  // the nodes of a rare model, as if they were fragments, while the tasks that name that model need
  // them (Scarcity only offsets it).
  void build(const WorkloadProfile& profile, int coverage_pct = 95, bool multi_resource = false,
             bool excluded_fragments = true);
  const std::vector<TypicalShape>& shapes() const { return shapes_; }  // most frequent first
  int64_t total() const { return total_; }  // sum of the selected counts
  bool empty() const { return shapes_.empty(); }

  // One hypothetical placement on a node: the new free milli of some GPUs, and the CPU it takes.
  struct Change {
    uint16_t gpu = 0;
    int64_t free_after = 0;
  };
  struct Candidate {
    std::array<Change, kMaxGpusPerNode> changes{};
    uint8_t count = 0;
    int64_t cpu = 0;  // CPU taken (score CPU)
    int64_t mem = 0;  // memory taken, MiB (read by the multi-resource model only)
    void set(uint16_t g, int64_t free_after) { changes[count++] = {g, free_after}; }
  };
  // For each candidate, sum over typical shapes of count x (fragment before - fragment after), in
  // milli-GPU: positive = fragmentation shrinks. No allocation; at most kMaxGpusPerNode candidates.
  void deltas(const Node& n, const Candidate* cands, int ncand, int64_t* out) const;
  // Count-weighted fragment of the node as it is.
  int64_t fragment(const Node& n) const;

 private:
  struct Group {
    int64_t milli = 0;
    uint32_t begin = 0, end = 0;  // range in its view's order
  };
  // What a node's fragment reads of a GPU shape its model allows; shapes alike in it (they differ
  // only in the models they name) are one entry, their counts summed.
  struct ViewShape {
    int64_t cpu = 0, mem = 0;  // mem 0 unless multi-resource
    int gpus = 0;
    int64_t count = 0;
  };
  // The GPU shapes a node of one model can use (every shape naming no model, and those naming
  // it), grouped by milli, so that a node's scan skips the shapes it never fits.
  struct View {
    std::vector<ViewShape> by_milli;
    std::vector<Group> groups;
  };
  const View& view(uint64_t node_bit) const;
  uint64_t model_bit(const Node& n) const;

  std::vector<TypicalShape> shapes_;
  // [i]: nodes of model i of model_names_; [model_names_.size()]: any other model (or none).
  std::vector<View> views_;
  bool multi_resource_ = false;
  // The workload's CPU (score CPU) and memory per GPU milli, as cpu_per_ / milli_per_ and
  // mem_per_ / milli_per_ (count-weighted sums over all its tasks).
  int64_t cpu_per_ = 0, mem_per_ = 0, milli_per_ = 0;
  // GPU milli of gpu_free that the free CPU and memory cannot carry (0 unless multi-resource).
  int64_t stranded(int64_t gpu_free, int64_t cpu_free, int64_t mem_free) const;
  int64_t always_all_ = 0;          // count of shapes that always count all idle milli (CPU-only, MIG)
  // GPU shapes that name models, left out of the views of other models: there a shape always
  // counts all idle milli, so their counts are summed once, by view as views_.
  std::vector<int64_t> unusable_count_;
  bool excluded_fragments_ = true;
  int64_t unusable(uint64_t node_bit) const;  // 0 unless excluded_fragments_
  std::vector<std::string> model_names_;  // at most 64
  int64_t total_ = 0;
};

// Capacity that restricted shapes count on. A shape is restricted when the nodes it fits (empty: GPU
// model, GPU count, CPU and memory) hold at most half the cluster's GPUs, e.g. one that names a rare
// model, or 8 GPUs with more CPU than most 8-GPU nodes have. Its demand (count x GPUs x milli, the
// workload scaled to the cluster's capacity) is spread over those nodes in proportion to their GPUs.
// A node's pressure is the demand restricted shapes put on each of its GPUs, per mille of a GPU: 0
// where no restricted shape fits, 1000 where they would take all of it, more where they exceed it.
// A task placed there takes capacity they cannot find elsewhere. Built once from the profile's shapes
// and nodes; without nodes every pressure is 0. Immutable after build; thread-compatible.
class Scarcity {
 public:
  void build(const std::vector<TypicalShape>& shapes, const std::vector<NodeKind>& nodes);
  int64_t pressure(const Node& n) const;  // per mille of a GPU; 0 for a node of no listed kind
  // By kind, in the order of build's nodes; empty when no kind has any pressure.
  const std::vector<int64_t>& by_kind() const { return pressure_; }

 private:
  std::vector<NodeKind> kinds_;
  std::vector<int64_t> pressure_;  // by kind
};
// Untouched nodes kept for the shapes that need them. Two kinds of demand need a node no task has
// started on:
// - a whole-node shape: whole GPUs, and every kind it fits (GPU model, count, CPU, memory) has
//   exactly its GPU count, such as 8 GPUs where no node has more. Any task placed on such a node
//   shuts it out. Its pods (the workload scaled to the cluster's capacity) are spread over the nodes
//   it fits, and each of those kinds keeps that share of its nodes, per mille;
// - restricted shapes (Scarcity): a kind keeps the share of its capacity they will ask, its
//   pressure.
// Shapes are the profile's own (exact memory), not FGD's typical shapes, whose mean memory may fit
// kinds that most of their tasks do not. Which nodes a kind keeps is fixed by a hash of the node id,
// so the choice is static and cacheable. Shares are capped at all the kind's nodes. A kept node that
// is untouched is left to any task that can go elsewhere: the policy scores it below every other
// node, so it is used when nothing else fits, never refused. A task that takes every GPU of the node
// whole is not kept off the nodes kept for whole-node shapes. Without node kinds nothing is kept.
// Immutable after build; thread-compatible.
class Reserve {
 public:
  void build(const WorkloadProfile& profile, const Scarcity& scarcity);
  // True if `t` should leave `n` to the shapes it is kept for while other nodes can take `t`.
  bool keeps(const Node& n, const TaskRequest& t) const;
  // Per kind, in the order of the profile's nodes, per mille of its nodes: kept for whole-node
  // shapes, and for restricted shapes. Empty when nothing is kept.
  const std::vector<int64_t>& whole_by_kind() const { return whole_; }
  const std::vector<int64_t>& restricted_by_kind() const { return restricted_; }
  // The node's place in [0, 1000): a kind keeps the nodes whose slot is below its share.
  static int64_t slot(NodeId id);

 private:
  std::vector<NodeKind> kinds_;
  std::vector<int64_t> whole_, restricted_;
};

// True if `s` fits an empty node of kind `k` (model, GPU count, CPU, and memory when s.mem is set).
bool fits_kind(const TypicalShape& s, const NodeKind& k);

}  // namespace tessera::policies
