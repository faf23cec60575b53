// The scoring policies on small hand-built clusters: each formula on hand-computed cases, GPU
// choices, tie-breaks by rank, affinity tags, tessera's MIG slot and NVLink set choices.
#include <gtest/gtest.h>

#include <set>

#include "core/placement/engine.h"
#include "core/policies/policy_util.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

std::unique_ptr<ScoringPolicy> policy(const std::string& name) {
  auto p = make_policy(name);
  EXPECT_TRUE(p.ok()) << name;
  return std::move(*p);
}

// Puts `t` on node `id` with the default GPU picker (or `pick` if given).
void occupy(ClusterState& c, uint32_t id, const TaskRequest& t, const GpuPick* pick = nullptr) {
  GpuPick p;
  if (pick) p = *pick;
  else ASSERT_TRUE(pick_default(c.node(NodeId(id)), t, p));
  ASSERT_TRUE(c.apply(make_placement(c.node(NodeId(id)), t, p)).ok());
}

NodeChoice score(const ScoringPolicy& p, const ClusterState& c, uint32_t id, const TaskRequest& t, uint64_t seed = 1) {
  Rng rng(seed);
  PolicyContext ctx{c, rng};
  auto r = p.score(c.node(NodeId(id)), t, ctx);
  EXPECT_TRUE(r.has_value());
  return r.value_or(NodeChoice{});
}

ClusterState one_node(int64_t cpu, int gpus, const std::string& model = "T4") {
  ClusterState c;
  EXPECT_TRUE(c.add_node(node_spec("n0", model, gpus, {}, cpu)).ok());
  return c;
}

