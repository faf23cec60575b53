// ScratchEdits (core/sched/scratch.h): trial edits to a cluster are undone newest first, on undo()
// or when the guard ends; an edit the cluster refuses part-way changes nothing and is not recorded.
#include <gtest/gtest.h>

#include "core/placement/fit.h"
#include "core/sched/scratch.h"
#include "test_cluster.h"

namespace tessera::sched {
namespace {

std::vector<TaskPlacement> on(uint32_t node, std::vector<uint16_t> gpus) {
  TaskPlacement p;
  p.node = NodeId{node};
  for (uint16_t g : gpus) p.gpus.push_back(GpuGrant{g});
  return {p};
}

class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster.add_node(tessera::testing::node_spec("a", "H100-80GB-SXM", 4)).ok());
    ASSERT_TRUE(cluster.apply_all(running).ok());
  }
  ClusterState cluster;
  const std::vector<TaskPlacement> running = on(0, {0, 1});
  const std::vector<TaskPlacement> other = on(0, {2, 3});
  const std::vector<TaskPlacement> overlap = on(0, {1, 2});
};

TEST_F(ScratchTest, TheGuardUndoesEveryEditWhenItEnds) {
  {
    ScratchEdits s(cluster);
    ASSERT_TRUE(s.release(running));
    EXPECT_EQ(cluster.allocated_gpu_milli(), 0);
    ASSERT_TRUE(s.apply(overlap));  // only possible because `running` is gone
    ASSERT_TRUE(s.release(overlap));
    ASSERT_TRUE(s.apply(other));
    EXPECT_EQ(cluster.allocated_gpu_milli(), 2000);
    EXPECT_EQ(s.size(), 4u);
  }
  EXPECT_EQ(cluster.allocated_gpu_milli(), 2000);
  EXPECT_FALSE(cluster.apply_all(overlap).ok()) << "GPU 1 is held by `running` again";
  EXPECT_TRUE(cluster.apply_all(other).ok()) << "GPUs 2 and 3 are free again";
}

TEST_F(ScratchTest, UndoLastTakesBackOnlyTheNewestEdit) {
  ScratchEdits s(cluster);
  ASSERT_TRUE(s.release(running));
  ASSERT_TRUE(s.apply(other));
  s.undo_last();
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 0) << "`other` taken back, `running` still released";
  s.undo();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 2000);
}

TEST_F(ScratchTest, ARefusedEditChangesNothingAndIsNotRecorded) {
  ScratchEdits s(cluster);
  EXPECT_FALSE(s.apply(overlap)) << "GPU 1 is taken";
  std::vector<TaskPlacement> half = running;
  half.push_back(other.front());  // the second task holds nothing to release
  EXPECT_FALSE(s.release(half));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 2000);
  EXPECT_FALSE(cluster.apply_all(running).ok()) << "the first task was put back";
}

// A trial start that creates a MIG instance leaves none behind when it is undone: a later pick
// would otherwise "reuse" an instance that no agent was asked for (random seeds 3244, 4771).
TEST(ScratchMig, AnApplyThatCreatedAnInstanceIsUndoneWithIt) {
  ClusterState c;
  tessera::NodeSpec spec = tessera::testing::node_spec("m", "A100-40GB", 1);
  spec.mig_gpus = {0};
  ASSERT_TRUE(c.add_node(spec).ok());
  GpuPick pick;
  const TaskRequest t = tessera::testing::mig("3g");
  ASSERT_TRUE(pick_default(c.node(NodeId{0}), t, pick));
  ASSERT_TRUE(pick.mig_create);
  const std::vector<TaskPlacement> start{make_placement(c.node(NodeId{0}), t, pick)};
  {
    ScratchEdits s(c);
    ASSERT_TRUE(s.apply(start));
    EXPECT_EQ(c.node(NodeId{0}).gpus[0].mig.instances().size(), 1u);
  }
  EXPECT_TRUE(c.node(NodeId{0}).gpus[0].mig.instances().empty()) << "the instance went with the trial";
  EXPECT_EQ(c.allocated_gpu_milli(), 0);
  EXPECT_TRUE(c.check_invariants().ok());
}

}  // namespace
}  // namespace tessera::sched
