#include "core/placement/engine.h"

#include <gtest/gtest.h>

#include <set>

#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

// 2 spines x 2 leaves x 2 nodes of 8 H100.
ClusterState fat_tree() {
  ClusterState c(GpuCatalog::builtin(), NetworkLevels({"spine", "leaf"}));
  int i = 0;
  for (int s = 0; s < 2; ++s)
    for (int l = 0; l < 2; ++l)
      for (int n = 0; n < 2; ++n) {
        auto r = c.add_node(node_spec("n" + std::to_string(i++), "H100-80GB-SXM", 8,
                                      {"spine" + std::to_string(s), "leaf" + std::to_string(s * 2 + l)}));
        EXPECT_TRUE(r.ok());
      }
  return c;
}

std::set<uint32_t> nodes_of(const PlacementResult& r) {
  std::set<uint32_t> s;
  for (auto& t : r.tasks) s.insert(t.node.value);
  return s;
}

TEST(PlacementEngine, GangIsAllOrNothing) {
  ClusterState c = fat_tree();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  // 8 nodes x 8 GPUs = 64 GPUs; a 9-task x 8-GPU gang can never fit, an 8x8 one fits exactly.
  auto never = e.place(c, gang(9, whole(8)));
  EXPECT_EQ(never.outcome, Outcome::kNeverFits);
  EXPECT_TRUE(never.tasks.empty());
  EXPECT_NE(never.reason.find("even an empty cluster holds at most 8"), std::string::npos) << never.reason;

  auto one = e.place_and_commit(c, gang(1, whole(1)));
  ASSERT_EQ(one.outcome, Outcome::kPlaced);
  const int64_t before = c.allocated_gpu_milli();
  auto full = e.place_and_commit(c, gang(8, whole(8), 2));
  EXPECT_EQ(full.outcome, Outcome::kRetryLater) << "one GPU is taken, so 8x8 cannot fit now";
  EXPECT_TRUE(full.tasks.empty());
  EXPECT_EQ(c.allocated_gpu_milli(), before) << "nothing was placed partially";
  EXPECT_TRUE(c.check_invariants().ok());
}

TEST(PlacementEngine, GangSpansTheLowestLevelPossible) {
  ClusterState c = fat_tree();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  // 4 tasks x 2 GPUs fit on one node.
  auto small = e.place(c, gang(4, whole(2)));
  ASSERT_EQ(small.outcome, Outcome::kPlaced);
  EXPECT_EQ(nodes_of(small).size(), 1u);
  // 2 x 8 GPUs need two nodes: both in one leaf.
  auto two = e.place(c, gang(2, whole(8)));
  ASSERT_EQ(two.outcome, Outcome::kPlaced);
  std::set<uint32_t> leaves;
  for (auto& t : two.tasks) leaves.insert(c.node(t.node).path[1]);
  EXPECT_EQ(leaves.size(), 1u);
  // 4 x 8 GPUs: one spine.
  auto four = e.place(c, gang(4, whole(8)));
  ASSERT_EQ(four.outcome, Outcome::kPlaced);
  std::set<uint32_t> spines;
  for (auto& t : four.tasks) spines.insert(c.node(t.node).path[0]);
  EXPECT_EQ(spines.size(), 1u);
}