TEST(Policies, RegistryKnowsAllAndNamesThemOnError) {
  const auto names = policy_names();
  for (const char* n : {"random", "dotprod", "gpu-packing", "gpu-clustering", "best-fit", "fgd", "spread", "first-fit", "tessera"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    EXPECT_EQ(policy(n)->name(), n);
  }
  auto bad = make_policy("worst-fit");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("known policies: random"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(policy("random")->cacheable());
  EXPECT_TRUE(policy("tessera")->packs_gangs());
}

// Node: 8 GPUs, 128 cores; 32 cores and 4 GPUs used -> free (96000, 4000).
ClusterState half_used() {
  ClusterState c = one_node(128000, 8);
  occupy(c, 0, whole(4, 32000));
  return c;
}

TEST(Policies, DotProdIsOneMinusHalfTheNormalisedDotProduct) {
  ClusterState c = half_used();
  // dot = 96000/128000 * 8000/128000 + 4000/8000 * 1000/8000 = 0.109375 -> int(100 * (1 - 0.0546875)) = 94
  EXPECT_EQ(score(*policy("dotprod"), c, 0, whole(1, 8000)).score, 94);
  // A share counts its milli: 0.75 * 0.0625 + 0.5 * 500/8000 = 0.078125 -> int(96.09375) = 96
  EXPECT_EQ(score(*policy("dotprod"), c, 0, share(500, 8000)).score, 96);
}

TEST(Policies, BestFitScoresWhatIsLeftOfCpuAndGpu) {
  ClusterState c = half_used();
  // s = 0.5 * 88000/128000 + 0.5 * 3000/8000 = 0.53125 -> int(46.875) = 46
  EXPECT_EQ(score(*policy("best-fit"), c, 0, whole(1, 8000)).score, 46);
  // CPU 0 counts as 100 milli in scores: s = 0.5 * 95900/128000 + 0.5 * 0.5 = 0.62461 -> 37
  EXPECT_EQ(score(*policy("best-fit"), c, 0, whole(0, 0)).score, 37);
}

TEST(Policies, GpuPackingCases) {
  auto p = policy("gpu-packing");
  ClusterState idle = one_node(64000, 8);
  EXPECT_EQ(score(*p, idle, 0, whole(1)).score, 25);  // all idle: max(33 - 8, 8)
  ClusterState two = one_node(64000, 2);
  EXPECT_EQ(score(*p, two, 0, whole(1)).score, 31);  // max(33 - 2, 2)
  ClusterState c = one_node(64000, 4);
  occupy(c, 0, share(400));                          // GPU 0: 600 free
  EXPECT_EQ(score(*p, c, 0, share(500)).score, 94);  // shared GPU: 100 - (600*100/1000)/10
  EXPECT_EQ(score(*p, c, 0, share(700)).score, 49);  // needs an idle GPU: max(50 - 1, 33)
  EXPECT_EQ(score(*p, c, 0, whole(2)).score, 48);    // two idle GPUs on a used node
  EXPECT_EQ(score(*p, c, 0, whole(0)).score, 0);     // CPU-only
  EXPECT_EQ(score(*p, c, 0, share(500)).pick.gpus[0], 0);
}

TEST(Policies, GpuClusteringUsesAffinityTags) {
  ClusterState c;
  ASSERT_TRUE(c.add_node(node_spec("a", "T4", 2)).ok());
  ASSERT_TRUE(c.add_node(node_spec("b", "T4", 2)).ok());
  occupy(c, 1, share(300));  // b holds a sharing task: tag 0 only, 1700 milli free
  auto p = policy("gpu-clustering");
  // base = 25 * (8000 - free) / 8000: a = 18, b = 19.
  EXPECT_EQ(score(*p, c, 0, share(300)).score, 18 + 25);  // no tags
  EXPECT_EQ(score(*p, c, 1, share(300)).score, 19 + 75);  // only the pod's tag
  EXPECT_EQ(score(*p, c, 1, whole(1)).score, 19);         // other tags only
  occupy(c, 1, whole(1));                                 // b: tags {share, 1-GPU}, 700 free
  EXPECT_EQ(score(*p, c, 1, share(300)).score, 25 * 7300 / 8000 + 50);
  EXPECT_EQ(score(*p, c, 0, whole(0)).score, 0);

  // Through the engine: the next sharing task joins b, a whole GPU task goes to the tagless a.
  PlacementEngine e(*p, {});
  auto r = e.place(c, gang(1, share(200)));
  ASSERT_EQ(r.outcome, Outcome::kPlaced);
  EXPECT_EQ(r.tasks[0].node.value, 1u);
}

TEST(Policies, SpreadIsLeastAllocated) {
  ClusterState c = half_used();
  // CPU: (96000 - 8000) * 100 / 128000 = 68; GPU: 3000 * 100 / 8000 = 37 -> (68 + 37) / 2 = 52
  EXPECT_EQ(score(*policy("spread"), c, 0, whole(1, 8000)).score, 52);
}

TEST(Policies, RandomDrawsFromTheContextRng) {
  ClusterState c = one_node(64000, 4);
  auto p = policy("random");
  std::set<int> gpus;
  for (uint64_t seed = 1; seed <= 64; ++seed) gpus.insert(score(*p, c, 0, share(100), seed).pick.gpus[0]);
  EXPECT_EQ(gpus.size(), 4u) << "a sharing task goes to a uniformly random GPU with room";
  EXPECT_EQ(score(*p, c, 0, share(100), 7).score, score(*p, c, 0, share(100), 7).score);
  EXPECT_EQ(score(*p, c, 0, whole(2), 7).pick.gpus[1], 1) << "whole GPUs: lowest idle";
}

TEST(Policies, TiesGoToTheLowerNodeRank) {
  ClusterState c;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.add_node(node_spec("n" + std::to_string(i), "T4", 2)).ok());
  for (const char* name : {"best-fit", "dotprod", "gpu-packing", "fgd", "tessera"}) {
    auto p = policy(name);
    p->prepare(WorkloadProfile{{{whole(1), 1}}});
    PlacementEngine e(*p, EngineOptions{1, {2, 0, 1}});  // node 1 has rank 0
    auto r = e.place(c, gang(1, whole(1)));
    ASSERT_EQ(r.outcome, Outcome::kPlaced) << name;
    EXPECT_EQ(r.tasks[0].node.value, 1u) << name;
  }
}

TEST(Fgd, TypicalShapesCover95PercentWithoutMemory) {
  auto shape = [](int64_t cpu, int64_t milli, int64_t mem, int64_t count) {
    TaskRequest t = milli == 0 ? whole(0, cpu, mem) : milli < 1000 ? share(milli, cpu, mem) : whole(1, cpu, mem);
    return WorkloadShape{t, count};
  };
  WorkloadProfile prof{{shape(1000, 500, 1, 30), shape(1000, 500, 2, 20),  // same key: memory differs
                        shape(4000, 1000, 1, 30), shape(0, 0, 1, 10),      // CPU 0 counts as 100
                        shape(1000, 300, 1, 5), shape(2000, 300, 1, 5)}};   // tie: larger CPU first
  policies::FragModel m;
  m.build(prof);
  ASSERT_EQ(m.shapes().size(), 4u);  // 50 + 30 + 10 = 90 < 95, + 5 reaches 95
  EXPECT_EQ(m.shapes()[0].count, 50);
  EXPECT_EQ(m.shapes()[0].milli, 500);
  EXPECT_EQ(m.shapes()[2].cpu, 100);
  EXPECT_EQ(m.shapes()[3].cpu, 2000);
  EXPECT_EQ(m.total(), 95);
}

TEST(Fgd, ScoreIsQuantisedSigmoidAndPicksTheFirstBestGpu) {
  ClusterState c = one_node(32000, 2);
  occupy(c, 0, share(400));  // GPU 0: 600 free, GPU 1: idle
  auto p = policy("fgd");
  p->prepare(WorkloadProfile{{{share(500), 1}}});
  // On GPU 1: free {600, 500}, nothing below 500 -> delta 0 -> 50. On GPU 0: free {100, 1000}: the
  // 100 left is a fragment -> delta -100 -> int(100 * sigmoid(-0.1)) = 47. Best fit would take GPU 0.
  const NodeChoice ch = score(*p, c, 0, share(500));
  EXPECT_EQ(ch.score, 50);
  EXPECT_EQ(ch.pick.gpus[0], 1);
  EXPECT_EQ(score(*policy("best-fit"), c, 0, share(500)).pick.gpus[0], 0);
  // A whole GPU: free {600, 0}: the 600 stays usable -> delta 0 -> 50.
  EXPECT_EQ(score(*p, c, 0, whole(1)).score, 50);
  // The CPU term: taking CPU so that the typical task no longer fits makes all idle milli fragment.
  p->prepare(WorkloadProfile{{{share(500, 20000), 1}}});
  // before: fits (32000 free) -> 0; after 16000 CPU: lacks CPU -> 1600 -> int(100*sigmoid(-1.6)) = 16
  EXPECT_EQ(score(*p, c, 0, whole(0, 16000)).score, 16);
}

TEST(Tessera, MigSlotKeepsA3gCreatable) {
  NodeSpec s = node_spec("m", "A100-80GB", 2);
  s.mig_gpus = {0, 1};
  ClusterState c;
  ASSERT_TRUE(c.add_node(s).ok());
  auto mig_at = [](int gpu, int start) {
    GpuPick p;
    p.add(uint16_t(gpu));
    p.mig_start = int8_t(start);
    p.mig_create = true;
    return p;
  };
  GpuPick p;
  p = mig_at(0, 0), occupy(c, 0, mig("3g"), &p);  // GPU 0: slices 0-3 used, a 3g still fits at 4
  p = mig_at(1, 0), occupy(c, 0, mig("1g"), &p);  // GPU 1: slices 0, 2-3 used; slice 1 free,
  p = mig_at(1, 2), occupy(c, 0, mig("2g"), &p);  //        and a 3g still fits at 4
  // First fit puts a 1g on GPU 0 at slice 4 and loses GPU 0's 3g; tessera uses GPU 1's slice 1.
  GpuPick ff;
  ASSERT_TRUE(pick_mig_first_fit(c.node(NodeId(0)), mig("1g"), ff));
  EXPECT_EQ(ff.gpus[0], 0);
  EXPECT_EQ(ff.mig_start, 4);
  auto t = policy("tessera");
  t->prepare(WorkloadProfile{{{mig("3g"), 10}, {mig("1g"), 10}}});
  const NodeChoice ch = score(*t, c, 0, mig("1g"));
  EXPECT_EQ(ch.pick.gpus[0], 1);
  EXPECT_EQ(ch.pick.mig_start, 1);
  EXPECT_TRUE(ch.pick.mig_create);
  occupy(c, 0, mig("1g"), &ch.pick);
  for (const Gpu& g : c.node(NodeId(0)).gpus)
    EXPECT_EQ(g.mig.creatable_count(*g.model->find_profile("3g")), 1) << "GPU " << g.index;

  // An idle existing instance of the profile is reused before anything is created.
  NodeSpec s2 = node_spec("m2", "A100-80GB", 1);
  s2.mig_gpus = {0};
  ClusterState c2;
  ASSERT_TRUE(c2.add_node(s2).ok());
  p = mig_at(0, 6);
  TaskPlacement tp = make_placement(c2.node(NodeId(0)), mig("1g"), p);
  ASSERT_TRUE(c2.apply(tp).ok());
  ASSERT_TRUE(c2.release(tp).ok());  // the instance at slice 6 stays, idle
  const NodeChoice reuse = score(*t, c2, 0, mig("1g"));
  EXPECT_FALSE(reuse.pick.mig_create);
  EXPECT_EQ(reuse.pick.mig_start, 6);
}

TEST(Tessera, WholeGpuSetsFollowNvLink) {
  auto t = policy("tessera");
  t->prepare(WorkloadProfile{{{whole(2), 1}}});
  NodeSpec pairs = node_spec("pairs", "V100-16GB", 8);
  pairs.topology = std::make_shared<NodeTopology>(NodeTopology::nvlink_pairs(8, 2));
  ClusterState c;
  ASSERT_TRUE(c.add_node(pairs).ok());
  ASSERT_TRUE(c.add_node(node_spec("switch", "V100-16GB", 8)).ok());  // NVSwitch by default
  for (uint32_t n : {0u, 1u}) {
    GpuPick busy;
    busy.add(0);
    busy.add(3);
    occupy(c, n, whole(2), &busy);
  }
  // Bridged pairs: GPUs 1, 2 share no NVLink; the first intact pair is (4, 5).
  NodeChoice ch = score(*t, c, 0, whole(2));
  EXPECT_EQ(std::set<int>(ch.pick.gpus.begin(), ch.pick.gpus.begin() + ch.pick.count), (std::set<int>{4, 5}));
  // One GPU: take the one whose partner is busy (1 or 2), keeping pairs intact.
  ch = score(*t, c, 0, whole(1));
  EXPECT_TRUE(ch.pick.gpus[0] == 1 || ch.pick.gpus[0] == 2) << ch.pick.gpus[0];
  // NVSwitch: every set is alike, so the lowest idle GPUs.
  ch = score(*t, c, 1, whole(2));
  EXPECT_EQ(ch.pick.gpus[0], 1);
  EXPECT_EQ(ch.pick.gpus[1], 2);
}

TEST(Tessera, CpuOnlyTasksGoWhereGpusAreUsedUp) {
  ClusterState c;
  ASSERT_TRUE(c.add_node(node_spec("idle", "T4", 2)).ok());
  ASSERT_TRUE(c.add_node(node_spec("full", "T4", 2)).ok());
  occupy(c, 1, whole(2));
  auto t = policy("tessera");
  t->prepare(WorkloadProfile{{{whole(1), 5}, {whole(0), 5}}});
  PlacementEngine e(*t, {});
  auto r = e.place(c, gang(1, whole(0, 1000)));
  ASSERT_EQ(r.outcome, Outcome::kPlaced);
  EXPECT_EQ(r.tasks[0].node.value, 1u);
}

TEST(Policies, SameSeedSamePlacements) {
  for (const std::string& name : policy_names()) {
    std::vector<std::vector<TaskPlacement>> runs;
    for (int rep = 0; rep < 2; ++rep) {
      ClusterState c;
      for (int i = 0; i < 6; ++i) ASSERT_TRUE(c.add_node(node_spec("n" + std::to_string(i), "T4", 4)).ok());
      auto p = policy(name);
      p->prepare(WorkloadProfile{{{share(300), 3}, {whole(1), 2}, {whole(0), 1}}});
      PlacementEngine e(*p, EngineOptions{42, {5, 3, 1, 0, 2, 4}});
      std::vector<TaskPlacement> out;
      for (int i = 0; i < 30; ++i) {
        const TaskRequest t = i % 3 == 0 ? share(100 + 70 * (i % 7)) : i % 3 == 1 ? whole(1 + i % 2) : whole(0, 3000);
        auto r = e.place_and_commit(c, gang(1, t, i + 1));
        for (auto& tp : r.tasks) out.push_back(tp);
      }
      EXPECT_TRUE(c.check_invariants().ok()) << name;
      runs.push_back(out);
    }
    EXPECT_EQ(runs[0], runs[1]) << name;
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Two 8-GPU nodes, alike but for CPU and memory (node 0 is first in rank).
ClusterState tight_and_roomy(int64_t cpu0, int64_t mem0, int64_t cpu1, int64_t mem1) {
  ClusterState c;
  EXPECT_TRUE(c.add_node(node_spec("tight", "T4", 8, {}, cpu0, mem0)).ok());
  EXPECT_TRUE(c.add_node(node_spec("roomy", "T4", 8, {}, cpu1, mem1)).ok());
  return c;
}

// Where a policy puts `t` (the engine scoring every node; ties go to node 0).
uint32_t placed_on(const std::string& name, const WorkloadProfile& prof, ClusterState c, const TaskRequest& t) {
  auto p = policy(name);
  p->prepare(prof);
  PlacementEngine engine(*p, EngineOptions{});
  Gang g;
  g.id = JobId(1);
  g.task = t;
  const PlacementResult r = engine.place_and_commit(c, g);
  EXPECT_EQ(r.outcome, Outcome::kPlaced) << name;
  return r.tasks.empty() ? 99 : r.tasks[0].node.value;
}

// A CPU-only task on the node whose free CPU its GPUs need (8 CPU per GPU for the workload's 1-GPU
// tasks: 16 cores carry 2 of 8 GPUs) would strand one more GPU; on the roomy node it strands none.
// FGD sees no difference (the 1-GPU shape still fits both after it) and keeps the rank's choice.
TEST(Tessera, CpuOnlyTasksGoWhereTheirCpuStrandsNoGpu) {
  const WorkloadProfile prof{{{whole(1, 8000), 80}, {whole(0, 8000), 20}}};
  const ClusterState c = tight_and_roomy(16000, 512 * 1024, 96000, 512 * 1024);
  EXPECT_EQ(placed_on("fgd", prof, c, whole(0, 8000)), 0u);
  EXPECT_EQ(placed_on("tessera", prof, c, whole(0, 8000)), 1u);
}

// Memory strands GPUs as CPU does: node 0 has memory for 2 of its 8 GPUs' tasks (64 GiB each).
// FGD ignores memory; Tessera keeps a memory-heavy CPU-only task off node 0.
TEST(Tessera, MemoryThatRunsOutFirstStrandsGpusToo) {
  const WorkloadProfile prof{{{whole(1, 1000, 65536), 80}, {whole(0, 1000, 65536), 20}}};
  const ClusterState c = tight_and_roomy(64000, 160 * 1024, 64000, 1024 * 1024);
  EXPECT_EQ(placed_on("fgd", prof, c, whole(0, 1000, 65536)), 0u);
  EXPECT_EQ(placed_on("tessera", prof, c, whole(0, 1000, 65536)), 1u);
}

// The fragment measure itself: 64 GiB per GPU task. 128 GiB free carry 2 of 8 GPUs, so 6 are
// stranded, a fragment all 100 typical tasks see; FGD sees none. Below 64 GiB the shape does not fit
// at all: every free GPU is its fragment (as FGD does for CPU), besides what is stranded.
TEST(Tessera, MemoryThatRunsOutStrandsGpusInTheFragmentMeasure) {
  const WorkloadProfile prof{{{whole(1, 1000, 65536), 100}}};
  policies::FragModel m, fgd;
  m.build(prof, 95, true);
  fgd.build(prof, 95, false);
  ClusterState c;
  ASSERT_TRUE(c.add_node(node_spec("a", "T4", 8, {}, 64000, 128 * 1024)).ok());
  ASSERT_TRUE(c.add_node(node_spec("b", "T4", 8, {}, 64000, 600 * 1024)).ok());
  ASSERT_TRUE(c.add_node(node_spec("c", "T4", 8, {}, 64000, 60 * 1024)).ok());
  EXPECT_EQ(fgd.fragment(c.node(NodeId(0))), 0);
  EXPECT_EQ(m.fragment(c.node(NodeId(0))), 100 * 6000);
  EXPECT_EQ(m.fragment(c.node(NodeId(1))), 0);
  EXPECT_EQ(fgd.fragment(c.node(NodeId(2))), 0);
  EXPECT_EQ(m.fragment(c.node(NodeId(2))), 100 * 8000 + 100 * (8000 - 60 * 1024 * 1000 / 65536));
}

// One node with 128 cores and three with 96, 8 GPUs each; a workload of one 8-GPU task with 120
// cores (it fits only the first node) to 40 one-GPU tasks with 12 cores.
ClusterState one_rich_three_plain() {
  ClusterState c;
  EXPECT_TRUE(c.add_node(node_spec("rich", "T4", 8, {}, 128000, 1024 * 1024)).ok());
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(c.add_node(node_spec("plain" + std::to_string(i), "T4", 8, {}, 96000, 512 * 1024)).ok());
  return c;
}
WorkloadProfile rich_shape_profile() { return WorkloadProfile{{{whole(8, 120000), 1}, {whole(1, 12000), 40}}}; }

// The 120-core shape fits 8 of the 32 GPUs, so it is restricted. Its demand, scaled to the cluster
// (8,000 of 48,000 milli of demand, on 32,000 of capacity), lies on those 8 GPUs: 666 per mille
// each. The one-GPU shape fits everywhere and adds nothing; without node kinds nothing is known.
TEST(Scarcity, PressureIsTheDemandOfShapesThatFitFewNodesPerGpu) {
  const ClusterState c = one_rich_three_plain();
  policies::FragModel m;
  m.build(rich_shape_profile(), 100, true);
  policies::Scarcity s;
  s.build(m.shapes(), node_kinds(c));
  ASSERT_EQ(node_kinds(c).size(), 2u);
  EXPECT_EQ(node_kinds(c)[1].count, 3);
  EXPECT_EQ(s.pressure(c.node(NodeId(0))), 666);
  EXPECT_EQ(s.pressure(c.node(NodeId(1))), 0);
  EXPECT_EQ(s.pressure(c.node(NodeId(3))), 0);
  // A shape naming a model no node has fits nowhere: it adds no pressure of its own, but its demand
  // counts in the total (8,000 of 58,000).
  WorkloadProfile named = rich_shape_profile();
  TaskRequest a100 = whole(1, 1000);
  a100.gpu_models = {"A100-80GB"};
  named.shapes.push_back({a100, 10});
  m.build(named, 100, true);
  s.build(m.shapes(), node_kinds(c));
  EXPECT_EQ(s.pressure(c.node(NodeId(0))), 8000LL * 32000 * 1000 / (58000LL * 8000));
  EXPECT_EQ(s.pressure(c.node(NodeId(2))), 0);
  s.build(m.shapes(), {});
  EXPECT_EQ(s.pressure(c.node(NodeId(0))), 0);
  EXPECT_TRUE(s.by_kind().empty());
}

// A CPU-hungry one-GPU task strands no GPU on the 128-core node and some on a 96-core one, so the
// fragment measure alone sends it to the 128-core node, the only one the 8-GPU shape fits. With the
// cluster's node kinds in the profile, Tessera leaves that node to the shape that needs it.
TEST(Tessera, ATaskThatFitsAnywhereLeavesTheNodesARestrictedShapeNeeds) {
  const ClusterState c = one_rich_three_plain();
  const TaskRequest hungry = whole(1, 16000);
  EXPECT_EQ(placed_on("tessera", rich_shape_profile(), c, hungry), 0u);
  WorkloadProfile with_nodes = rich_shape_profile();
  with_nodes.nodes = node_kinds(c);
  EXPECT_NE(placed_on("tessera", with_nodes, c, hungry), 0u);
  // A task of the restricted shape still goes to the one node it fits.
  EXPECT_EQ(placed_on("tessera", with_nodes, c, whole(8, 120000)), 0u);
}

// Four 8-GPU, 128-core nodes; nodes 0-2 hold a task of 2 GPUs and 48 cores (6 GPUs, 80 cores left),
// node 3 is untouched. The workload: one-GPU tasks with 12 cores, and one 8-GPU task in 97.
ClusterState three_touched_one_untouched() {
  ClusterState c;
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(c.add_node(node_spec("n" + std::to_string(i), "T4", 8, {}, 128000, 768 * 1024)).ok());
  for (uint32_t i = 0; i < 3; ++i) occupy(c, i, whole(2, 48000));
  return c;
}
WorkloadProfile one_in_97_whole_node() { return WorkloadProfile{{{whole(1, 12000), 96}, {whole(8, 64000), 1}}}; }

// Reserve for `prof` on `c`'s node kinds, with Scarcity from the workload's
// multi-resource typical shapes.
policies::Reserve reserve_of(const ClusterState& c, WorkloadProfile prof) {
  prof.nodes = node_kinds(c);
  policies::FragModel m;
  m.build(prof, 100, true);
  policies::Scarcity s;
  s.build(m.shapes(), prof.nodes);
  policies::Reserve r;
  r.build(prof, s);
  return r;
}

// The 8-GPU shape fits only 8-GPU nodes, so it needs an untouched one: at the cluster's capacity
// (32,000 of 104,000 milli of demand) it is 0.31 pods over 4 nodes, 76 per mille of them. A 4-GPU
// shape fits a half-used node and keeps none. Where a 16-GPU node exists, the 8-GPU shape no
// longer needs a whole node. A restricted shape keeps its pressure's share.
TEST(Reserve, KeepsTheShareOfNodesThatWholeNodeShapesNeed) {
  const ClusterState c = three_touched_one_untouched();
  WorkloadProfile prof = one_in_97_whole_node();
  prof.nodes = node_kinds(c);
  policies::Scarcity none;
  policies::Reserve r;
  r.build(prof, none);
  ASSERT_EQ(r.whole_by_kind().size(), 1u);
  EXPECT_EQ(r.whole_by_kind()[0], 1LL * 32000 * 1000 / (104000LL * 4));
  EXPECT_EQ(r.restricted_by_kind()[0], 0);

  WorkloadProfile half = prof;
  half.shapes[1].task = whole(4, 32000);
  r.build(half, none);
  EXPECT_TRUE(r.whole_by_kind().empty()) << "a 4-GPU shape keeps no node";

  ClusterState big = c;
  ASSERT_TRUE(big.add_node(node_spec("big", "T4", 16, {}, 256000, 1536 * 1024)).ok());
  WorkloadProfile with_big = one_in_97_whole_node();
  with_big.nodes = node_kinds(big);
  r.build(with_big, none);
  EXPECT_TRUE(r.whole_by_kind().empty()) << "the 8-GPU shape fits half of a 16-GPU node";

  // Without node kinds nothing is kept.
  r.build(one_in_97_whole_node(), none);
  EXPECT_FALSE(r.keeps(c.node(NodeId(3)), whole(1, 24000)));

  // Restricted shapes: the rich node's pressure (666) is its share; the 8-GPU 120-core shape is also
  // a whole-node shape there (1 pod of 8,000 of 48,000 milli, at 32,000 of capacity, on 1 node).
  const ClusterState rich = one_rich_three_plain();
  r = reserve_of(rich, rich_shape_profile());
  ASSERT_EQ(r.restricted_by_kind().size(), 2u);
  EXPECT_EQ(r.restricted_by_kind()[0], 666);
  EXPECT_EQ(r.restricted_by_kind()[1], 0);
  EXPECT_EQ(r.whole_by_kind()[0], 666);
  EXPECT_EQ(r.whole_by_kind()[1], 0);
}

// A node is kept only while untouched, and only if its slot falls below its kind's share. A task
// that takes every GPU of the node whole is not kept off a node kept for whole-node shapes; a node
// kept for restricted shapes is kept from every task.
TEST(Reserve, KeepsOnlyUntouchedNodesAndNotFromTheTaskTheyAreKeptFor) {
  ClusterState c = three_touched_one_untouched();
  WorkloadProfile prof = one_in_97_whole_node();
  prof.nodes = node_kinds(c);
  policies::Reserve r;
  r.build(prof, policies::Scarcity{});
  const int64_t share = r.whole_by_kind().at(0);
  ASSERT_LT(policies::Reserve::slot(NodeId(3)), share);
  ASSERT_GE(policies::Reserve::slot(NodeId(0)), share);
  EXPECT_TRUE(r.keeps(c.node(NodeId(3)), whole(1, 24000)));
  EXPECT_TRUE(r.keeps(c.node(NodeId(3)), whole(4, 24000)));
  EXPECT_TRUE(r.keeps(c.node(NodeId(3)), whole(0, 4000))) << "CPU-only tasks take CPU the 8 GPUs need";
  EXPECT_FALSE(r.keeps(c.node(NodeId(3)), whole(8, 64000))) << "the task it is kept for";
  EXPECT_FALSE(r.keeps(c.node(NodeId(0)), whole(1, 24000))) << "touched";
  occupy(c, 3, whole(0, 1000));
  EXPECT_FALSE(r.keeps(c.node(NodeId(3)), whole(1, 24000))) << "touched by a CPU-only task";

  const ClusterState rich = one_rich_three_plain();
  r = reserve_of(rich, rich_shape_profile());
  ASSERT_LT(policies::Reserve::slot(NodeId(0)), 666);
  EXPECT_TRUE(r.keeps(rich.node(NodeId(0)), whole(8, 120000))) << "kept for restricted shapes: from every task";
  EXPECT_FALSE(r.keeps(rich.node(NodeId(1)), whole(1, 12000))) << "no share";
}

// A CPU-hungry one-GPU task strands GPUs on a half-used node and nothing on an untouched one, so
// the fragment measure opens the untouched node, which the 8-GPU shape needs. With the cluster's
// node kinds, Tessera keeps it (its slot is within the share) and uses a touched node; a task that
// fits no touched node, and the 8-GPU task, still go there.
TEST(Tessera, ATaskThatCanGoElsewhereLeavesAnUntouchedNodeKeptForWholeNodeShapes) {
  const ClusterState c = three_touched_one_untouched();
  const TaskRequest hungry = whole(1, 24000);
  EXPECT_EQ(placed_on("tessera", one_in_97_whole_node(), c, hungry), 3u);
  WorkloadProfile with_nodes = one_in_97_whole_node();
  with_nodes.nodes = node_kinds(c);
  EXPECT_EQ(placed_on("tessera", with_nodes, c, hungry), 0u);
  EXPECT_EQ(placed_on("tessera", with_nodes, c, whole(1, 100000)), 3u) << "fits nowhere else";
  EXPECT_EQ(placed_on("tessera", with_nodes, c, whole(8, 64000)), 3u);
}

// A shape that names T4 cannot use the V100 node. FGD as published counts that node's idle GPUs as
// the shape's fragments, so any task placed there seems to remove fragmentation: FGD sends a one-GPU
// task to the V100 node although the rank puts the T4 node first. Tessera's measure leaves the shape
// out of the V100 node: both nodes score alike, and the rank decides.
TEST(Tessera, AShapeNamingAnotherModelDoesNotDrawTasksToARareModel) {
  ClusterState c;
  ASSERT_TRUE(c.add_node(node_spec("common", "T4", 8, {}, 96000, 512 * 1024)).ok());
  ASSERT_TRUE(c.add_node(node_spec("rare", "V100", 8, {}, 96000, 512 * 1024)).ok());
  TaskRequest t4_only = whole(1, 8000);
  t4_only.gpu_models = {"T4"};
  const WorkloadProfile prof{{{whole(1, 8000), 10}, {t4_only, 100}}};
  const TaskRequest task = whole(1, 8000);
  EXPECT_EQ(placed_on("fgd", prof, c, task), 1u);
  EXPECT_EQ(placed_on("tessera", prof, c, task), 0u);
  auto p = policy("tessera");
  p->prepare(prof);
  EXPECT_EQ(score(*p, c, 0, task).score, score(*p, c, 1, task).score);
}

// GPU 0 has 530 milli free, GPU 1 has 630, GPU 2 is idle; a 470-milli share arrives. FGD's measure
// prefers GPU 0: the 60 left is a smaller fragment than 160. But only the workload's rarest share
// (50) fits 60 milli, while its typical 160 fits the 160 left: Tessera counts the dead gap twice and
// takes GPU 1. When 50-milli shares are common, 60 milli is no dead gap and GPU 0 is taken.
TEST(Tessera, ASharePrefersAGapATypicalShareFitsToADeadOne) {
  ClusterState c = one_node(64000, 3);
  GpuPick g0, g1;
  g0.add(0);
  g1.add(1);
  occupy(c, 0, share(470), &g0);
  occupy(c, 0, share(370), &g1);
  const WorkloadProfile rare_50{{{share(470), 50}, {share(370), 10}, {share(160), 10}, {share(50), 1}, {whole(1), 30}}};
  const WorkloadProfile common_50{{{share(470), 50}, {share(370), 10}, {share(160), 10}, {share(50), 30}, {whole(1), 30}}};
  auto fgd = policy("fgd");
  fgd->prepare(rare_50);
  EXPECT_EQ(score(*fgd, c, 0, share(470)).pick.gpus[0], 0);
  auto t = policy("tessera");
  t->prepare(rare_50);
  EXPECT_EQ(score(*t, c, 0, share(470)).pick.gpus[0], 1);
  t->prepare(common_50);
  EXPECT_EQ(score(*t, c, 0, share(470)).pick.gpus[0], 0);
}

}  // namespace
}  // namespace tessera
