// Gangs whose tasks differ (Gang::sizes): a CPU-only launcher beside GPU workers, or workers of
// different GPU counts. Validation names the field; the engine gives task i its own request, places
// the gang whole inside one domain when required, and explains why it waits or never fits.
#include <gtest/gtest.h>

#include <set>

#include "core/placement/engine.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

Gang varied(std::vector<TaskSize> sizes, int id = 1) {
  Gang g = gang(1, whole(1), id);
  g.set_sizes(std::move(sizes));
  return g;
}
TaskSize size(int gpus, int64_t cpu = 1000, int64_t mem = 1024) { return TaskSize{MilliCpu(cpu), MiB(mem), gpus}; }

// Two leaves of two nodes of 8 H100 each.
ClusterState two_leaves() {
  ClusterState c(GpuCatalog::builtin(), NetworkLevels({"leaf"}));
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(c.add_node(node_spec("n" + std::to_string(i), "H100-80GB-SXM", 8, {"leaf" + std::to_string(i / 2)})).ok());
  return c;
}

TEST(VariedTasks, SetSizesKeepsTheLargestAsTheGangsShapeAndEachTaskItsOwn) {
  Gang g = varied({size(0, 4000, 8192), size(8, 32000), size(2, 64000)});
  EXPECT_EQ(g.tasks, 3);
  EXPECT_TRUE(g.varied());
  EXPECT_EQ(g.task.gpu_count, 8);  // most GPUs first, CPU only breaks ties
  EXPECT_EQ(g.task.cpu.v, 32000);
  EXPECT_EQ(g.request(0).gpu_count, 0);
  EXPECT_EQ(g.request(0).cpu.v, 4000);
  EXPECT_EQ(g.request(0).memory.v, 8192);
  EXPECT_EQ(g.request(2).gpu_count, 2);
  EXPECT_EQ(g.total_gpus(), 10);
  EXPECT_EQ(g.total_gpu_milli(), 10000);
  EXPECT_TRUE(g.validate().ok()) << g.validate().message();
  Gang u = gang(3, whole(4));
  EXPECT_EQ(u.total_gpus(), 12);
  EXPECT_EQ(u.request(2), u.task);
}

TEST(VariedTasks, ValidationNamesTheField) {
  Gang g = varied({size(8), size(1)});
  g.tasks = 3;
  EXPECT_NE(g.validate().message().find("gang.tasks: 2 task sizes given for 3 tasks"), std::string::npos);
  g = varied({size(8), size(1)});
  g.min_tasks = 1;
  EXPECT_NE(g.validate().message().find("gang.min_tasks"), std::string::npos);
  g = varied({size(8), size(-1)});
  EXPECT_NE(g.validate().message().find("gang.tasks[1].gpus"), std::string::npos) << g.validate().message();
  g = varied({size(8), size(1, -5)});
  EXPECT_NE(g.validate().message().find("gang.tasks[1].cpu"), std::string::npos);
  g = varied({size(8), size(1)});
  g.task.milli_per_gpu = MilliGpu(500);
  EXPECT_NE(g.validate().message().find("whole GPUs or none"), std::string::npos);
  g = varied({size(8), size(1)});
  g.task.gpu_count = 1;  // not the largest task's size
  EXPECT_NE(g.validate().message().find("gang.task"), std::string::npos);
}

TEST(VariedTasks, EachTaskGetsItsOwnRequestAndTheGangAsksOnlyTheirSum) {
  ClusterState c = two_leaves();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  // A launcher without GPUs (task 0) and workers of 8 and 8 GPUs: 16 GPUs, two nodes.
  Gang g = varied({size(0, 4000, 8192), size(8, 32000), size(8, 32000)});
  PlacementResult r = e.place(c, g);
  ASSERT_EQ(r.outcome, Outcome::kPlaced) << r.reason;
  ASSERT_EQ(r.tasks.size(), 3u);
  EXPECT_TRUE(r.tasks[0].gpus.empty());
  EXPECT_EQ(r.tasks[0].cpu.v, 4000);
  EXPECT_EQ(r.tasks[0].memory.v, 8192);
  EXPECT_EQ(r.tasks[1].gpus.size(), 8u);
  EXPECT_EQ(r.tasks[2].gpus.size(), 8u);
  EXPECT_NE(r.tasks[1].node, r.tasks[2].node);
  ASSERT_TRUE(c.apply_all(r.tasks).ok());
  EXPECT_EQ(c.allocated_gpu_milli(), 16000);
  EXPECT_TRUE(c.check_invariants().ok());
  // The same three tasks as a uniform gang of its largest size would need 24 GPUs: 16 are left.
  ClusterState d = two_leaves();
  ASSERT_EQ(e.place_and_commit(d, gang(1, whole(8), 9)).outcome, Outcome::kPlaced);
  ASSERT_EQ(e.place_and_commit(d, gang(1, whole(8), 10)).outcome, Outcome::kPlaced);
  EXPECT_EQ(e.place(d, g).outcome, Outcome::kPlaced);
  EXPECT_NE(e.place(d, gang(3, whole(8, 32000), 11)).outcome, Outcome::kPlaced);
}

