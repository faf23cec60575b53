// Tests for the dynamic MIG layout planner: conversions of idle GPUs only, layouts valid per the
// catalog, protection of pending whole-GPU demand, reverse conversion, hysteresis, the per-cycle cap,
// packing of mixed profiles, and determinism. Clusters are built by hand.
#include "core/sched/mig_planner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/placement/fit.h"
#include "core/request.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

// Applies a planned layout to an empty MigLayout of the model, instance by instance at its explicit
// start; the catalog's rules decide. Returns the layout (check() must pass).
MigLayout apply_layout(const GpuModel& model, const std::vector<MigInstance>& layout) {
  MigLayout l(&model);
  for (const MigInstance& m : layout) {
    const MigProfile* p = model.find_profile_id(m.profile_id);
    EXPECT_NE(p, nullptr) << "profile id " << m.profile_id;
    if (!p) continue;
    EXPECT_EQ(m.size, p->memory_slices);
    EXPECT_FALSE(m.in_use);
    Status s = l.create(*p, m.start);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  EXPECT_TRUE(l.check().ok());
  EXPECT_EQ(l.instances().size(), layout.size());
  return l;
}

int count_profile(const GpuModel& model, const std::vector<MigInstance>& layout, const std::string& name) {
  const MigProfile* p = model.find_profile(name);
  return int(std::count_if(layout.begin(), layout.end(), [&](const MigInstance& m) { return p && m.profile_id == p->id; }));
}

// Puts a task on the node with the default picker; returns the placement (for release).
TaskPlacement place(ClusterState& c, NodeId n, const TaskRequest& t) {
  GpuPick pick;
  EXPECT_TRUE(pick_default(c.node(n), t, pick));
  TaskPlacement p = make_placement(c.node(n), t, pick);
  Status s = c.apply(p);
  EXPECT_TRUE(s.ok()) << s.message();
  return p;
}

NodeSpec mig_node(std::string name, std::string model, int gpus, std::vector<int> mig) {
  NodeSpec s = node_spec(std::move(name), std::move(model), gpus);
  s.mig_gpus = std::move(mig);
  return s;
}

MigDemand D(std::string profile, int count, std::string model = "") {
  MigDemand d;
  d.profile = std::move(profile);
  d.count = count;
  d.gpu_model = std::move(model);
  return d;
}

const GpuModel& a100_40() { return **GpuCatalog::builtin().find("A100-40GB"); }

MigPlanInput input(const ClusterState& c, std::vector<MigDemand> demand, int whole = 0, Time now = 100000) {
  MigPlanInput in;
  in.cluster = &c;
  in.mig_demand = std::move(demand);
  in.whole_gpu_demand = whole;
  in.now = now;
  return in;
}

TEST(MigPlanner, FloodConvertsOnlyIdleWholeGpusWithValidLayouts) {
  ClusterState c;
  NodeId a = *c.add_node(node_spec("a", "A100-40GB", 4));
  NodeId b = *c.add_node(node_spec("b", "A100-40GB", 2));
  NodeId t4 = *c.add_node(node_spec("t4", "T4", 4));
  place(c, a, whole(1));     // a/0 held whole
  place(c, b, share(500));   // b/0 shared
  const int held_before = c.node(a).idle_gpus;
  ASSERT_EQ(held_before, 3);

  MigPlannerConfig cfg;
  auto changes = plan_mig_layouts(input(c, {D("1g", 20)}), cfg);
  // 20 x 1g.5gb: 7 per A100-40GB GPU, so three GPUs. The node with the fewest idle GPUs goes first.
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{b, 1}));
  EXPECT_EQ(changes[1].gpu, (GpuRef{a, 1}));
  EXPECT_EQ(changes[2].gpu, (GpuRef{a, 2}));
  int instances = 0;
  for (const GpuLayoutChange& ch : changes) {
    EXPECT_TRUE(ch.enable_mig);
    EXPECT_NE(ch.gpu.node, t4) << "T4 is not MIG-capable";
    EXPECT_FALSE(ch.gpu == (GpuRef{a, 0})) << "held whole";
    EXPECT_FALSE(ch.gpu == (GpuRef{b, 0})) << "shared";
    MigLayout l = apply_layout(a100_40(), ch.layout);
    EXPECT_EQ(count_profile(a100_40(), ch.layout, "1g.5gb"), 7);
    instances += int(ch.layout.size());
    EXPECT_EQ(ch.ready_at, 100000 + cfg.reconfigure_cost);
  }
  EXPECT_GE(instances, 20);
  EXPECT_NE(changes[0].reason.find("20 pending 1g.5gb"), std::string::npos) << changes[0].reason;
  EXPECT_NE(changes[0].reason.find("GPU 1 of node b was idle whole"), std::string::npos) << changes[0].reason;
}

