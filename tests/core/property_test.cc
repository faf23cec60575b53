// Randomized property test: thousands of random allocate/release sequences over mixed clusters
// (whole, shared and MIG GPUs); every invariant is checked after every step.
#include <gtest/gtest.h>

#include "core/placement/engine.h"
#include "core/rng.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

TaskRequest random_task(Rng& rng) {
  switch (rng.uniform(5)) {
    case 0: return whole(0, 500 + int64_t(rng.uniform(4000)), 1024);
    case 1: return whole(1 + int(rng.uniform(4)), 2000, 4096);
    case 2: return share(100 + int64_t(rng.uniform(900)), 1000, 2048);
    case 3: {
      static const char* profiles[] = {"1g", "2g", "3g", "4g", "7g", "1g.20gb"};
      return mig(profiles[rng.uniform(6)]);
    }
    default: {
      TaskRequest t = share(250);
      t.gpu_memory = MiB(1024 * int64_t(1 + rng.uniform(20)));
      return t;
    }
  }
}

TEST(Property, RandomAllocateReleaseKeepsInvariants) {
  FirstFitPolicy ff;
  int placed_total = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    ClusterState c(GpuCatalog::builtin(), NetworkLevels({"leaf"}));
    const char* models[] = {"A100-40GB", "H100-80GB-SXM", "A30", "T4"};
    for (int i = 0; i < 6; ++i) {
      const char* m = models[rng.uniform(4)];
      NodeSpec s = node_spec("n" + std::to_string(i), m, 1 + int(rng.uniform(8)), {"l" + std::to_string(i / 3)},
                             16000, 65536);
      if (std::string(m) != "T4")
        for (int g = 0; g < s.gpu_count; ++g)
          if (rng.uniform(2)) s.mig_gpus.push_back(g);
      ASSERT_TRUE(c.add_node(s).ok());
    }
    EngineOptions opts;
    opts.seed = seed;
    PlacementEngine e(ff, opts);
    std::vector<std::vector<TaskPlacement>> live;
    for (int step = 0; step < 150; ++step) {
      if (!live.empty() && rng.uniform(3) == 0) {
        size_t k = rng.uniform(live.size());
        for (auto& p : live[k]) ASSERT_TRUE(c.release(p).ok());
        live.erase(live.begin() + long(k));
      } else {
        Gang g = gang(1 + int(rng.uniform(3)), random_task(rng), step);
        if (rng.uniform(4) == 0) g.topology = {TopologyMode::kRequired, "leaf"};
        const int64_t before = c.allocated_gpu_milli();
        auto r = e.place_and_commit(c, g);
        if (r.outcome == Outcome::kPlaced) {
          ASSERT_GE(int(r.tasks.size()), g.required_tasks());
          live.push_back(r.tasks);
          ++placed_total;
        } else {
          ASSERT_EQ(c.allocated_gpu_milli(), before);
          ASSERT_FALSE(r.reason.empty());
        }
      }
      Status s = c.check_invariants();
      ASSERT_TRUE(s.ok()) << "seed " << seed << " step " << step << ": " << s.message();
    }
    for (auto& ps : live)
      for (auto& p : ps) ASSERT_TRUE(c.release(p).ok());
    EXPECT_EQ(c.allocated_gpu_milli(), 0);
    for (const Node& n : c.nodes()) EXPECT_EQ(n.cpu_used.v, 0);
  }
  EXPECT_GT(placed_total, 1000);
}

}  // namespace
}  // namespace tessera
