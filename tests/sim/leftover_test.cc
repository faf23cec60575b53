// Where a run's free GPU capacity lies at the end (sim/leftover.h): on a hand-built cluster, and on
// real runs, where it must add up to what the run left unallocated.
#include "sim/leftover.h"

#include <gtest/gtest.h>

#include "sim/alloc_experiment.h"

namespace tessera::sim {
namespace {

TaskRequest ask(int gpus, int64_t milli, int64_t cpu) {
  TaskRequest t;
  t.cpu = MilliCpu(cpu);
  t.memory = MiB(1024);
  t.gpu_count = gpus;
  if (gpus > 0) t.milli_per_gpu = MilliGpu(milli);
  return t;
}

TaskPlacement share(NodeId n, uint16_t gpu, int64_t milli, int64_t cpu) {
  TaskPlacement p;
  p.node = n;
  p.cpu = MilliCpu(cpu);
  p.memory = MiB(1024);
  GpuGrant g;
  g.gpu = gpu;
  g.kind = GrantKind::kShare;
  g.milli = MilliGpu(milli);
  p.gpus.push_back(g);
  return p;
}

NodeId add_t4_node(ClusterState& c, const std::string& name, int gpus) {
  NodeSpec spec;
  spec.name = name;
  spec.cpu = MilliCpu(8000);
  spec.memory = MiB(16384);
  spec.gpu_model = "T4";
  spec.gpu_count = gpus;
  return *c.add_node(std::move(spec));
}

TEST(Leftover, SplitsFreeMilliByWhatHeldItBack) {
  ClusterState c;
  const NodeId a = add_t4_node(c, "a", 3);
  const NodeId b = add_t4_node(c, "b", 1);
  ASSERT_TRUE(c.apply(share(a, 0, 810, 1000)).ok());  // 190 free
  ASSERT_TRUE(c.apply(share(a, 1, 950, 1000)).ok());  // 50 free
  ASSERT_TRUE(c.apply(share(a, 2, 700, 1000)).ok());  // 300 free
  TaskPlacement cpu_only;
  cpu_only.node = b;
  cpu_only.cpu = MilliCpu(8000);
  ASSERT_TRUE(c.apply(cpu_only).ok());  // b's GPU idle, its CPU spent

  // A whole GPU failed: it would fit b but for CPU; on a, no GPU is whole.
  Leftover l = leftover_of(c, {ask(1, 1000, 4000), ask(0, 0, 9000)});
  EXPECT_EQ(l.cpu_memory, 1000);
  EXPECT_EQ(l.by_band, (std::array<int64_t, 5>{50, 190, 300, 0, 0}));
  EXPECT_EQ(l.total(), 1540);

  // A 250-milli share failed too: a's third GPU would hold it, so a's free milli is held by CPU or
  // memory (as it would be in a run, where the share failed because a lacked them).
  l = leftover_of(c, {ask(1, 1000, 4000), ask(1, 250, 4000)});
  EXPECT_EQ(l.cpu_memory, 1540);
  EXPECT_EQ(l.by_band, (std::array<int64_t, 5>{}));

  // Nothing failed: every free milli counts by its band; b's idle GPU too.
  l = leftover_of(c, {});
  EXPECT_EQ(l.cpu_memory, 0);
  EXPECT_EQ(l.by_band, (std::array<int64_t, 5>{50, 190, 300, 0, 1000}));
}

// On real runs the split adds up to the capacity the run left free, and where CPU runs out first
// (the CPU-heavy mix) some of it is held by CPU or memory.
TEST(Leftover, RunsAccountForEveryFreeMilli) {
  const AllocWorkload w = synthetic_workload(3, 120, SyntheticMix::kCpuHeavy);
  auto res = run_alloc_matrix(w, {"first-fit", "best-fit", "tessera"}, {1, 2}, 1.3, 1);
  ASSERT_TRUE(res.ok()) << res.error().message;
  const int64_t capacity = w.cluster.total_gpus() * 1000;
  int64_t cpu_memory = 0;
  for (const AllocSummary& s : *res) {
    ASSERT_EQ(s.seed_leftover.size(), s.seeds.size());
    for (size_t k = 0; k < s.seeds.size(); ++k) {
      const Leftover& l = s.seed_leftover[k];
      EXPECT_EQ(l.total(), capacity - s.seed_final_milli[k]) << s.policy << " seed " << s.seeds[k];
      EXPECT_EQ(l.by_band.back() % 1000, 0);
      cpu_memory += l.cpu_memory;
    }
  }
  EXPECT_GT(cpu_memory, 0) << "on the CPU-heavy mix, CPU strands some GPUs";
}

}  // namespace
}  // namespace tessera::sim