TEST(PlacementEngine, RequiredLevelIsHonouredAndExplained) {
  ClusterState c = fat_tree();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  // Take 4 GPUs on every node of leaf0 and 2 on each node of leaf1..3.
  for (int i = 0; i < 8; ++i) {
    Gang g = gang(1, whole(i < 2 ? 4 : 2), 100 + i);
    g.topology = {TopologyMode::kRequired, "node"};
    TaskPlacement p;
    GpuPick pick;
    ASSERT_TRUE(pick_default(c.node(NodeId(i)), g.task, pick));
    ASSERT_TRUE(c.apply(make_placement(c.node(NodeId(i)), g.task, pick)).ok());
  }
  Gang g = gang(2, whole(8));
  g.topology = {TopologyMode::kRequired, "leaf"};
  auto r = e.place(c, g);
  EXPECT_EQ(r.outcome, Outcome::kRetryLater);
  EXPECT_NE(r.reason.find("within one leaf"), std::string::npos) << r.reason;
  // Room in a leaf is 0 for 8-GPU tasks now; leaf1..3 have 12 idle GPUs each (6 + 6), leaf0 has 8.
  EXPECT_NE(r.reason.find("needs 16 GPUs (2 tasks of 8 GPUs"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("the largest free block is 12 GPUs in leaf1, room for 0 tasks"), std::string::npos)
      << r.reason;

  Gang g3 = gang(3, whole(4));
  g3.topology = {TopologyMode::kRequired, "leaf"};
  auto r3 = e.place(c, g3);
  EXPECT_EQ(r3.outcome, Outcome::kRetryLater);
  EXPECT_NE(r3.reason.find("room for 2 tasks"), std::string::npos) << r3.reason;

  Gang never = gang(3, whole(6));
  never.topology = {TopologyMode::kRequired, "leaf"};
  auto rn = e.place(c, never);
  EXPECT_EQ(rn.outcome, Outcome::kNeverFits);
  EXPECT_NE(rn.reason.find("inside one leaf; even an empty cluster holds at most 2"), std::string::npos) << rn.reason;

  Gang g2 = gang(2, whole(6));
  g2.topology = {TopologyMode::kRequired, "leaf"};
  auto r2 = e.place(c, g2);
  ASSERT_EQ(r2.outcome, Outcome::kPlaced) << r2.reason;
  EXPECT_EQ(c.node(r2.tasks[0].node).path[1], c.node(r2.tasks[1].node).path[1]);

  Gang bad = gang(2, whole(1));
  bad.topology = {TopologyMode::kRequired, "rack"};
  auto rb = e.place(c, bad);
  EXPECT_EQ(rb.outcome, Outcome::kNeverFits);
  EXPECT_NE(rb.reason.find("known levels: spine, leaf, node"), std::string::npos) << rb.reason;
}

TEST(PlacementEngine, NeverFitsVersusRetryLaterForOneTask) {
  ClusterState c;
  ASSERT_TRUE(c.add_node(node_spec("t4", "T4", 2)).ok());
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  TaskRequest a100 = whole(1);
  a100.gpu_models = {"A100-80GB"};
  auto r = e.place(c, gang(1, a100));
  EXPECT_EQ(r.outcome, Outcome::kNeverFits);

  ASSERT_EQ(e.place_and_commit(c, gang(1, whole(2))).outcome, Outcome::kPlaced);
  auto later = e.place(c, gang(1, whole(1)));
  EXPECT_EQ(later.outcome, Outcome::kRetryLater);
  EXPECT_NE(later.reason.find("1 node: not enough free GPU"), std::string::npos) << later.reason;

  auto invalid = e.place(c, gang(1, whole(-1)));
  EXPECT_EQ(invalid.outcome, Outcome::kNeverFits);
  EXPECT_NE(invalid.reason.find("task.gpus"), std::string::npos) << invalid.reason;
}

TEST(PlacementEngine, ElasticGangTakesWhatFitsAboveMinimum) {
  ClusterState c;
  ASSERT_TRUE(c.add_node(node_spec("n0", "L40S", 4)).ok());
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  Gang g = gang(6, whole(1));
  g.min_tasks = 3;
  auto r = e.place(c, g);
  ASSERT_EQ(r.outcome, Outcome::kPlaced);
  EXPECT_EQ(r.tasks.size(), 4u);
  g.min_tasks = 5;
  EXPECT_EQ(e.place(c, g).outcome, Outcome::kNeverFits);
}

TEST(PlacementEngine, MigGangCreatesInstancesOnScratchThenCommitsWhole) {
  ClusterState c;
  NodeSpec s = node_spec("n0", "H100-80GB-SXM", 1);
  s.mig_gpus = {0};
  ASSERT_TRUE(c.add_node(s).ok());
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  auto two = e.place_and_commit(c, gang(2, mig("3g")));
  ASSERT_EQ(two.outcome, Outcome::kPlaced) << two.reason;
  EXPECT_NE(two.tasks[0].gpus[0].mig_start, two.tasks[1].gpus[0].mig_start);
  EXPECT_EQ(c.node(NodeId(0)).gpus[0].mig.occupied_mask(), 0xFF);
  // 3g+3g strands the seventh compute slice: not even a 1g fits any more.
  EXPECT_EQ(e.place(c, gang(1, mig("1g"))).outcome, Outcome::kRetryLater);
  EXPECT_TRUE(c.check_invariants().ok());
}

TEST(PlacementEngine, SameSeedSamePlacement) {
  auto run = [] {
    ClusterState c = fat_tree();
    FirstFitPolicy ff;
    EngineOptions o;
    o.seed = 7;
    o.node_rank = {5, 3, 7, 1, 0, 2, 6, 4};
    PlacementEngine e(ff, o);
    std::vector<TaskPlacement> all;
    for (int i = 0; i < 20; ++i) {
      auto r = e.place_and_commit(c, gang(1 + i % 3, i % 2 ? whole(1 + i % 4) : share(300), i));
      for (auto& t : r.tasks) all.push_back(t);
    }
    return all;
  };
  auto a = run();
  EXPECT_EQ(a, run());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].node.value, 4u) << "rank 0 is node 4: ties go to the lowest rank";
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The never-fits answer counts what nodes could hold when empty, alike for nodes of one kind and
// whatever they hold or whether they take work now: cordoning nodes (which does not change
// capacity_generation, so the answer is not recomputed) never turns "later" into "never", and
// nodes of different kinds are each counted by what they are.
TEST(PlacementEngine, NeverFitsCountsEveryKindOfNodeAndCordonedOnes) {
  ClusterState c;
  NodeId h0 = *c.add_node(node_spec("h0", "H100-80GB-SXM", 8));
  NodeId h1 = *c.add_node(node_spec("h1", "H100-80GB-SXM", 8));
  ASSERT_TRUE(c.add_node(node_spec("l0", "L40S", 4)).ok());
  ASSERT_TRUE(c.add_node(node_spec("l1", "L40S", 2)).ok());
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  // Whole 4-GPU tasks: 2 + 2 on the H100s, 1 on the 4-GPU L40S node, none on the 2-GPU one: 5.
  EXPECT_NE(e.place(c, gang(6, whole(4))).reason.find("even an empty cluster holds at most 5"), std::string::npos);
  const uint64_t cap = c.capacity_generation();
  const uint64_t gen = c.generation();
  ASSERT_TRUE(c.set_schedulable(h0, false).ok());
  ASSERT_TRUE(c.set_schedulable(h1, false).ok());
  EXPECT_EQ(c.capacity_generation(), cap) << "taking no work now is not a capacity change";
  EXPECT_GT(c.generation(), gen) << "but it is a change of the cluster";
  const PlacementResult cordoned = e.place(c, gang(5, whole(4)));
  EXPECT_EQ(cordoned.outcome, Outcome::kRetryLater) << cordoned.reason;
  ASSERT_TRUE(c.set_schedulable(h0, true).ok());
  ASSERT_TRUE(c.set_schedulable(h1, true).ok());
  EXPECT_EQ(e.place(c, gang(5, whole(4))).outcome, Outcome::kPlaced);
  const uint64_t healthy = c.capacity_generation();
  ASSERT_TRUE(c.set_health(GpuRef{h1, 0}, GpuHealth::kUnhealthy).ok());
  EXPECT_GT(c.capacity_generation(), healthy) << "health is capacity";
}

