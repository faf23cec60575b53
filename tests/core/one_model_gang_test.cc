// A gang that allows several GPU models runs on one of them (issue 20: a 2x8 gang allowed on H100 or
// A100 was split, one task on each), unless its request sets mix_models.
#include <gtest/gtest.h>

#include <set>

#include "core/placement/engine.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

// One node of 8 H100s and one of 8 A100s.
ClusterState two_models() {
  ClusterState c;
  EXPECT_TRUE(c.add_node(node_spec("h", "H100-80GB-SXM", 8)).ok());
  EXPECT_TRUE(c.add_node(node_spec("a", "A100-80GB", 8)).ok());
  return c;
}

std::set<std::string> models_of(const ClusterState& c, const PlacementResult& r) {
  std::set<std::string> m;
  for (const TaskPlacement& t : r.tasks) m.insert(c.node(t.node).gpu_model()->name);
  return m;
}

TEST(OneModelGang, TwoTasksOfEightWaitRatherThanSplitAcrossModels) {
  ClusterState c = two_models();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  Gang g = gang(2, whole(8));
  g.task.gpu_models = {"H100-80GB-SXM", "A100-80GB"};
  PlacementResult r = e.place(c, g);
  EXPECT_NE(r.outcome, Outcome::kPlaced) << "placed on " << r.tasks.size() << " tasks across models";
  EXPECT_EQ(r.outcome, Outcome::kNeverFits) << "neither model alone has 16 GPUs: " << r.reason;
  EXPECT_NE(r.reason.find("runs on one GPU model"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("on A100-80GB: "), std::string::npos) << r.reason;

  g.task.mix_models = true;  // explicitly allowed: one task on each
  r = e.place(c, g);
  ASSERT_EQ(r.outcome, Outcome::kPlaced) << r.reason;
  EXPECT_EQ(models_of(c, r), (std::set<std::string>{"H100-80GB-SXM", "A100-80GB"}));
}

TEST(OneModelGang, TheFirstListedModelThatHoldsTheWholeGangWins) {
  ClusterState c = two_models();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  ASSERT_EQ(e.place_and_commit(c, gang(1, whole(4), 7)).outcome, Outcome::kPlaced);  // 4 H100s taken
  Gang g = gang(2, whole(4), 8);
  g.task.gpu_models = {"H100-80GB-SXM", "A100-80GB"};
  PlacementResult r = e.place(c, g);
  ASSERT_EQ(r.outcome, Outcome::kPlaced) << r.reason;
  EXPECT_EQ(models_of(c, r), (std::set<std::string>{"A100-80GB"})) << "H100 holds only one task: both go to A100";

  g.task.gpu_models = {"A100-80GB", "H100-80GB-SXM"};
  r = e.place(c, g);
  ASSERT_EQ(r.outcome, Outcome::kPlaced);
  EXPECT_EQ(models_of(c, r), (std::set<std::string>{"A100-80GB"}));

}

}  // namespace
}  // namespace tessera