TEST(VariedTasks, RequiredLeafPlacesTheWholeGangInOneLeafWithRoom) {
  ClusterState c = two_leaves();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  ASSERT_EQ(e.place_and_commit(c, gang(1, whole(4), 9)).outcome, Outcome::kPlaced);  // leaf0 has 12 free
  Gang g = varied({size(8), size(6), size(1)});                                      // 15 GPUs
  g.topology = {TopologyMode::kRequired, "leaf"};
  PlacementResult r = e.place(c, g);
  ASSERT_EQ(r.outcome, Outcome::kPlaced) << r.reason;
  for (const TaskPlacement& p : r.tasks) EXPECT_EQ(c.node(p.node).path[0], c.node(NodeId(2)).path[0]) << "not in leaf1";
  ASSERT_TRUE(c.apply_all(r.tasks).ok());
  // A second such gang: leaf0 has 12 free GPUs, leaf1 one. It waits, and the reason says what it
  // needs and what is free.
  r = e.place(c, g);
  EXPECT_EQ(r.outcome, Outcome::kRetryLater);
  EXPECT_NE(r.reason.find("needs 15 GPUs (3 tasks of 8+6+1 GPUs) within one leaf"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("the largest free block is 12 GPUs in leaf0"), std::string::npos) << r.reason;
}

TEST(VariedTasks, NeverFitsWhenATaskOrTheSumIsTooLargeForAnyDomain) {
  ClusterState c = two_leaves();
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  Gang big = varied({size(12), size(1)});  // no node has 12 GPUs
  PlacementResult r = e.place(c, big);
  EXPECT_EQ(r.outcome, Outcome::kNeverFits);
  EXPECT_NE(r.reason.find("task 0 (12 GPUs"), std::string::npos) << r.reason;
  Gang wide = varied({size(8), size(8), size(1)});  // 17 GPUs; a leaf holds 16
  wide.topology = {TopologyMode::kRequired, "leaf"};
  r = e.place(c, wide);
  EXPECT_EQ(r.outcome, Outcome::kNeverFits);
  EXPECT_NE(r.reason.find("even an empty cluster holds at most 16 GPUs in any one domain"), std::string::npos) << r.reason;
  wide.topology = {};
  EXPECT_EQ(e.place(c, wide).outcome, Outcome::kPlaced);
}

TEST(VariedTasks, RunsOnOneModelAsUniformGangsDo) {
  ClusterState c;
  ASSERT_TRUE(c.add_node(node_spec("h", "H100-80GB-SXM", 8)).ok());
  ASSERT_TRUE(c.add_node(node_spec("a", "A100-80GB", 8)).ok());
  FirstFitPolicy ff;
  PlacementEngine e(ff, {});
  Gang g = varied({size(8), size(4)});
  g.task.gpu_models = {"H100-80GB-SXM", "A100-80GB"};
  EXPECT_NE(e.place(c, g).outcome, Outcome::kPlaced) << "12 GPUs exist only across the two models";
  g.task.mix_models = true;
  PlacementResult r = e.place(c, g);
  ASSERT_EQ(r.outcome, Outcome::kPlaced) << r.reason;
  std::set<std::string> models;
  for (const TaskPlacement& p : r.tasks) models.insert(c.node(p.node).gpu_model()->name);
  EXPECT_EQ(models.size(), 2u);
}

}  // namespace
}  // namespace tessera
