// The engine's per-shape index of fitting nodes (EngineOptions::best_index) answers a lone task
// exactly as scoring every node does: two engines, one with the index and one without, are asked the
// same questions over random clusters while the cluster changes under them (placements, releases,
// cordons, GPU health, node ranks, the cluster assigned from an older copy).
#include <gtest/gtest.h>

#include "core/placement/engine.h"
#include "core/rng.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

TaskRequest lone_task(Rng& rng) {
  // Few shapes, so that each is asked many times and answered from the index.
  switch (rng.uniform(6)) {
    case 0: return whole(1, 1000, 1024);
    case 1: return whole(2, 2000, 4096);
    case 2: return share(250, 1000, 2048);
    case 3: return mig("1g");
    case 4: return whole(0, 4000, 8192);
    default: {
      TaskRequest t = whole(1, 1000, 1024);
      t.prefer_spot = true;
      return t;
    }
  }
}

ClusterState random_cluster(Rng& rng) {
  ClusterState c(GpuCatalog::builtin(), NetworkLevels({"leaf"}));
  auto pool = [&c](const char* name, PoolKind kind) {
    Pool p;
    p.name = name;
    p.kind = kind;
    return c.add_pool(p).value();
  };
  const PoolId spot = pool("spot", PoolKind::kSpot);
  const PoolId od = pool("od", PoolKind::kOnDemand);
  const char* models[] = {"A100-40GB", "H100-80GB-SXM", "A30", "T4"};
  const int nodes = 10 + int(rng.uniform(30));
  for (int i = 0; i < nodes; ++i) {
    const char* m = models[rng.uniform(4)];
    NodeSpec s = node_spec("n" + std::to_string(i), m, 1 + int(rng.uniform(8)), {"l" + std::to_string(i / 4)},
                           8000 + 1000 * int64_t(rng.uniform(32)), 65536);
    if (std::string(m) != "T4")
      for (int g = 0; g < s.gpu_count; ++g)
        if (rng.uniform(4) == 0) s.mig_gpus.push_back(g);
    const uint64_t p = rng.uniform(4);
    if (p == 1) s.pool = spot;
    if (p == 2) s.pool = od;
    EXPECT_TRUE(c.add_node(s).ok());
  }
  return c;
}

void expect_same(const PlacementResult& a, const PlacementResult& b, const std::string& where) {
  ASSERT_EQ(a.outcome, b.outcome) << where << ": " << a.reason << " / " << b.reason;
  ASSERT_EQ(a.tasks, b.tasks) << where;
  if (a.outcome != Outcome::kPlaced) {
    EXPECT_EQ(a.reason, b.reason) << where;
  }
}

