// The cluster model: nodes with CPU, memory and GPUs (model, MIG mode and layout, fractional shares,
// health), intra-node links, labels, pool and network path; and allocations applied to it.
// ClusterState is owned by one thread (the scheduler loop); it is not thread-safe.
// Invariants (check_invariants): nothing is over-allocated; a GPU is either whole-held, shared, or in
// MIG mode; shares never exceed 1000 milli or the GPU's memory; MIG intervals never overlap;
// derived per-node counters equal what the GPUs say.
#pragma once

#include "core/generation.h"

#include <array>
#include <map>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/ids.h"
#include "core/mig.h"
#include "core/pool.h"
#include "core/quantity.h"
#include "core/request.h"
#include "core/status.h"
#include "core/topology.h"

namespace tessera {

// kReconfiguring: out of service while its MIG mode or layout changes (set_mig_layout; the caller sets it
// back to kHealthy when the change is ready). Like kUnhealthy, nothing is placed on it and it is not capacity.
enum class GpuHealth : uint8_t { kHealthy, kUnhealthy, kReconfiguring };

struct Gpu {
  uint16_t index = 0;
  const GpuModel* model = nullptr;
  GpuHealth health = GpuHealth::kHealthy;
  bool mig_enabled = false;
  MigLayout mig;              // meaningful when mig_enabled
  bool whole_held = false;    // held whole by one task
  MilliGpu shared_milli{0};   // sum of fractional shares on it
  MiB shared_memory{0};       // sum of GPU memory promised to shares
  uint16_t share_count = 0;

  // Milli-GPU still free for whole or shared use (0 if MIG, whole-held or unhealthy).
  int64_t free_milli() const {
    if (mig_enabled || whole_held || health != GpuHealth::kHealthy) return 0;
    return 1000 - shared_milli.v;
  }
  bool idle() const { return free_milli() == 1000; }
  MiB free_memory() const { return model ? model->memory - shared_memory : MiB{0}; }
};

// Classes of GPU tasks on a node (GpuClustering's affinity tags): 0 = shares, k = k whole GPUs
// (1..8), 9 = more than 8 GPUs or MIG.
inline constexpr int kTaskClasses = 10;
int task_class(const TaskRequest& r);

struct Node {
  NodeId id;
  std::string name;
  MilliCpu cpu_capacity{0};
  MiB memory_capacity{0};
  MilliCpu cpu_used{0};
  MiB memory_used{0};
  std::vector<Gpu> gpus;
  std::shared_ptr<const NodeTopology> topology;  // may be null for nodes without GPUs
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by key
  PoolId pool;                 // always valid: the built-in "default" pool unless the spec names one
  PoolKind pool_kind = PoolKind::kOwned;  // the pool's kind (copied from the cluster's pool table)
  std::vector<uint32_t> path;  // domain id per network level, outermost first
  bool schedulable = true;

  // Derived, maintained by ClusterState.
  uint64_t generation = 0;    // changes whenever anything above changes; scores may be cached by it
  int idle_gpus = 0;          // healthy, non-MIG, fully free
  int64_t free_gpu_milli = 0; // sum of free_milli() over GPUs
  std::array<uint16_t, kTaskClasses> task_classes{};  // GPU tasks on the node by class

