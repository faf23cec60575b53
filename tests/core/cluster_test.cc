#include "core/cluster.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "core/placement/fit.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

TEST(ClusterState, AddNodeValidatesFields) {
  ClusterState c;
  auto bad_model = c.add_node(node_spec("n0", "B9000", 8));
  ASSERT_FALSE(bad_model.ok());
  EXPECT_NE(bad_model.error().message.find("gpu_model"), std::string::npos);
  EXPECT_NE(bad_model.error().message.find("H100"), std::string::npos) << "error lists the known models";

  ASSERT_TRUE(c.add_node(node_spec("n0", "A100-80GB", 8)).ok());
  auto dup = c.add_node(node_spec("n0", "A100-80GB", 8));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("already defined"), std::string::npos);

  auto too_many = c.add_node(node_spec("n1", "T4", 17));
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message.find("gpus"), std::string::npos);

  NodeSpec no_mig = node_spec("n2", "T4", 2);
  no_mig.mig_gpus = {0};
  auto r = c.add_node(no_mig);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not support MIG"), std::string::npos);
}

TEST(ClusterState, PathMustMatchNetworkLevels) {
  ClusterState c(GpuCatalog::builtin(), NetworkLevels({"spine", "leaf"}));
  EXPECT_FALSE(c.add_node(node_spec("n0", "H100-80GB-SXM", 8, {"s0"})).ok());
  auto ok = c.add_node(node_spec("n0", "H100-80GB-SXM", 8, {"s0", "l0"}));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(c.node(*ok).path.size(), 2u);
}

TEST(ClusterState, NvlinkModelsDefaultToNvswitchTopology) {
  ClusterState c;
  auto a = c.add_node(node_spec("dgx", "H100-80GB-SXM", 8));
  auto b = c.add_node(node_spec("t4", "T4", 4));
  EXPECT_EQ(c.node(*a).topology->kind_name(), "nvswitch");
  EXPECT_EQ(c.node(*b).topology->kind_name(), "pcie");
}

TEST(ClusterState, SharesNeverExceedOneGpu) {
  ClusterState c;
  NodeId n = *c.add_node(node_spec("n0", "T4", 1));
  GpuPick pick;
  const Node& node = c.node(n);
  ASSERT_TRUE(pick_default(node, share(600), pick));
  ASSERT_TRUE(c.apply(make_placement(c.node(n), share(600), pick)).ok());
  EXPECT_EQ(c.node(n).free_gpu_milli, 400);
  EXPECT_EQ(check_fit(c.node(n), share(500)), Misfit::kGpus);
  TaskPlacement over = make_placement(c.node(n), share(500), pick);
  Status s = c.apply(over);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exceeds"), std::string::npos);
  EXPECT_TRUE(c.check_invariants().ok());
  EXPECT_EQ(c.allocated_gpu_milli(), 600);
}

TEST(ClusterState, WholeGpuCannotBeSharedAndReleaseRestores) {
  ClusterState c;
  NodeId n = *c.add_node(node_spec("n0", "A100-80GB", 2));
  GpuPick pick;
  ASSERT_TRUE(pick_default(c.node(n), whole(2), pick));
  TaskPlacement p = make_placement(c.node(n), whole(2), pick);
  const uint64_t gen = c.node(n).generation;
  ASSERT_TRUE(c.apply(p).ok());
  EXPECT_NE(c.node(n).generation, gen);
  EXPECT_EQ(c.node(n).idle_gpus, 0);
  EXPECT_EQ(check_fit(c.node(n), share(100)), Misfit::kGpus);
  EXPECT_EQ(c.node(n).task_classes[2], 1);
  ASSERT_TRUE(c.release(p).ok());
  EXPECT_EQ(c.node(n).idle_gpus, 2);
  EXPECT_EQ(c.node(n).task_classes[2], 0);
  EXPECT_FALSE(c.release(p).ok()) << "double release is refused";
  EXPECT_TRUE(c.check_invariants().ok());
}