TEST(BestIndex, LoneTasksGoWhereScoringEveryNodeSendsThem) {
  int placed = 0, indexed_policies = 0;
  for (const std::string& name : policy_names()) {
    auto policy = make_policy(name);
    ASSERT_TRUE(policy.ok()) << name;
    if (!(*policy)->cacheable()) continue;  // the index is for cacheable policies only
    ++indexed_policies;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      Rng rng(seed * 7919);
      ClusterState c = random_cluster(rng);
      EngineOptions with, without;
      with.seed = without.seed = seed;
      without.best_index = false;
      PlacementEngine fast(**policy, with), full(**policy, without);
      std::vector<std::vector<TaskPlacement>> live;
      std::optional<ClusterState> older;
      for (int step = 0; step < 300; ++step) {
        const std::string where = name + " seed " + std::to_string(seed) + " step " + std::to_string(step);
        const uint64_t op = rng.uniform(20);
        if (op < 4 && !live.empty()) {  // a job ends
          const size_t k = rng.uniform(live.size());
          ASSERT_TRUE(c.release_all(live[k]).ok()) << where;
          live.erase(live.begin() + long(k));
        } else if (op == 4) {  // a cordon comes or goes
          const NodeId n(uint32_t(rng.uniform(c.node_count())));
          ASSERT_TRUE(c.set_schedulable(n, !c.node(n).schedulable).ok()) << where;
        } else if (op == 5) {  // a GPU turns sick or heals
          const NodeId n(uint32_t(rng.uniform(c.node_count())));
          const GpuRef g{n, uint16_t(rng.uniform(c.node(n).gpus.size()))};
          const bool healthy = c.node(n).gpus[g.index].health == GpuHealth::kHealthy;
          (void)c.set_health(g, healthy ? GpuHealth::kUnhealthy : GpuHealth::kHealthy);
        } else if (op == 6) {  // other tie-break ranks
          std::vector<uint32_t> rank(c.node_count());
          for (size_t i = 0; i < rank.size(); ++i) rank[i] = uint32_t(rng.uniform(4));
          fast.set_node_rank(rank);
          full.set_node_rank(rank);
        } else if (op == 7 && rng.uniform(3) == 0) {  // keep a copy, or go back to it (generations go back)
          if (older && rng.uniform(2)) {
            c = *older;
            live.clear();  // what was placed after the copy is gone with it
            older.reset();
          } else {
            older = c;
            live.clear();  // a copy's placements are not released against it
          }
        } else {
          Gang g = gang(rng.uniform(8) == 0 ? 2 : 1, lone_task(rng), step);
          const PlacementResult a = fast.place(c, g);
          const PlacementResult b = full.place(c, g);
          expect_same(a, b, where);
          if (::testing::Test::HasFatalFailure()) return;
          if (a.outcome == Outcome::kPlaced) {
            ASSERT_TRUE(c.apply_all(a.tasks).ok()) << where;
            live.push_back(a.tasks);
            ++placed;
          }
        }
      }
    }
  }
  EXPECT_GE(indexed_policies, 5);
  EXPECT_GT(placed, 5000);  // the sequences placed enough to exercise the index
}

// PlacementEngine::place_within: told nodes that include every node a lone task fits now, it
// answers as place() does (the same node and GPUs, or retry-later when none of them fits); a gang,
// or a policy that draws at random, is answered by place() itself. Random clusters and tasks; the
// nodes given are those the task fits plus random others, in random order.
TEST(PlaceWithin, AnswersAsPlaceWhenTheOtherNodesCannotHoldIt) {
  int placed = 0, refused = 0;
  for (const std::string& name : policy_names()) {
    auto policy = make_policy(name);
    ASSERT_TRUE(policy.ok()) << name;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      Rng rng(seed * 104729);
      ClusterState c = random_cluster(rng);
      EngineOptions o;
      o.seed = seed;
      PlacementEngine within(**policy, o), full(**policy, o);
      for (int step = 0; step < 200; ++step) {
        const std::string where = name + " seed " + std::to_string(seed) + " step " + std::to_string(step);
        Gang g = gang(rng.uniform(6) == 0 ? 2 : 1, lone_task(rng), step);
        std::vector<NodeId> nodes;
        for (const Node& n : c.nodes())
          if (check_fit(n, g.task) == Misfit::kFits || rng.uniform(3) == 0) nodes.push_back(n.id);
        for (size_t i = nodes.size(); i > 1; --i) std::swap(nodes[i - 1], nodes[rng.uniform(i)]);
        const PlacementResult a = within.place_within(c, g, nodes);
        const PlacementResult b = full.place(c, g);
        ASSERT_EQ(a.outcome == Outcome::kPlaced, b.outcome == Outcome::kPlaced) << where << ": " << b.reason;
        ASSERT_EQ(a.tasks, b.tasks) << where;
        if (a.outcome == Outcome::kPlaced) {
          ASSERT_TRUE(c.apply_all(a.tasks).ok()) << where;
          ++placed;
        } else {
          ++refused;
        }
      }
    }
  }
  EXPECT_GT(placed, 1000);
  EXPECT_GT(refused, 100);  // full clusters too
}

}  // namespace
}  // namespace tessera
