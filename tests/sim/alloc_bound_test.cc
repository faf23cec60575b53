// The allocation bound (sim/alloc_bound.h): on hand-made instances whose optimum is known, on random
// small instances against an exhaustive search, and against every policy on the same arrivals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/rng.h"
#include "sim/alloc_bound.h"
#include "sim/alloc_experiment.h"

namespace tessera::sim {
namespace {

#define SKIP_WITHOUT_SOLVER()                                                      \
  if (!lp_available()) {                                                           \
    GTEST_SKIP() << "no LP solver in this build (" << lp_solver_name() << ")"; \
  }

ClusterState cluster_of(const std::vector<NodeSpec>& nodes) {
  ClusterState c;
  for (const NodeSpec& n : nodes) EXPECT_TRUE(c.add_node(n).ok());
  return c;
}

NodeSpec node(const std::string& name, int gpus, int64_t cpu, int64_t mem = 1 << 20, const std::string& model = "T4") {
  NodeSpec s;
  s.name = name;
  s.cpu = MilliCpu(cpu);
  s.memory = MiB(mem);
  s.gpu_model = model;
  s.gpu_count = gpus;
  return s;
}

TaskRequest pod(int gpus, int64_t milli, int64_t cpu, int64_t mem = 1024) {
  TaskRequest t;
  t.cpu = MilliCpu(cpu);
  t.memory = MiB(mem);
  t.gpu_count = gpus;
  t.milli_per_gpu = MilliGpu(milli);
  return t;
}

// The bound when every pod has arrived.
int64_t bound_of(const ClusterState& c, const std::vector<TaskRequest>& pods) {
  auto b = AllocBound::build(c, pods);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  if (!b.ok()) return -1;
  std::vector<int64_t> count(size_t((*b)->pod_types()), 0);
  for (size_t i = 0; i < pods.size(); ++i)
    if ((*b)->type_of(i) >= 0) ++count[size_t((*b)->type_of(i))];
  auto r = (*b)->solve(count);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

TEST(AllocBound, HandMadeInstancesWithKnownOptima) {
  SKIP_WITHOUT_SOLVER();
  // Ten 1-GPU pods on one 8-GPU node: 8 fit.
  EXPECT_EQ(bound_of(cluster_of({node("a", 8, 96000)}), std::vector<TaskRequest>(10, pod(1, 1000, 1000))), 8000);
  // Three 0.6-GPU shares on two GPUs: two GPUs hold one each (the plain relaxation says 1.8 GPUs).
  EXPECT_EQ(bound_of(cluster_of({node("a", 2, 96000)}), std::vector<TaskRequest>(3, pod(1, 600, 1000))), 1200);
  // CPU runs out first: 12 cores each, 32 on the node: 2 of 8 GPUs (the relaxation says 2.67).
  EXPECT_EQ(bound_of(cluster_of({node("a", 8, 32000)}), std::vector<TaskRequest>(8, pod(1, 1000, 12000))), 2000);
  // Memory likewise: 3 pods of 40 GiB in 100 GiB.
  EXPECT_EQ(bound_of(cluster_of({node("a", 8, 96000, 100 * 1024)}), std::vector<TaskRequest>(8, pod(1, 1000, 1000, 40 * 1024))), 2000);
  // Two 3-GPU pods on a 4-GPU node: one fits.
  EXPECT_EQ(bound_of(cluster_of({node("a", 4, 96000)}), std::vector<TaskRequest>(2, pod(3, 1000, 1000))), 3000);
  // A pod that names a model the cluster lacks; a CPU-only pod counts nothing.
  TaskRequest v100 = pod(1, 1000, 1000);
  v100.gpu_models = {"V100-16GB"};
  EXPECT_EQ(bound_of(cluster_of({node("a", 8, 96000)}), {v100, pod(0, 1000, 8000)}), 0);
  // A share big in compute and one big in GPU memory fit one GPU together (T4: 16 GiB).
  TaskRequest compute = pod(1, 600, 1000), memory = pod(1, 100, 1000);
  compute.gpu_memory = MiB(1024);
  memory.gpu_memory = MiB(10 * 1024);
  EXPECT_EQ(bound_of(cluster_of({node("a", 1, 96000)}), {compute, memory}), 700);
  // Two big in memory do not.
  EXPECT_EQ(bound_of(cluster_of({node("a", 1, 96000)}), {memory, memory}), 100);
  // Nothing arrived.
  EXPECT_EQ(bound_of(cluster_of({node("a", 8, 96000)}), {}), 0);
}

TEST(AllocBound, RefusesWhatItDoesNotModel) {
  TaskRequest m = pod(0, 1000, 1000);
  m.mig_profile = "1g.10gb";
  auto b = AllocBound::build(cluster_of({node("a", 8, 96000)}), {m});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("MIG"), std::string::npos) << b.error().message;
  ClusterState used = cluster_of({node("a", 8, 96000)});
  TaskRequest one = pod(1, 1000, 1000);
  GpuPick p;
  ASSERT_TRUE(pick_default(used.node(NodeId(0)), one, p));
  ASSERT_TRUE(used.apply(make_placement(used.node(NodeId(0)), one, p)).ok());
  auto u = AllocBound::build(used, {one});
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message.find("empty cluster"), std::string::npos) << u.error().message;
  SKIP_WITHOUT_SOLVER();
  auto ok = AllocBound::build(cluster_of({node("a", 8, 96000)}), {one});
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE((*ok)->solve({1, 2}).ok()) << "one count per pod type";
}

// The most GPU milli any packing of a subset of `pods` holds: every pod is left out or put on a
// node and, for shares, on one GPU of it (whole-GPU pods take idle GPUs, which are alike).
struct Exhaustive {
  struct N {
    int64_t cpu, mem;
    std::vector<int64_t> gpu;  // free milli per GPU
  };
  std::vector<N> nodes;
  std::vector<TaskRequest> pods;
  int64_t best = 0;
  void go(size_t i, int64_t held) {
    best = std::max(best, held);
    if (i == pods.size()) return;
    go(i + 1, held);  // left out
    const TaskRequest& t = pods[i];
    for (N& n : nodes) {
      if (n.cpu < t.cpu.v || n.mem < t.memory.v) continue;
      n.cpu -= t.cpu.v, n.mem -= t.memory.v;
      if (t.whole_gpus()) {
        std::vector<size_t> idle;
        for (size_t g = 0; g < n.gpu.size(); ++g)
          if (n.gpu[g] == 1000) idle.push_back(g);
        if (int(idle.size()) >= t.gpu_count) {
          for (int k = 0; k < t.gpu_count; ++k) n.gpu[idle[size_t(k)]] = 0;
          go(i + 1, held + t.gpu_demand_milli());
          for (int k = 0; k < t.gpu_count; ++k) n.gpu[idle[size_t(k)]] = 1000;
        }
      } else {
        for (size_t g = 0; g < n.gpu.size(); ++g) {
          if (n.gpu[g] < t.milli_per_gpu.v) continue;
          n.gpu[g] -= t.milli_per_gpu.v;
          go(i + 1, held + t.milli_per_gpu.v);
          n.gpu[g] += t.milli_per_gpu.v;
        }
      }
      n.cpu += t.cpu.v, n.mem += t.memory.v;
    }
  }
};

TEST(AllocBound, NeverBelowTheExactOptimumOfRandomSmallInstances) {
  SKIP_WITHOUT_SOLVER();
  Rng rng(7);
  int tight = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<NodeSpec> specs;
    Exhaustive ex;
    const int nn = 1 + int(rng.uniform(3));
    for (int k = 0; k < nn; ++k) {
      const int gpus = 1 + int(rng.uniform(4));
      const int64_t cpu = 4000 * (1 + int64_t(rng.uniform(8))), mem = 8192 * (1 + int64_t(rng.uniform(8)));
      specs.push_back(node("n" + std::to_string(k), gpus, cpu, mem));
      ex.nodes.push_back({cpu, mem, std::vector<int64_t>(size_t(gpus), 1000)});
    }
    const int np = 2 + int(rng.uniform(5));
    for (int k = 0; k < np; ++k) {
      const bool sh = rng.uniform(2) == 0;
      const int gpus = sh ? 1 : 1 + int(rng.uniform(3));
      const int64_t milli = sh ? 100 * (1 + int64_t(rng.uniform(9))) : 1000;
      ex.pods.push_back(pod(gpus, milli, 1000 * (1 + int64_t(rng.uniform(16))), 4096 * (1 + int64_t(rng.uniform(12)))));
    }
    ex.go(0, 0);
    const int64_t b = bound_of(cluster_of(specs), ex.pods);
    int64_t demand = 0, capacity = 0;
    for (const TaskRequest& t : ex.pods) demand += t.gpu_demand_milli();
    for (const NodeSpec& s : specs) capacity += s.gpu_count * 1000;
    ASSERT_GE(b, ex.best) << "trial " << trial;
    EXPECT_LE(b, std::min(demand, capacity)) << "trial " << trial;
    tight += b == ex.best;
  }
  // Not a goal, a sign the cuts work: many small instances are solved exactly.
  EXPECT_GT(tight, 75) << tight << " of 300 exact";
}