TEST(MigPlanner, NoDemandNoChange) {
  ClusterState c;
  (void)*c.add_node(node_spec("a", "A100-40GB", 4));
  EXPECT_TRUE(plan_mig_layouts(input(c, {}), {}).empty());
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("1g", 0)}), {}).empty());
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("5g", 3)}), {}).empty()) << "no such profile";
}

TEST(MigPlanner, NonMigModelsAreNeverConverted) {
  ClusterState c;
  (void)*c.add_node(node_spec("t4", "T4", 4));
  (void)*c.add_node(node_spec("v", "V100-32GB", 4));
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("1g", 5)}), {}).empty());
}

TEST(MigPlanner, PendingWholeDemandIsProtected) {
  ClusterState c;
  (void)*c.add_node(node_spec("a", "A100-40GB", 2));
  // Training waits for 2 GPUs: both idle GPUs stay whole.
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("1g", 5)}, 2), {}).empty());
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("1g", 5)}, 5), {}).empty());
  // Training waits for 1: one GPU may go.
  auto changes = plan_mig_layouts(input(c, {D("1g", 14)}, 1), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes[0].enable_mig);
}

TEST(MigPlanner, NonMigGpusDoNotCountAsCoveringWholeDemand) {
  ClusterState c;
  (void)*c.add_node(node_spec("t4", "T4", 4));
  (void)*c.add_node(node_spec("a", "A100-40GB", 1));
  // The pending gang might need the A100; idle T4s do not free it for MIG.
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("1g", 3)}, 1), {}).empty());
}

TEST(MigPlanner, FreeSlicesOnMigGpusAbsorbDemandWithoutChanges) {
  ClusterState c;
  NodeId m = *c.add_node(mig_node("m", "A100-40GB", 2, {0}));
  place(c, m, mig("3g"));  // m/0: one 3g in use, 4 slices free
  // One more 3g (or two 2g... here a 3g) fits on the free slices: no layout change needed.
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("3g", 1)}), {}).empty());
  // Two more do not: the idle whole GPU m/1 is converted.
  auto changes = plan_mig_layouts(input(c, {D("3g", 2)}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{m, 1}));
  EXPECT_GE(count_profile(a100_40(), changes[0].layout, "3g"), 1);
  apply_layout(a100_40(), changes[0].layout);
}

TEST(MigPlanner, IdleInstancesServeDemandFirst) {
  ClusterState c;
  NodeId m = *c.add_node(mig_node("m", "A100-40GB", 2, {0}));
  TaskPlacement p = place(c, m, mig("7g"));
  ASSERT_TRUE(c.release(p).ok());  // m/0: an idle 7g
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("7g", 1)}), {}).empty());
}

TEST(MigPlanner, IdleUselessMigLayoutIsReplaced) {
  ClusterState c;
  NodeId m = *c.add_node(mig_node("m", "A100-40GB", 2, {0, 1}));
  TaskPlacement idle7 = place(c, m, mig("7g"));   // m/0
  TaskPlacement busy7 = place(c, m, mig("7g"));   // m/1, stays in use
  ASSERT_EQ(busy7.gpus[0].gpu, 1);
  ASSERT_TRUE(c.release(idle7).ok());
  auto changes = plan_mig_layouts(input(c, {D("1g", 3)}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{m, 0})) << "only the idle MIG GPU; the busy one is never touched";
  EXPECT_TRUE(changes[0].enable_mig);
  EXPECT_EQ(count_profile(a100_40(), changes[0].layout, "1g"), 7) << "3 wanted, the rest filled with 1g";
  apply_layout(a100_40(), changes[0].layout);
  EXPECT_NE(changes[0].reason.find("7g.40gb@0"), std::string::npos) << changes[0].reason;
}