TEST(ClusterState, CpuAndMemoryAreNeverOverAllocated) {
  ClusterState c;
  NodeId n = *c.add_node(node_spec("n0", "", 0, {}, 4000, 8192));
  TaskRequest t = whole(0, 3000, 4096);
  GpuPick pick;
  ASSERT_TRUE(c.apply(make_placement(c.node(n), t, pick)).ok());
  EXPECT_EQ(check_fit(c.node(n), t), Misfit::kCpu);
  Status s = c.apply(make_placement(c.node(n), t, pick));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CPU"), std::string::npos);
  EXPECT_EQ(check_fit(c.node(n), whole(0, 5000, 1)), Misfit::kNeverCpu);
}

TEST(ClusterState, MigInstancesAreCreatedOnApplyAndStayIdleOnRelease) {
  ClusterState c;
  NodeSpec s = node_spec("n0", "A100-40GB", 1);
  s.mig_gpus = {0};
  NodeId n = *c.add_node(s);
  GpuPick pick;
  ASSERT_TRUE(pick_default(c.node(n), mig("3g"), pick));
  EXPECT_TRUE(pick.mig_create);
  TaskPlacement p = make_placement(c.node(n), mig("3g"), pick);
  ASSERT_TRUE(c.apply(p).ok());
  EXPECT_EQ(c.node(n).gpus[0].mig.instances().size(), 1u);
  EXPECT_EQ(c.allocated_gpu_milli(), 3 * 1000 / 7);
  ASSERT_TRUE(c.release(p).ok());
  ASSERT_EQ(c.node(n).gpus[0].mig.instances().size(), 1u);
  EXPECT_FALSE(c.node(n).gpus[0].mig.instances()[0].in_use);
  // The idle instance is reused, not created again.
  ASSERT_TRUE(pick_default(c.node(n), mig("3g"), pick));
  EXPECT_FALSE(pick.mig_create);
  EXPECT_EQ(pick.mig_start, p.gpus[0].mig_start);
  // Whole GPUs and shares never land on a MIG GPU.
  EXPECT_EQ(check_fit(c.node(n), whole(1)), Misfit::kNeverGpus);
  EXPECT_TRUE(c.check_invariants().ok());
}

