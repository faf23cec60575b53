// The simulated cloud behind `tessera sim run` (core/autoscale.h's Provider): nodes of on-demand and
// spot pools are slots that come up a provisioning delay after they are asked for and are billed from
// the request until they are given back or reclaimed; spot pools are interrupted by a Poisson process
// at the pool's rate per node-hour (correlated_pct of the running nodes at once), or by a replayed
// trace, each reclaim announced notice_s ahead. Owned and reserved nodes are always up. Deterministic
// for a seed. Single-threaded; owned by the simulation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/autoscale.h"
#include "core/cluster.h"
#include "core/rng.h"

namespace tessera::sim {

// An interruption trace line: at `t` (seconds from the workload's start), `nodes` running nodes of
// the pool are reclaimed (after the notice). File format: CSV "time_s,nodes" with that header.
struct TraceReclaim {
  int64_t t = 0;
  int nodes = 0;
};
Result<std::vector<TraceReclaim>> load_interruption_trace(const std::string& path);

class SimProvider : public Provider {
 public:
  // elastic: nodes of on-demand and spot pools start down except each pool's min_nodes (up and
  // billed from `start`); otherwise every node starts up. Spot pools are interrupted either way.
  static Result<std::unique_ptr<SimProvider>> create(const ClusterState& cluster, bool elastic, uint64_t seed, int64_t start);

  Status request_nodes(PoolId pool, int count, int64_t now) override;
  Status release_node(NodeId node, int64_t now) override;
  std::vector<ProviderEvent> poll(int64_t now) override;
  std::optional<int64_t> next_event_time() const override;

  bool up(NodeId n) const { return slots_[n.value].state == State::kUp || slots_[n.value].state == State::kNotice; }
  bool elastic(NodeId n) const { return slots_[n.value].elastic; }
  // Nodes of the pool that are up (or under notice) / being provisioned.
  int running(PoolId p) const { return count(p, State::kUp) + count(p, State::kNotice); }
  int provisioning(PoolId p) const { return count(p, State::kProvisioning); }
  // GPU-seconds billed so far in the pool (elastic pools: request to release; others: since start).
  int64_t billed_gpu_seconds(PoolId p, int64_t now) const;
  int64_t reclaims() const { return reclaims_; }

 private:
  enum class State : uint8_t { kDown, kProvisioning, kUp, kNotice };
  struct Slot {
    NodeId node;
    PoolId pool;
    int gpus = 0;
    bool elastic = false;
    State state = State::kDown;
    int64_t billed_since = -1;  // -1 = not billed now
  };
  struct PoolState {
    Pool def;
    double per_node_rate_s = 0;          // interruptions per node-second
    std::optional<int64_t> next_reclaim; // next interruption of the rate process
    std::vector<TraceReclaim> trace;     // replayed instead of the rate when non-empty
    size_t trace_next = 0;
    int64_t billed_done = 0;             // GPU-seconds of finished billing periods
    int in_state[4] = {0, 0, 0, 0};      // slots per State (kept by set_state)
  };
  SimProvider(const ClusterState& c, uint64_t seed) : cluster_(&c), rng_(seed) {}
  void set_state(Slot& s, State st, int64_t now);
  int count(PoolId p, State st) const { return pools_[p.value].in_state[int(st)]; }
  void resample(PoolId p, int64_t now);  // next rate-process interruption from now
  void interrupt(PoolId p, int count, int64_t now);
  double unit() { return (double(rng_.uniform(1u << 30)) + 0.5) / double(1u << 30); }

  const ClusterState* cluster_;
  Rng rng_;
  int64_t start_ = 0;
  std::vector<Slot> slots_;             // by node id
  std::vector<PoolState> pools_;        // by pool id
  std::multimap<std::pair<int64_t, uint32_t>, ProviderEvent> queued_;  // (t, node) -> event
  int64_t reclaims_ = 0;
};

}  // namespace tessera::sim