TEST(AllocBound, AtOrAboveEveryPolicyOnTheSameArrivals) {
  SKIP_WITHOUT_SOLVER();
  for (SyntheticMix mix : {SyntheticMix::kOpenb, SyntheticMix::kCpuHeavy, SyntheticMix::kMemoryHeavy}) {
    const AllocWorkload w = synthetic_workload(3, 60, mix);
    const std::vector<int> pcts{50, 80, 100, 130};
    const std::vector<uint64_t> seeds{1, 2};
    auto bounds = alloc_bound_curves(w, seeds, 1.3, pcts);
    ASSERT_TRUE(bounds.ok()) << bounds.error().message;
    ASSERT_EQ(bounds->size(), 2u);
    for (const std::string& p : policy_names())
      for (size_t s = 0; s < seeds.size(); ++s) {
        auto run = run_alloc(w, p, seeds[s]);
        ASSERT_TRUE(run.ok());
        for (size_t k = 0; k < pcts.size(); ++k) {
          const double v = run->curve[size_t(pcts[k])];
          if (std::isnan(v)) continue;
          EXPECT_GE((*bounds)[s].at[k], v) << w.name << " " << p << " seed " << seeds[s] << " at " << pcts[k];
        }
      }
  }
}

}  // namespace
}  // namespace tessera::sim