TEST(MigPlanner, ReverseConversionWhenTrainingWaits) {
  ClusterState c;
  NodeId m = *c.add_node(mig_node("m", "A100-40GB", 3, {0, 1, 2}));
  place(c, m, mig("1g"));  // m/0 has an instance in use
  auto changes = plan_mig_layouts(input(c, {}, 2), {});
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{m, 1}));
  EXPECT_EQ(changes[1].gpu, (GpuRef{m, 2}));
  for (const auto& ch : changes) {
    EXPECT_FALSE(ch.enable_mig);
    EXPECT_TRUE(ch.layout.empty());
    EXPECT_NE(ch.reason.find("2 pending whole GPUs and only 0 idle"), std::string::npos) << ch.reason;
  }
  // Only as many as training lacks.
  EXPECT_EQ(plan_mig_layouts(input(c, {}, 1), {}).size(), 1u);
  // A MIG GPU that a pending MIG request uses stays: of two 3g, one fits next to m/0's 1g and the
  // other is created on m/1's free slices, so only m/2 turns back.
  changes = plan_mig_layouts(input(c, {D("3g", 2)}, 2), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{m, 2}));
  EXPECT_FALSE(changes[0].enable_mig);
  // No whole demand beyond the idle whole GPUs: nothing turns back.
  EXPECT_TRUE(plan_mig_layouts(input(c, {}, 0), {}).empty());
}

TEST(MigPlanner, ChangesInProgressAreNotPlannedTwice) {
  // GPU 0 is becoming 7 x 1g (applied, not ready yet): two pending 1g are covered by it, so no other
  // GPU is converted, and GPU 0 itself is not changed again even with no hysteresis.
  ClusterState c;
  NodeId a = *c.add_node(node_spec("a", "A100-40GB", 4));
  std::vector<MigInstance> seven;
  for (int i = 0; i < 7; ++i) {
    MigInstance m;
    m.profile_id = a100_40().find_profile("1g.5gb")->id;
    m.start = uint8_t(i);
    m.size = 1;
    seven.push_back(m);
  }
  ASSERT_TRUE(c.set_mig_layout(GpuRef{a, 0}, true, seven).ok());
  ASSERT_TRUE(c.set_health(GpuRef{a, 0}, GpuHealth::kReconfiguring).ok());
  MigPlannerConfig cfg;
  cfg.min_layout_age = 0;
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("1g", 2)}), cfg).empty());
  // More than it will hold: one more GPU, never GPU 0.
  auto more = plan_mig_layouts(input(c, {D("1g", 9)}), cfg);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_NE(more[0].gpu, (GpuRef{a, 0}));

  // The reverse: a GPU turning whole covers one pending whole GPU.
  ClusterState m;
  NodeId n = *m.add_node(mig_node("m", "A100-40GB", 2, {0, 1}));
  ASSERT_TRUE(m.set_mig_layout(GpuRef{n, 0}, false, {}).ok());
  ASSERT_TRUE(m.set_health(GpuRef{n, 0}, GpuHealth::kReconfiguring).ok());
  EXPECT_TRUE(plan_mig_layouts(input(m, {}, 1), cfg).empty());
  auto back = plan_mig_layouts(input(m, {}, 2), cfg);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].gpu, (GpuRef{n, 1}));
}

TEST(MigPlanner, HysteresisLeavesRecentlyChangedGpusAlone) {
  ClusterState c;
  NodeId a = *c.add_node(node_spec("a", "A100-40GB", 2));
  MigPlannerConfig cfg;
  cfg.min_layout_age = 600;
  MigPlanInput in = input(c, {D("1g", 14)}, 0, 10000);
  in.last_changed[GpuRef{a, 0}] = 10000 - 100;
  auto changes = plan_mig_layouts(in, cfg);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{a, 1}));
  in.last_changed[GpuRef{a, 0}] = 10000 - 600;  // old enough
  EXPECT_EQ(plan_mig_layouts(in, cfg).size(), 2u);

  // Reverse conversion respects it too.
  ClusterState m;
  NodeId n = *m.add_node(mig_node("m", "A100-40GB", 1, {0}));
  MigPlanInput back = input(m, {}, 1, 10000);
  back.last_changed[GpuRef{n, 0}] = 9999;
  EXPECT_TRUE(plan_mig_layouts(back, cfg).empty());
}

TEST(MigPlanner, AtMostMaxGpusPerCycle) {
  ClusterState c;
  (void)*c.add_node(node_spec("a", "A100-40GB", 8));
  (void)*c.add_node(node_spec("b", "A100-40GB", 2));
  MigPlannerConfig cfg;
  cfg.max_gpus_per_cycle = 3;
  auto changes = plan_mig_layouts(input(c, {D("1g", 70)}), cfg);
  EXPECT_EQ(changes.size(), 3u);
  cfg.max_gpus_per_cycle = 0;
  EXPECT_TRUE(plan_mig_layouts(input(c, {D("1g", 70)}), cfg).empty());
}

