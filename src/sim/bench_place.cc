#include "sim/bench_place.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <vector>

#include "core/cluster.h"
#include "core/placement/engine.h"
#include "core/rng.h"

namespace tessera::sim {
namespace {

struct Kind {
  const char* name;
  int weight;  // per 1000 requests
  int tasks;
  TaskRequest task;
};

std::vector<Kind> request_mix() {
  auto req = [](int gpus, int64_t milli, std::string mig, int64_t cpu, int64_t mem) {
    TaskRequest t;
    t.cpu = MilliCpu(cpu);
    t.memory = MiB(mem);
    t.gpu_count = gpus;
    t.milli_per_gpu = MilliGpu(milli);
    t.mig_profile = std::move(mig);
    return t;
  };
  return {
      {"share", 300, 1, req(1, 250, "", 4000, 16384)},
      {"mig", 150, 1, req(0, 1000, "2g", 4000, 16384)},
      {"gpu1", 300, 1, req(1, 1000, "", 8000, 65536)},
      {"gpu2", 100, 1, req(2, 1000, "", 16000, 131072)},
      {"gpu4", 80, 1, req(4, 1000, "", 32000, 262144)},
      {"gang8", 60, 1, req(8, 1000, "", 64000, 524288)},
      {"gang4x8", 10, 4, req(8, 1000, "", 64000, 524288)},
  };
}

LatencyStats stats(std::vector<double>& us, int64_t placed) {
  LatencyStats s;
  s.count = int64_t(us.size());
  s.placed = placed;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[std::min(us.size() - 1, size_t(p * double(us.size() - 1) + 0.5))]; };
  s.p50_us = pct(0.50);
  s.p99_us = pct(0.99);
  s.max_us = us.back();
  double sum = 0;
  for (double v : us) sum += v;
  s.mean_us = sum / double(us.size());
  return s;
}

}  // namespace

Result<ClusterState> make_bench_cluster(int nodes, int gpus_per_node, int nodes_per_leaf, int leaves_per_spine,
                                        bool with_mig) {
  ClusterState cluster(GpuCatalog::builtin(), NetworkLevels({"spine", "leaf"}));
  for (int i = 0; i < nodes; ++i) {
    NodeSpec s;
    s.name = "node-" + std::to_string(i);
    s.cpu = MilliCpu(int64_t(gpus_per_node) * 16000);
    s.memory = MiB(int64_t(gpus_per_node) * 131072);
    s.gpu_model = i % 2 ? "A100-80GB" : "H100-80GB-SXM";
    s.gpu_count = gpus_per_node;
    if (with_mig && (i % 8 == 3 || i % 8 == 6))  // a quarter of the GPUs: two nodes in eight, all-MIG
      for (int g = 0; g < gpus_per_node; ++g) s.mig_gpus.push_back(g);
    const int leaf = i / nodes_per_leaf;
    s.path = {"spine-" + std::to_string(leaf / leaves_per_spine), "leaf-" + std::to_string(leaf)};
    if (auto r = cluster.add_node(std::move(s)); !r.ok()) return r.error();
  }
  return cluster;
}

Result<BenchPlaceResult> run_bench_place(const BenchPlaceOptions& o,
                                         const std::function<void(int64_t, int64_t)>& progress) {
  if (o.nodes < 1) return invalid_argument("--nodes: must be >= 1");
  if (o.gpus_per_node < 1 || o.gpus_per_node > 16) return invalid_argument("--gpus-per-node: must be in 1..16");
  if (o.requests < 1) return invalid_argument("--requests: must be >= 1");
  if (o.score_nodes < 0) return invalid_argument("--score-nodes: must be >= 0 (0 = every node)");
  auto policy = make_policy(o.policy);
  if (!policy.ok()) return invalid_argument("--policy: " + policy.error().message);

  auto built = make_bench_cluster(o.nodes, o.gpus_per_node, o.nodes_per_leaf, o.leaves_per_spine, true);
  if (!built.ok()) return built.error();
  ClusterState& cluster = *built;

  const std::vector<Kind> kinds = request_mix();
  if (o.profile) {
    WorkloadProfile prof;
    for (const Kind& k : kinds) prof.shapes.push_back({k.task, int64_t(k.weight) * k.tasks});
    prof.nodes = node_kinds(cluster);  // as sim alloc prepares it: node kinds too (Scarcity, Reserve)
    (*policy)->prepare(prof);
  }
  EngineOptions eo;
  eo.seed = o.seed;
  eo.max_scored_nodes = o.score_nodes;
  PlacementEngine engine(**policy, eo);
  Rng rng(o.seed);
  int total_weight = 0;
  for (const Kind& k : kinds) total_weight += k.weight;

  std::map<std::string, std::vector<double>> lat;
  std::map<std::string, int64_t> placed;
  std::deque<std::vector<TaskPlacement>> live;
  const int64_t target_milli = cluster.total_gpus() * 1000 * 3 / 4;
  double seconds = 0, single_seconds = 0;
  int64_t single = 0;
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < o.requests; ++i) {
    // Departures keep the cluster near 75% of its GPUs allocated: release the oldest jobs.
    while (cluster.allocated_gpu_milli() > target_milli && !live.empty()) {
      const size_t k = rng.uniform(std::min<size_t>(live.size(), 64));
      for (const TaskPlacement& p : live[k]) {
        Status s = cluster.release(p);
        if (!s.ok()) return Error{ErrorCode::kInternal, "bench: release failed: " + s.message()};
      }
      live.erase(live.begin() + long(k));
    }
    int pick = int(rng.uniform(uint64_t(total_weight)));
    const Kind* kind = &kinds.back();
    for (const Kind& k : kinds) {
      if (pick < k.weight) {
        kind = &k;
        break;
      }
      pick -= k.weight;
    }
    Gang g;
    g.id = JobId(uint32_t(i));
    g.tasks = kind->tasks;
    g.task = kind->task;
    if (kind->tasks > 1) g.topology = {TopologyMode::kPreferred, "leaf"};
    const auto t0 = clock::now();
    PlacementResult r = engine.place_and_commit(cluster, g);
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    seconds += us / 1e6;
    if (kind->tasks == 1) {
      single_seconds += us / 1e6;
      ++single;
    }
    lat[kind->name].push_back(us);
    if (r.outcome == Outcome::kPlaced) {
      ++placed[kind->name];
      live.push_back(std::move(r.tasks));
    }
    if (progress && (i + 1) % 10000 == 0) progress(i + 1, o.requests);
  }
  if (Status s = cluster.check_invariants(); !s.ok())
    return Error{ErrorCode::kInternal, "bench: invariant broken: " + s.message()};

  BenchPlaceResult res;
  res.nodes = o.nodes;
  res.gpus = cluster.total_gpus();
  res.seconds = seconds;
  res.placements_per_s = single_seconds > 0 ? double(single) / single_seconds : 0;
  res.final_gpu_allocated_pct = 100.0 * double(cluster.allocated_gpu_milli()) / double(cluster.total_gpus() * 1000);
  for (auto& [name, v] : lat) res.by_kind[name] = stats(v, placed[name]);
  return res;
}

}  // namespace tessera::sim