// Tasks that differ only in the GPU models they name share the engine's cached scores (score()
// does not read the models; check_fit does): once every node is scored for one of them, a task of
// the same shape naming a model scores no node again, and still lands only on that model.
TEST(PlacementEngine, TasksThatDifferOnlyInModelsShareScoresNotFit) {
  struct Counting final : ScoringPolicy {
    mutable int calls = 0;
    std::string_view name() const override { return "counting"; }
    std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
      ++calls;
      NodeChoice out;
      if (!pick_default(n, t, out.pick)) return std::nullopt;
      out.score = -n.free_gpu_milli;  // tightest first
      return out;
    }
  } policy;
  ClusterState c(GpuCatalog::builtin());
  ASSERT_TRUE(c.add_node(node_spec("t4-4", "T4", 4)).ok());
  ASSERT_TRUE(c.add_node(node_spec("h100-8", "H100-80GB-SXM", 8)).ok());
  ASSERT_TRUE(c.add_node(node_spec("t4-2", "T4", 2)).ok());
  ASSERT_TRUE(c.add_node(node_spec("h100-2", "H100-80GB-SXM", 2)).ok());
  PlacementEngine e(policy, {});
  const Gang any = gang(1, whole(1));
  Gang h100 = any;
  h100.task.gpu_models = {"H100-80GB-SXM"};
  EXPECT_EQ(nodes_of(e.place(c, any)), std::set<uint32_t>{2});
  EXPECT_EQ(policy.calls, 4);
  EXPECT_EQ(nodes_of(e.place(c, h100)), std::set<uint32_t>{3});
  EXPECT_EQ(nodes_of(e.place(c, h100)), std::set<uint32_t>{3});
  EXPECT_EQ(policy.calls, 4) << "the H100 task reuses the scores of its shape";
  // A placement changes node 3: it is scored once more, for both tasks.
  ASSERT_EQ(e.place_and_commit(c, h100).outcome, Outcome::kPlaced);
  EXPECT_EQ(nodes_of(e.place(c, h100)), std::set<uint32_t>{3});
  EXPECT_EQ(nodes_of(e.place(c, any)), std::set<uint32_t>{3});
  EXPECT_EQ(policy.calls, 5);
  // Once node 3 is full, the H100 task goes to the other H100 node, never to a T4.
  ASSERT_EQ(e.place_and_commit(c, h100).outcome, Outcome::kPlaced);
  EXPECT_EQ(nodes_of(e.place(c, h100)), std::set<uint32_t>{1});
  EXPECT_EQ(nodes_of(e.place(c, any)), std::set<uint32_t>{2});
}

}  // namespace
}  // namespace tessera
