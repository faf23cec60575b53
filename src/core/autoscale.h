// Autoscaling of elastic pools (on-demand and spot): from the demand the scheduler could not place,
// the teams' guarantees and a budget cap, decide how many nodes to add to which pool and which idle
// nodes to give back; and the Provider interface a plan is carried out through. The simulator's
// provider is sim/sim_provider.h; what real clouds would call is on paper in docs/providers.md.
// Pure value types and functions, no I/O; Provider implementations own their own state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/ids.h"
#include "core/pool.h"
#include "core/request.h"
#include "core/status.h"

namespace tessera {

struct AutoscaleConfig {
  bool enabled = false;
  int64_t scale_down_idle_s = 600;  // give back an elastic node idle this long
  // Cap on what the elastic pools may cost per hour together (micro-units); nullopt = no cap.
  std::optional<int64_t> budget_micro_per_hour;
  // Consolidation: an elastic node whose jobs hold at most this share of its GPUs (percent; 0 = off)
  // and could all run elsewhere on capacity that costs no more is emptied (its jobs checkpoint and
  // move) so that it can go back. Only jobs that checkpoint, run on that node alone and have run at
  // least consolidate_min_runtime_s are moved.
  int consolidate_below_pct = 50;
  int64_t consolidate_min_runtime_s = 3600;
};

// One elastic pool as the planner sees it.
struct ElasticPool {
  PoolId pool;
  std::string name;
  PoolKind kind = PoolKind::kOnDemand;
  std::string gpu_model;            // model of its nodes
  int gpus_per_node = 0;            // > 0
  int64_t price_micro_per_gpu_hour = 0;
  int min_nodes = 0;
  int max_nodes = 0;                // nodes it may have at most (> 0)
  int running = 0;                  // provisioned and ready
  int provisioning = 0;             // asked for, not ready yet
};

// One gang the scheduler could not place for lack of room (PendingInfo::short_of_room).
struct DemandItem {
  JobId job;
  int tasks = 1;
  int gpus_per_task = 1;               // whole GPUs; a share or a MIG instance counts as 1
  std::vector<std::string> gpu_models; // allowed models; empty = any
  PoolKindMask pool_kinds = kAnyPoolKind;
  bool prefer_spot = false, avoid_spot = false;
  bool within_guarantee = false;       // its queue is below its guarantee: served first
  int priority = 0;
  int64_t submitted = 0;
};

struct IdleNode {
  NodeId node;
  PoolId pool;
  int64_t idle_since = 0;  // nothing allocated on it since
};

struct AutoscaleInput {
  int64_t now = 0;
  std::vector<ElasticPool> pools;
  std::vector<DemandItem> demand;
  std::vector<IdleNode> idle;  // idle ready nodes of elastic pools
  AutoscaleConfig config;
};

struct ScaleUp {
  PoolId pool;
  int nodes = 0;
  std::string reason;
};
struct ScaleDown {
  NodeId node;
  PoolId pool;
  std::string reason;
};
struct AutoscalePlan {
  std::vector<ScaleUp> up;        // in pool id order
  std::vector<ScaleDown> down;    // in (idle_since, node) order
  // Demand no pool can take (pool bounds, budget, no pool of a kind it may use): job and why.
  std::vector<std::pair<JobId, std::string>> held;
};

// Demand is served in order (within guarantee first, then priority, submission, job id); each item
// goes to the first pool it may use in the order spot first when it prefers spot, non-spot first when
// it avoids spot, then cheapest, then pool id. Capacity already on the way is claimed before new
// nodes are asked for. A pool never exceeds max_nodes; the total elastic price per hour never exceeds
// the budget. Idle nodes go back after scale_down_idle_s, down to min_nodes, except in a pool that is
// growing this round. Disabled config: an empty plan.
AutoscalePlan plan_autoscaling(const AutoscaleInput& in);

// A running job as consolidation sees it.
struct MovableJob {
  JobId job;
  Gang gang;                             // pool rules applied (task.pool_kinds, prefer/avoid spot)
  std::vector<TaskPlacement> placement;  // where it runs now
  bool checkpointable = false;
  int64_t started = 0;                   // its current run began
};
struct Consolidation {
  NodeId node;
  std::vector<JobId> jobs;  // to checkpoint and move, in id order
  std::string reason;
};
// Some of the node's GPUs are in use, but at most below_pct percent of them.
bool under_used(const Node& n, int below_pct);

// At most one elastic node to empty this round: among `elastic` nodes (up and schedulable) used at
// most consolidate_below_pct, the least used (then lowest id) whose jobs all fit elsewhere, placed
// one by one (job id order) on a scratch copy of the cluster without that node, on pools that cost
// no more (never from spot to on-demand). nullopt when none qualifies or consolidation is off.
std::optional<Consolidation> plan_consolidation(const ClusterState& cluster, const std::vector<NodeId>& elastic,
                                                const std::vector<MovableJob>& running, const AutoscaleConfig& config,
                                                int64_t now);

// What a provider reports (ProviderEvent::kind).
enum class ProviderEventKind : uint8_t {
  kNodeReady,           // a requested node is up and may be scheduled on
  kInterruptionNotice,  // a spot node will be reclaimed at reclaim_at (the notice period)
  kNodeReclaimed,       // a spot node is gone (it may be asked for again later)
  kRequestFailed,       // the provider could not supply a requested node (reason)
};
struct ProviderEvent {
  ProviderEventKind kind = ProviderEventKind::kNodeReady;
  int64_t t = 0;
  NodeId node;
  PoolId pool;
  int64_t reclaim_at = 0;  // kInterruptionNotice
  std::string reason;
};

// Where elastic nodes come from. A node is one of the cluster's declared node slots of the pool
// (ids stay stable); the provider brings slots up and takes them down. Not thread-safe.
class Provider {
 public:
  virtual ~Provider() = default;
  // Asks for `count` more nodes of `pool`; each becomes ready after the pool's provisioning delay
  // (kNodeReady) or fails (kRequestFailed). Error when the pool is unknown or not elastic.
  virtual Status request_nodes(PoolId pool, int count, int64_t now) = 0;
  // Gives a ready node back; billing stops now. Error when the node is not up.
  virtual Status release_node(NodeId node, int64_t now) = 0;
  // Events up to and including `now`, in (time, node) order.
  virtual std::vector<ProviderEvent> poll(int64_t now) = 0;
  // When the next event is due (a simulated clock advances to it); nullopt when none is scheduled.
  virtual std::optional<int64_t> next_event_time() const = 0;
};

}  // namespace tessera