TEST(MigPlanner, MixedProfilesPackedOnOneGpu) {
  const GpuModel& m = a100_40();
  // 1 x 3g + 2 x 2g: 3g@4 + 2g@0 + 2g@2 uses all 8 memory and 7 compute slices.
  auto l = design_mig_layout(m, {{m.find_profile("3g"), 1}, {m.find_profile("2g"), 2}}, true);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].profile_id, 14);
  EXPECT_EQ(l[0].start, 0);
  EXPECT_EQ(l[1].profile_id, 14);
  EXPECT_EQ(l[1].start, 2);
  EXPECT_EQ(l[2].profile_id, 9);
  EXPECT_EQ(l[2].start, 4);
  apply_layout(m, l);

  // Through the planner: one idle GPU gets exactly that.
  ClusterState c;
  NodeId a = *c.add_node(node_spec("a", "A100-40GB", 2));
  auto changes = plan_mig_layouts(input(c, {D("2g", 2), D("3g", 1)}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{a, 0}));
  EXPECT_EQ(changes[0].layout, l);
}

TEST(MigPlanner, LargestProfilesFirstAndFreeSlicesFilled) {
  const GpuModel& m = a100_40();
  // 4g + 2 x 1g: 4g@0, 1g on the upper half, and the last free slice filled with the most-demanded 1g.
  auto l = design_mig_layout(m, {{m.find_profile("4g"), 1}, {m.find_profile("1g"), 2}}, true);
  MigLayout applied = apply_layout(m, l);
  EXPECT_EQ(count_profile(m, l, "4g"), 1);
  EXPECT_EQ(count_profile(m, l, "1g"), 3);
  EXPECT_EQ(applied.used_compute_slices(), 7);
  // Without fill, only what is asked.
  auto bare = design_mig_layout(m, {{m.find_profile("4g"), 1}, {m.find_profile("1g"), 2}}, false);
  EXPECT_EQ(bare.size(), 3u);
  // More asked than fits: the compute slices are maximised (4g + 3g, not 3g + 3g).
  auto big = design_mig_layout(m, {{m.find_profile("3g"), 2}, {m.find_profile("4g"), 1}}, false);
  MigLayout b = apply_layout(m, big);
  EXPECT_EQ(b.used_compute_slices(), 7);
  EXPECT_EQ(count_profile(m, big, "4g"), 1);
  EXPECT_EQ(count_profile(m, big, "3g"), 1);
  // A single 3g: the rest of the GPU becomes another 3g.
  auto one = design_mig_layout(m, {{m.find_profile("3g"), 1}}, true);
  EXPECT_EQ(count_profile(m, one, "3g"), 2);
  apply_layout(m, one);
}

TEST(MigPlanner, GpuModelRestrictionAndPerModelResolution) {
  ClusterState c;
  NodeId a40 = *c.add_node(node_spec("a40", "A100-40GB", 1));
  NodeId a80 = *c.add_node(node_spec("a80", "A100-80GB", 1));
  auto changes = plan_mig_layouts(input(c, {D("1g", 3, "A100-80GB")}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{a80, 0}));
  const GpuModel& m80 = **GpuCatalog::builtin().find("A100-80GB");
  EXPECT_EQ(count_profile(m80, changes[0].layout, "1g.10gb"), 7) << "1g resolves to 1g.10gb on the 80 GB part";
  apply_layout(m80, changes[0].layout);
  // Unrestricted: the first node in order.
  changes = plan_mig_layouts(input(c, {D("1g", 3)}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{a40, 0}));
}

