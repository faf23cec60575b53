// Capacity pools: where a node's GPUs come from (owned, reserved, on-demand, spot), what a GPU-hour
// there costs, and the placement rules that keep jobs off pools they must not use (docs/server.md).
// Value types and pure functions; no floating point (prices in micro-units, rates per million).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/ids.h"
#include "core/status.h"

namespace tessera {

enum class PoolKind : uint8_t { kOwned, kReserved, kOnDemand, kSpot };
inline constexpr int kPoolKinds = 4;
const char* pool_kind_name(PoolKind k);  // "owned", "reserved", "on-demand", "spot"
Result<PoolKind> parse_pool_kind(std::string_view s);

// A set of pool kinds, one bit per kind.
using PoolKindMask = uint8_t;
inline constexpr PoolKindMask pool_kind_bit(PoolKind k) { return PoolKindMask(1u << unsigned(k)); }
inline constexpr PoolKindMask kAnyPoolKind = 0x0f;
inline constexpr PoolKindMask kNoSpot = kAnyPoolKind & ~pool_kind_bit(PoolKind::kSpot);
// "owned/reserved" (kinds in enum order, joined by '/').
std::string pool_kinds_text(PoolKindMask m);

struct Pool {
  PoolId id;
  std::string name;
  PoolKind kind = PoolKind::kOwned;
  // Price of one GPU-hour in micro-units of the chargeback currency; nullopt = not priced here (the
  // per-model chargeback rate applies).
  std::optional<int64_t> price_micro_per_gpu_hour;
  int min_nodes = 0;             // capacity bounds (elastic pools; autoscaling uses them later)
  int max_nodes = 0;             // 0 = no bound
  int64_t provisioning_delay_s = 0;
  // Spot only: expected interruptions per node-hour, in millionths (0.05/h -> 50000), and the notice
  // the provider gives before a reclaim (AWS 120 s, GCP and Azure 30 s).
  int64_t interruptions_per_million_hours = 0;
  int64_t notice_s = 0;
  // Spot only: share of the pool's running nodes one reclaim takes at once, in percent (0 = nodes
  // are reclaimed one by one; 100 = the whole zone goes together). The per-node rate stays
  // interruptions_per_million_hours either way.
  int correlated_pct = 0;
  // Spot only: a recorded interruption trace to replay instead of the rate (the simulator reads it;
  // docs/simulator.md has the format). Empty = use the rate.
  std::string interruption_trace;
};

// Mean seconds between interruptions of one node of a spot pool; 0 when the pool is not interrupted.
int64_t mean_seconds_between_interruptions(const Pool& p);

// Checkpoint interval for a job on `nodes` nodes of pool p, from Young's rule T = sqrt(2 C M) with C
// the job's checkpoint cost (save_cost_s) and M the pool's mean time between interruptions of any of
// its nodes (per-node mean / nodes). Returns `fallback` when p is not an interrupted spot pool or
// save_cost_s <= 0, and never more than `fallback` when fallback > 0 (the job's own interval wins
// when it is shorter).
int64_t spot_checkpoint_interval(const Pool& p, int64_t save_cost_s, int nodes, int64_t fallback);

// The built-in pool every node belongs to unless it names another: "default", owned, unpriced.
Pool default_pool();

// Per-job spot preference (job spec `spot:`).
enum class SpotPolicy : uint8_t { kNever, kAllowed, kPreferred };
const char* spot_policy_name(SpotPolicy s);
Result<SpotPolicy> parse_spot_policy(std::string_view s);

// Cluster-wide placement rules (`pool_rules:` in the cluster config).
struct PoolRules {
  // Latency-sensitive inference (JobKind::kInference) runs only on pools of these kinds.
  PoolKindMask inference_kinds = pool_kind_bit(PoolKind::kOwned) | pool_kind_bit(PoolKind::kReserved);
  // A job interrupted on spot this many times prefers non-spot nodes from then on (Gang::avoid_spot);
  // 0 = never.
  int spot_max_interruptions = 3;
  // On-demand as the fallback: a job that may use spot (and does not avoid it) is kept off on-demand
  // pools until it has waited this long since it became pending (submitted or last stopped), so that
  // it takes spot capacity when the autoscaler brings it. -1 = off (on-demand any time).
  int64_t on_demand_fallback_after_s = -1;
};

}  // namespace tessera
