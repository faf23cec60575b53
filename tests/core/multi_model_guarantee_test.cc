// Requests that allow several GPU models, or none, and guarantees per GPU class (issue 20, defect 3
// and the fair-share rule): a request is owed by every class it could use, not by its first listed
// model's, and its demand counts in every class it could use.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

class MultiModelTest : public SchedulerTest {
 protected:
  // Node "h": 8 H100 (class h100); node "a": 8 A100 (class a100).
  void two_models() {
    cluster = ClusterState();
    ASSERT_TRUE(cluster.add_node(node_spec("h", "H100-80GB-SXM", 8)).ok());
    ASSERT_TRUE(cluster.add_node(node_spec("a", "A100-80GB", 8)).ok());
    config.gpu_class["H100-80GB-SXM"] = "h100";
    config.gpu_class["A100-80GB"] = "a100";
  }
  int started_in(const Decisions& d, const std::string& queue) const {
    int n = 0;
    for (const StartDecision& s : d.start)
      for (const Job& j : jobs)
        if (j.id == s.job && j.queue == q(queue)) ++n;
    return n;
  }
};

TEST_F(MultiModelTest, GuaranteeInTheSecondListedModelsClassIsHonoured) {
  two_models();
  make_queues({{"owner", "", {{"h100", 8000}}, {}, 1}, {"other", "", {}, {}, 1}});
  running(1, "other", "research", 1, 8, kNow - 3600);  // first fit: the H100 node, borrowed
  running(2, "other", "research", 1, 8, kNow - 3600);  // the A100 node
  for (const auto& models : {std::vector<std::string>{"A100-80GB", "H100-80GB-SXM"},
                             std::vector<std::string>{"H100-80GB-SXM", "A100-80GB"}}) {
    jobs.resize(2);
    pending(3, "owner", "research", 1, 8, kNow).gang.task.gpu_models = models;
    Decisions d = cycle();
    EXPECT_EQ(victims(d), (std::set<uint32_t>{1})) << "listing " << models.front()
                                                    << " first: the owner is owed its H100s all the same";
  }
}

TEST_F(MultiModelTest, NoGuaranteeInAnyListedClassReclaimsNothing) {
  two_models();
  make_queues({{"owner", "", {{"h100", 8000}}, {}, 1}, {"other", "", {}, {}, 1}});
  running(1, "other", "research", 1, 8, kNow - 3600);
  running(2, "other", "research", 1, 8, kNow - 3600);
  pending(3, "owner", "research", 1, 8, kNow).gang.task.gpu_models = {"A100-80GB"};
  Decisions d = cycle();
  EXPECT_TRUE(victims(d).empty()) << "the owner is owed H100s, and this job cannot use them";
}

// Two equal queues without guarantees share 16 H100s evenly, though a third queue's guarantee makes
// the class accounted: their waiting jobs that name no model are demand in it.
TEST_F(MultiModelTest, EqualQueuesShareAnAccountedClassEvenly) {
  make_cluster(2, 8);
  config.gpu_class["H100-80GB-SXM"] = "h100";
  make_queues({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}, {"c", "", {{"h100", 4000}}, {}, 1}});
  for (int i = 1; i <= 4; ++i) running(i, "a", "research", 1, 1, kNow - 100);
  for (int i = 5; i <= 20; ++i) pending(i, "a", "research", 1, 1, i);
  for (int i = 21; i <= 40; ++i) pending(i, "b", "research", 1, 1, i);
  Decisions d = cycle();
  EXPECT_EQ(started_in(d, "a") + 4, 8) << "a ends with " << started_in(d, "a") + 4 << " of 16";
  EXPECT_EQ(started_in(d, "b"), 8);
}

}  // namespace
}  // namespace tessera