TEST(ClusterState, UnhealthyGpusAreNotOffered) {
  ClusterState c;
  NodeId n = *c.add_node(node_spec("n0", "L4", 2));
  ASSERT_TRUE(c.set_health(GpuRef{n, 0}, GpuHealth::kUnhealthy).ok());
  EXPECT_EQ(c.node(n).idle_gpus, 1);
  EXPECT_EQ(check_fit(c.node(n), whole(2)), Misfit::kGpus);
  EXPECT_EQ(check_fit(c.node(n), whole(1)), Misfit::kFits);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

using namespace tessera::testing;

TEST(ClusterState, MigReconfigurationDestroysOnlyIdleInstances) {
  ClusterState c;
  NodeSpec s = node_spec("n0", "A100-40GB", 1);
  s.mig_gpus = {0};
  NodeId n = *c.add_node(s);
  GpuPick pick;
  ASSERT_TRUE(pick_default(c.node(n), mig("4g"), pick));
  TaskPlacement four = make_placement(c.node(n), mig("4g"), pick);
  ASSERT_TRUE(c.apply(four).ok());
  ASSERT_TRUE(pick_default(c.node(n), mig("3g"), pick));
  TaskPlacement three = make_placement(c.node(n), mig("3g"), pick);
  ASSERT_TRUE(c.apply(three).ok());
  EXPECT_EQ(check_fit(c.node(n), mig("1g")), Misfit::kGpus) << "all slices in use";
  ASSERT_TRUE(c.release(four).ok());  // the 4g instance stays, idle, on slices 0-3
  ASSERT_EQ(check_fit(c.node(n), mig("1g")), Misfit::kFits);
  ASSERT_TRUE(pick_default(c.node(n), mig("1g"), pick));
  EXPECT_TRUE(pick.mig_create);
  EXPECT_EQ(pick.mig_destroy, 1u << 0) << "destroys the idle 4g at slice 0";
  EXPECT_LT(pick.mig_start, 4);
  ASSERT_TRUE(c.apply(make_placement(c.node(n), mig("1g"), pick)).ok());
  const auto& inst = c.node(n).gpus[0].mig.instances();
  ASSERT_EQ(inst.size(), 2u);
  EXPECT_TRUE(std::all_of(inst.begin(), inst.end(), [](const MigInstance& m) { return m.in_use; }));
  EXPECT_TRUE(c.check_invariants().ok());
  // A grant that would destroy an in-use instance is refused.
  TaskPlacement bad = make_placement(c.node(n), mig("1g"), pick);
  bad.gpus[0].mig_destroy = uint8_t(1u << three.gpus[0].mig_start);
  EXPECT_FALSE(c.can_apply(bad).ok());
}

// (start, profile id, in use) of each instance: what a later pick sees of a GPU's layout.
std::vector<std::tuple<int, int, bool>> layout_of(const Gpu& g) {
  std::vector<std::tuple<int, int, bool>> out;
  for (const MigInstance& m : g.mig.instances()) out.emplace_back(m.start, m.profile_id, m.in_use);
  return out;
}

// Random seeds 3244 and 4771: a start the cycle applied to its view and then took back left the
// instance it had created behind, so a later start "reused" an instance no agent had.
TEST(ClusterState, UndoAllPutsBackTheMigLayoutsThatApplyAllChanged) {
  ClusterState c;
  NodeSpec s = node_spec("n0", "A100-40GB", 2);
  s.mig_gpus = {0, 1};
  NodeId n = *c.add_node(s);
  GpuPick pick;
  ASSERT_TRUE(pick_default(c.node(n), mig("4g"), pick));
  TaskPlacement four = make_placement(c.node(n), mig("4g"), pick);
  ASSERT_TRUE(c.apply(four).ok());
  ASSERT_TRUE(pick_default(c.node(n), mig("3g"), pick));
  ASSERT_TRUE(c.apply(make_placement(c.node(n), mig("3g"), pick)).ok());
  ASSERT_TRUE(c.release(four).ok());  // GPU 0: an idle 4g at slice 0, a 3g in use at slice 4
  ASSERT_EQ(four.gpus[0].gpu, 0);
  ASSERT_EQ(four.gpus[0].mig_start, 0);
  const auto gpu0 = layout_of(c.node(n).gpus[0]), gpu1 = layout_of(c.node(n).gpus[1]);
  ASSERT_EQ(gpu0.size(), 2u);
  ASSERT_TRUE(gpu1.empty());
  auto grant = [&](uint16_t gpu, int start, uint8_t destroy, const char* profile) {
    GpuPick p;
    p.add(gpu);
    p.mig_start = int8_t(start);
    p.mig_create = true;
    p.mig_destroy = destroy;
    return make_placement(c.node(n), mig(profile), p);
  };
  // A start that repartitions the idle 4g (destroyed, a 1g created) and creates a 2g on GPU 1.
  const std::vector<TaskPlacement> start{grant(0, 0, 1u << 0, "1g"), grant(1, 0, 0, "2g")};
  const ClusterState::MigLayouts before = c.mig_layouts_changed_by(start);
  EXPECT_EQ(before.size(), 2u) << "both GPUs change";
  const int64_t milli = c.allocated_gpu_milli();
  ASSERT_TRUE(c.apply_all(start).ok());
  ASSERT_NE(layout_of(c.node(n).gpus[0]), gpu0);

  // Released only, the created instances stay (idle) and the destroyed 4g stays gone.
  ClusterState released = c;
  ASSERT_TRUE(released.release_all(start).ok());
  EXPECT_NE(layout_of(released.node(n).gpus[0]), gpu0);
  EXPECT_NE(layout_of(released.node(n).gpus[1]), gpu1);

  // Undone, both layouts are as they were: the idle 4g is reused again, not created.
  ASSERT_TRUE(c.undo_all(start, before).ok());
  EXPECT_EQ(layout_of(c.node(n).gpus[0]), gpu0);
  EXPECT_EQ(layout_of(c.node(n).gpus[1]), gpu1);
  EXPECT_EQ(c.allocated_gpu_milli(), milli);
  ASSERT_TRUE(pick_default(c.node(n), mig("4g"), pick));
  EXPECT_FALSE(pick.mig_create) << "the idle 4g is back";
  EXPECT_TRUE(c.check_invariants().ok());

  // apply_all that fails on its second task (a 2g where the 3g is in use) leaves nothing of its
  // first behind either.
  EXPECT_FALSE(c.apply_all({grant(0, 0, 1u << 0, "1g"), grant(0, 4, 0, "2g")}).ok());
  EXPECT_EQ(layout_of(c.node(n).gpus[0]), gpu0);
  EXPECT_EQ(c.allocated_gpu_milli(), milli);
  EXPECT_TRUE(c.check_invariants().ok());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

using namespace tessera::testing;

MigInstance inst(const GpuModel& m, const char* profile, int start) {
  const MigProfile* p = m.find_profile(profile);
  EXPECT_NE(p, nullptr) << profile;
  return MigInstance{p ? p->id : -1, uint8_t(start), uint8_t(p ? p->memory_slices : 0), false};
}

TEST(ClusterState, SetMigLayoutTurnsAnIdleGpuToMigAndBack) {
  ClusterState c;
  NodeId n = *c.add_node(node_spec("n0", "A100-40GB", 2));
  const GpuModel& m = *c.node(n).gpus[0].model;
  const uint64_t cap = c.capacity_generation();
  const uint64_t gen = c.node(n).generation;
  EXPECT_EQ(c.node(n).idle_gpus, 2);
  ASSERT_TRUE(c.set_mig_layout(GpuRef{n, 0}, true, {inst(m, "3g", 4), inst(m, "1g", 0), inst(m, "1g", 1)}).ok());
  const Gpu& g = c.node(n).gpus[0];
  EXPECT_TRUE(g.mig_enabled);
  ASSERT_EQ(g.mig.instances().size(), 3u);
  EXPECT_EQ(g.mig.instances()[0].start, 0) << "sorted by start";
  EXPECT_EQ(c.node(n).idle_gpus, 1) << "a MIG GPU is not an idle whole GPU";
  EXPECT_GT(c.capacity_generation(), cap);
  EXPECT_NE(c.node(n).generation, gen);
  EXPECT_TRUE(c.check_invariants().ok()) << c.check_invariants().message();
  // The candidate indexes follow: the node now holds idle 1g and 3g instances, and is in by_idle(1).
  const int one_g = ClusterState::mig_shape(*m.find_profile("1g"));
  const int three_g = ClusterState::mig_shape(*m.find_profile("3g"));
  EXPECT_TRUE(c.mig_idle(one_g).count(n.value));
  EXPECT_TRUE(c.mig_idle(three_g).count(n.value));
  EXPECT_TRUE(c.by_idle(1).count(n.value));
  EXPECT_FALSE(c.by_idle(2).count(n.value));
  EXPECT_EQ(check_fit(c.node(n), mig("1g")), Misfit::kFits);
  EXPECT_NE(check_fit(c.node(n), whole(2)), Misfit::kFits);

  // Back to a whole GPU.
  ASSERT_TRUE(c.set_mig_layout(GpuRef{n, 0}, false, {}).ok());
  EXPECT_FALSE(c.node(n).gpus[0].mig_enabled);
  EXPECT_TRUE(c.node(n).gpus[0].mig.instances().empty());
  EXPECT_EQ(c.node(n).idle_gpus, 2);
  EXPECT_FALSE(c.mig_idle(one_g).count(n.value));
  EXPECT_TRUE(c.by_idle(2).count(n.value));
  EXPECT_TRUE(c.check_invariants().ok()) << c.check_invariants().message();
  EXPECT_EQ(check_fit(c.node(n), whole(2)), Misfit::kFits);
}

TEST(ClusterState, SetMigLayoutRefusesBusyGpusAndBadLayouts) {
  ClusterState c;
  NodeId n = *c.add_node(node_spec("n0", "A100-40GB", 2));
  const GpuModel& m = *c.node(n).gpus[0].model;
  // Busy: held whole.
  GpuPick pick;
  ASSERT_TRUE(pick_default(c.node(n), whole(1), pick));
  TaskPlacement held = make_placement(c.node(n), whole(1), pick);
  ASSERT_TRUE(c.apply(held).ok());
  const GpuRef busy{n, held.gpus[0].gpu};
  auto s = c.set_mig_layout(busy, true, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not idle"), std::string::npos) << s.message();
  ASSERT_TRUE(c.release(held).ok());
  // Invalid layouts change nothing: overlapping instances, a profile of another model, a whole GPU with a layout.
  const GpuRef gpu{n, 0};
  s = c.set_mig_layout(gpu, true, {inst(m, "4g", 0), inst(m, "3g", 0)});
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(c.node(n).gpus[0].mig_enabled);
  EXPECT_FALSE(c.set_mig_layout(gpu, true, {MigInstance{99, 0, 1, false}}).ok());
  EXPECT_FALSE(c.set_mig_layout(gpu, false, {inst(m, "1g", 0)}).ok());
  EXPECT_FALSE(c.set_mig_layout(GpuRef{n, 7}, true, {}).ok());
  EXPECT_TRUE(c.check_invariants().ok());
  // Busy: a MIG instance in use.
  ASSERT_TRUE(c.set_mig_layout(gpu, true, {inst(m, "3g", 4)}).ok());
  ASSERT_TRUE(pick_default(c.node(n), mig("3g"), pick));
  TaskPlacement three = make_placement(c.node(n), mig("3g"), pick);
  ASSERT_TRUE(c.apply(three).ok());
  EXPECT_FALSE(c.set_mig_layout(gpu, false, {}).ok());
  EXPECT_TRUE(c.node(n).gpus[0].mig_enabled);
  ASSERT_TRUE(c.release(three).ok());
  EXPECT_TRUE(c.set_mig_layout(gpu, false, {}).ok());
  // A model without MIG.
  NodeId t4 = *c.add_node(node_spec("n1", "T4", 1));
  EXPECT_FALSE(c.set_mig_layout(GpuRef{t4, 0}, true, {}).ok());
  EXPECT_TRUE(c.check_invariants().ok());
}

TEST(ClusterState, ReconfiguringGpusAreNotOffered) {
  ClusterState c;
  NodeId n = *c.add_node(node_spec("n0", "A100-40GB", 1));
  const GpuModel& m = *c.node(n).gpus[0].model;
  ASSERT_TRUE(c.set_mig_layout(GpuRef{n, 0}, true, {inst(m, "1g", 0)}).ok());
  ASSERT_TRUE(c.set_health(GpuRef{n, 0}, GpuHealth::kReconfiguring).ok());
  EXPECT_NE(check_fit(c.node(n), mig("1g")), Misfit::kFits);
  EXPECT_FALSE(c.mig_idle(ClusterState::mig_shape(*m.find_profile("1g"))).count(n.value));
  ASSERT_TRUE(c.set_health(GpuRef{n, 0}, GpuHealth::kHealthy).ok());
  EXPECT_EQ(check_fit(c.node(n), mig("1g")), Misfit::kFits);
  EXPECT_TRUE(c.check_invariants().ok());
}

}  // namespace
}  // namespace tessera