// Pools: a request is planned for only on nodes whose pool kind it may use (the kPool fit check).
// The spot node has fewer idle GPUs, so it would come first without the pool rule.
TEST(MigPlanner, OnlyPoolsTheRequestMayUse) {
  ClusterState c;
  Pool spot;
  spot.name = "spot-a";
  spot.kind = PoolKind::kSpot;
  const PoolId spot_id = *c.add_pool(spot);
  NodeSpec s = node_spec("s", "A100-40GB", 1);
  s.pool = spot_id;
  const NodeId sn = *c.add_node(s);
  const NodeId on = *c.add_node(node_spec("o", "A100-40GB", 2));  // the default pool: owned
  ASSERT_EQ(c.node(sn).pool_kind, PoolKind::kSpot);
  ASSERT_EQ(c.node(on).pool_kind, PoolKind::kOwned);
  Gang g = gang(1, mig("1g.5gb"));
  g.kind = JobKind::kInference;
  const PoolKindMask inference = pool_kinds_for(g, PoolRules{});
  ASSERT_EQ(inference, pool_kind_bit(PoolKind::kOwned) | pool_kind_bit(PoolKind::kReserved));
  MigDemand d = D("1g", 3);
  d.pool_kinds = inference;

  auto changes = plan_mig_layouts(input(c, {d}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{on, 0}));
  EXPECT_EQ(count_profile(a100_40(), changes[0].layout, "1g.5gb"), 7);
  // Any pool: the spot node, fewest idle GPUs first.
  changes = plan_mig_layouts(input(c, {D("1g", 3)}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{sn, 0}));

  // Idle 1g instances on a spot MIG GPU do not serve the inference request: the owned GPU is changed.
  ClusterState c2;
  ASSERT_TRUE(c2.add_pool(spot).ok());
  NodeSpec sm = mig_node("s", "A100-40GB", 1, {0});
  sm.pool = spot_id;
  const NodeId sn2 = *c2.add_node(sm);
  const NodeId on2 = *c2.add_node(node_spec("o", "A100-40GB", 1));
  changes = plan_mig_layouts(input(c2, {D("1g", 7)}), {});  // any pool: fits the spot GPU's free slices
  EXPECT_TRUE(changes.empty());
  changes = plan_mig_layouts(input(c2, {d}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{on2, 0}));
  EXPECT_NE(changes[0].gpu.node, sn2);

  // Only a spot node: nothing the request may use, no plan.
  ClusterState only_spot;
  ASSERT_TRUE(only_spot.add_pool(spot).ok());
  NodeSpec s3 = node_spec("s", "A100-40GB", 4);
  s3.pool = spot_id;
  ASSERT_TRUE(only_spot.add_node(s3).ok());
  EXPECT_TRUE(plan_mig_layouts(input(only_spot, {d}), {}).empty());
  EXPECT_FALSE(plan_mig_layouts(input(only_spot, {D("1g", 3)}), {}).empty()) << "any pool: planned";
}

TEST(MigPlanner, UnhealthyAndUnschedulableGpusAreLeftAlone) {
  ClusterState c;
  NodeId a = *c.add_node(node_spec("a", "A100-40GB", 2));
  NodeId b = *c.add_node(node_spec("b", "A100-40GB", 1));
  ASSERT_TRUE(c.set_health(GpuRef{a, 0}, GpuHealth::kUnhealthy).ok());
  ASSERT_TRUE(c.set_schedulable(b, false).ok());
  auto changes = plan_mig_layouts(input(c, {D("1g", 30)}), {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].gpu, (GpuRef{a, 1}));
}

TEST(MigPlanner, Deterministic) {
  ClusterState c;
  NodeId a = *c.add_node(node_spec("a", "A100-40GB", 4));
  (void)*c.add_node(mig_node("m", "A100-80GB", 2, {0}));
  (void)*c.add_node(node_spec("h", "H100-80GB-SXM", 2));
  place(c, a, whole(1));
  std::vector<MigDemand> d = {D("1g", 9), D("3g", 3), D("2g", 2), D("4g", 1)};
  auto first = plan_mig_layouts(input(c, d), {});
  ASSERT_FALSE(first.empty());
  std::vector<MigDemand> r(d.rbegin(), d.rend());
  for (int rep = 0; rep < 3; ++rep) {
    auto again = plan_mig_layouts(input(c, rep == 1 ? r : d), {});
    ASSERT_EQ(again.size(), first.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(again[i].gpu, first[i].gpu);
      EXPECT_EQ(again[i].layout, first[i].layout);
      EXPECT_EQ(again[i].enable_mig, first[i].enable_mig);
      EXPECT_EQ(again[i].reason, first[i].reason);
    }
  }
  for (const auto& ch : first) apply_layout(*c.node(ch.gpu.node).gpus[ch.gpu.index].model, ch.layout);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

using namespace tessera::testing;

// Every profile of every MIG model wanted at once: the exhaustive search stays small (8 slices) and
// the result is valid and uses all compute slices.
TEST(MigPlanner, SearchOverAllProfilesOfEveryModel) {
  for (const std::string& name : GpuCatalog::builtin().names()) {
    const GpuModel& m = **GpuCatalog::builtin().find(name);
    if (!m.mig_capable()) continue;
    std::vector<std::pair<const MigProfile*, int>> wants;
    for (const MigProfile& p : m.mig_profiles) wants.emplace_back(&p, 7);
    auto l = design_mig_layout(m, wants, true);
    MigLayout applied(&m);
    for (const MigInstance& in : l) ASSERT_TRUE(applied.create(*m.find_profile_id(in.profile_id), in.start).ok()) << name;
    ASSERT_TRUE(applied.check().ok()) << name;
    EXPECT_EQ(applied.used_compute_slices(), m.compute_slices) << name;
  }
}

}  // namespace
}  // namespace tessera
