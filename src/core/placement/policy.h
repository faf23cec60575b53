// Scoring policies: given a node where a task fits, choose the GPUs and give an integer score
// (higher is better). The engine picks the best score; ties go to the lower node rank, then id.
// Policies are created by name from a registry. A policy object is immutable while scoring except
// for prepare(); score() may draw from the context's Rng only if cacheable() is false.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.h"
#include "core/placement/fit.h"
#include "core/request.h"
#include "core/rng.h"
#include "core/status.h"

namespace tessera {

// The shapes of a workload with their counts, for policies that weigh what is likely to come
// (FGD's "typical tasks"). Built by the caller from the job list.
struct WorkloadShape {
  TaskRequest task;   // memory is ignored by FGD
  int64_t count = 0;
};
// A kind of node the workload will land on (static capacity) and how many there are.
struct NodeKind {
  std::string gpu_model;  // empty: no GPUs
  int gpus = 0;
  MilliCpu cpu{0};
  MiB memory{0};
  int64_t count = 0;
};
struct WorkloadProfile {
  std::vector<WorkloadShape> shapes;
  // Optional: the cluster's nodes by kind, for policies that weigh which shapes each node can take
  // (empty: unknown, and such terms are off).
  std::vector<NodeKind> nodes = {};
};
// `cluster`'s nodes grouped by kind (model, GPU count, CPU, memory), in order of first appearance.
std::vector<NodeKind> node_kinds(const ClusterState& cluster);
// True if `n` is of kind `k`: the fields node_kinds() groups by.
bool same_kind(const NodeKind& k, const Node& n);

struct NodeChoice {
  int64_t score = 0;
  GpuPick pick;
};

struct PolicyContext {
  const ClusterState& cluster;
  Rng& rng;
};

class ScoringPolicy {
 public:
  virtual ~ScoringPolicy() = default;
  virtual std::string_view name() const = 0;
  // Called before placing a workload; default ignores it.
  virtual void prepare(const WorkloadProfile&) {}
  // `n` passed check_fit for `t`. Returns nullopt if the policy finds no acceptable GPU choice.
  // Must not read t.gpu_models (check_fit has): the engine shares cached scores among tasks that
  // differ only in the models they name.
  virtual std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext& ctx) const = 0;
  // True if score() depends only on (node state, task, prepared data): the engine may cache it by
  // Node::generation.
  virtual bool cacheable() const { return true; }
  // True if, for gangs of several tasks, the engine should prefer nodes that already hold tasks of
  // the same gang (fewest nodes) before the score.
  virtual bool packs_gangs() const { return false; }
};

// The registry: "random", "dotprod", "gpu-packing", "gpu-clustering", "best-fit", "fgd", "spread",
// "tessera". Unknown names are an error listing the known ones.
Result<std::unique_ptr<ScoringPolicy>> make_policy(std::string_view name);
std::vector<std::string> policy_names();

}  // namespace tessera