  MilliCpu cpu_free() const { return cpu_capacity - cpu_used; }
  MiB memory_free() const { return memory_capacity - memory_used; }
  const GpuModel* gpu_model() const { return gpus.empty() ? nullptr : gpus.front().model; }
  const std::string* label(const std::string& key) const;
};

// A MIG instance's GPU share for accounting: its compute slices over the model's, in milli-GPU.
int64_t mig_milli(const GpuModel& model, int profile_id);

// How a node is declared.
struct NodeSpec {
  std::string name;
  MilliCpu cpu{0};
  MiB memory{0};
  std::string gpu_model;  // catalog name or alias; empty when gpu_count == 0
  int gpu_count = 0;
  std::vector<int> mig_gpus;  // indices of GPUs in MIG mode (empty layout)
  std::shared_ptr<const NodeTopology> topology;  // default: NVSwitch for NVLink models, else PCIe
  std::vector<std::pair<std::string, std::string>> labels;
  PoolId pool;  // invalid = the built-in "default" pool (id 0)
  std::vector<std::string> path;  // one domain name per network level, outermost first
};

// One GPU given to a task.
enum class GrantKind : uint8_t { kWhole, kShare, kMig };
struct GpuGrant {
  uint16_t gpu = 0;
  GrantKind kind = GrantKind::kWhole;
  MilliGpu milli{0};    // kShare: the share; kMig: the instance's compute fraction (mig_milli)
  MiB memory{0};        // kShare
  int mig_profile = -1; // kMig: GI profile id
  uint8_t mig_start = 0;
  bool mig_create = false;  // kMig: the instance must be created (a MIG layout change)
  uint8_t mig_destroy = 0;  // kMig: start slices of idle instances destroyed first (reconfiguration)
  // Milli-GPU it holds: 1000 for a whole GPU, else its share or the instance's compute fraction.
  int64_t milli_held() const { return kind == GrantKind::kWhole ? 1000 : milli.v; }
  bool operator==(const GpuGrant&) const = default;
};

// Where one task goes and what it holds there.
struct TaskPlacement {
  NodeId node;
  MilliCpu cpu{0};
  MiB memory{0};
  int task_class = 0;
  std::vector<GpuGrant> gpus;
  bool operator==(const TaskPlacement&) const = default;
};

// Milli-GPU held by a task's placement (the sum of GpuGrant::milli_held()), and by a job's.
inline int64_t milli_held(const TaskPlacement& p) {
  int64_t m = 0;
  for (const GpuGrant& g : p.gpus) m += g.milli_held();
  return m;
}
inline int64_t milli_held(const std::vector<TaskPlacement>& ps) {
  int64_t m = 0;
  for (const TaskPlacement& p : ps) m += milli_held(p);
  return m;
}

class ClusterState {
 public:
  explicit ClusterState(const GpuCatalog& catalog = GpuCatalog::builtin(), NetworkLevels levels = {});

  const GpuCatalog& catalog() const { return *catalog_; }
  const NetworkLevels& network() const { return levels_; }
  Result<NodeId> add_node(NodeSpec spec);
  size_t node_count() const { return nodes_.size(); }
  const Node& node(NodeId id) const { return nodes_[id.value]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  Result<NodeId> find_node(const std::string& name) const;

  // Pools (core/pool.h). Pool 0 is always the built-in "default" (owned); add_pool may redefine it
  // (same name) while no node exists yet. Ids are dense in declaration order.
  Result<PoolId> add_pool(Pool pool);
  const std::vector<Pool>& pools() const { return pools_; }
  const Pool& pool(PoolId id) const { return pools_[id.value]; }
  Result<PoolId> find_pool(const std::string& name) const;

  // Checks that `p` can be applied now; the error says which resource is short.
  Status can_apply(const TaskPlacement& p) const;
  // Applies all or nothing.
  Status apply(const TaskPlacement& p);
  Status apply_all(const std::vector<TaskPlacement>& ps);  // all or nothing
  // Gives back what `p` holds. A MIG instance created for it stays (idle) in the layout.
  Status release(const TaskPlacement& p);
  Status release_all(const std::vector<TaskPlacement>& ps);  // all or nothing
  // The layouts, as they are now, of the GPUs on which `ps` create or destroy MIG instances (none in
  // the common case). Taken before apply_all(ps), they let undo_all(ps, before) put the cluster back
  // exactly: release_all alone leaves the instances ps created behind, idle, and those they
  // destroyed gone, a layout no agent was ever asked for.
  using MigLayouts = std::vector<std::pair<GpuRef, MigLayout>>;
  MigLayouts mig_layouts_changed_by(const std::vector<TaskPlacement>& ps) const;
  Status undo_all(const std::vector<TaskPlacement>& ps, const MigLayouts& before);  // all or nothing
  Status set_health(GpuRef gpu, GpuHealth h);
  Status set_schedulable(NodeId node, bool schedulable);
  // Destroys an idle MIG instance (reconfiguration).
  Status destroy_mig_instance(GpuRef gpu, int start);
  // Dynamic MIG: sets an idle GPU's mode and layout (the agent destroys the old instances and creates
  // `layout`, idle, at its explicit starts). enable_mig false turns it back to a whole GPU (layout must
  // be empty). Fails, changing nothing, if the GPU holds anything (held whole, shared, a MIG instance
  // in use), the model does not support MIG, or the layout breaks the catalog's placement rules.
  // Health is left as it is (the caller marks the GPU kReconfiguring until the change is ready).
  Status set_mig_layout(GpuRef gpu, bool enable_mig, const std::vector<MigInstance>& layout);

  Status check_invariants() const;
  int64_t total_gpus() const { return total_gpus_; }
  int64_t allocated_gpu_milli() const { return allocated_milli_; }

  // Node-level primitives shared with scratch views: check/apply/undo a placement on one node.
  static Status check_on(const Node& n, const TaskPlacement& p);
  static void apply_on(Node& n, const TaskPlacement& p);
  static void release_on(Node& n, const TaskPlacement& p);
  static void refresh_derived(Node& n);
  // Generations are unique in the process, across every ClusterState and its copies (a process-wide
  // counter): a number names one state of one node, so caches keyed by it stay right when a cluster
  // is assigned from an older copy and changes from there.
  uint64_t next_generation() { return generation_counter_ = fresh_generation(); }
  // The newest Node::generation this cluster handed out: changes whenever any node changes, so an
  // answer computed from the whole cluster may be cached by it (equal means the same state).
  uint64_t generation() const { return generation_counter_; }

  // Candidate index for large clusters: schedulable nodes grouped by how much GPU they can still
  // give, so that the engine can visit the tightest candidates first.
  // by_idle(k): nodes with exactly k idle GPUs (k = 0..16).
  // by_max_share(b): nodes whose largest free non-idle GPU share is in [10b, 10b+9] milli (b = 0..99);
  // b = 100: nodes that have an idle GPU.
  const std::set<uint32_t>& by_idle(int k) const { return by_idle_[k]; }
  const std::set<uint32_t>& by_max_share(int b) const { return by_max_share_[b]; }
  // MIG: profiles are indexed by shape (compute slices, memory slices), the same across models.
  static int mig_shape(const MigProfile& p) { return p.compute_slices * 9 + p.memory_slices; }
  // mig_creatable(shape, k): schedulable nodes where a profile of that shape can be created on some
  // healthy MIG GPU, and k = the fewest unoccupied memory slices among such GPUs (0..8).
  const std::set<uint32_t>& mig_creatable(int shape, int k) const { return mig_creatable_[shape][k]; }
  // mig_idle(shape): schedulable nodes holding an idle (created, unused) instance of that shape.
  const std::set<uint32_t>& mig_idle(int shape) const { return mig_idle_[shape]; }
  // Changes whenever what the cluster could hold when empty changes (nodes added, health, MIG mode):
  // "can this ever fit" answers may be cached by it. Schedulability is not part of it: a node that
  // takes no work now is counted as if it did (cordons come and go; the scheduler blocks reserved
  // nodes for a trial many times a cycle).
  uint64_t capacity_generation() const { return capacity_generation_; }

 private:
  // Does `step` for every task of ps in order; if one fails, undoes the ones done (newest first) with
  // `undo` and returns that failure: apply_all and release_all.
  Status each_or_none(const std::vector<TaskPlacement>& ps, Status (ClusterState::*step)(const TaskPlacement&),
                      Status (ClusterState::*undo)(const TaskPlacement&));
  void reindex(Node& n, bool remove_old);
  void restore_mig(const MigLayouts& before);

  const GpuCatalog* catalog_;
  NetworkLevels levels_;
  std::vector<Node> nodes_;
  std::vector<Pool> pools_{default_pool()};
  std::map<std::string, NodeId, std::less<>> by_name_;
  int64_t total_gpus_ = 0;
  int64_t allocated_milli_ = 0;
  uint64_t generation_counter_ = 0;
  std::array<std::set<uint32_t>, 17> by_idle_;
  std::array<std::set<uint32_t>, 101> by_max_share_;
  static constexpr int kMigShapes = 81;
  std::array<std::array<std::set<uint32_t>, 9>, kMigShapes> mig_creatable_;
  std::array<std::set<uint32_t>, kMigShapes> mig_idle_;
  // per node: the (shape, k) creatable keys and idle shapes it is filed under
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> mig_keys_;
  std::vector<std::vector<uint8_t>> mig_idle_keys_;
  uint64_t capacity_generation_ = 0;
  std::vector<std::pair<int8_t, int8_t>> index_keys_;  // per node: (idle bucket, share bucket), -1 = none
};

}  // namespace tessera
