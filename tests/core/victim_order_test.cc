// Victim order (issue 20, defect 2): victims come from the lowest priority class that can serve the
// preemptor, lost work deciding only within a class, for priority preemption and reclaim alike.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

using VictimOrderTest = SchedulerTest;

// A production-inference job needs 4 GPUs. An 8-GPU production-training job checkpointed a minute
// ago (least lost work of all); two research jobs have run for hours without a checkpoint. One
// research job serves: the training job (which would then preempt research jobs to restart) is not
// taken.
TEST_F(VictimOrderTest, LowestClassFirstEvenWhenAHigherClassLosesLessWork) {
  make_cluster(2, 8);
  make_queues({{"q", "", {}, {}, 1}});
  Job& train = running(1, "q", "production-training", 1, 8, kNow - 7200);
  train.checkpoint = {600, kNow - 60, 30, 60, 300};
  running(2, "q", "research", 1, 4, kNow - 7200);
  running(3, "q", "research", 1, 4, kNow - 7000);
  pending(4, "q", "production-inference", 1, 4, kNow);
  Decisions d = cycle();
  EXPECT_EQ(victims(d).size(), 1u);
  EXPECT_EQ(victims(d).count(1), 0u) << "the production-training job was preempted for a 4-GPU job";
  EXPECT_EQ(victims(d).count(3), 1u) << "within research, the job that loses less work (the younger one) goes";
}

// The same for single-GPU requests (no node grouping): preemptible (0) goes before research (100)
// and production-training (500), whatever each would lose.
TEST_F(VictimOrderTest, SingleGpuVictimsByClassThenLostWork) {
  make_cluster(1, 3);
  make_queues({{"q", "", {}, {}, 1}});
  Job& train = running(1, "q", "production-training", 1, 1, kNow - 7200);
  train.checkpoint = {600, kNow - 10, 30, 60, 300};  // nearly nothing to lose
  running(2, "q", "research", 1, 1, kNow - 9000);
  running(3, "q", "preemptible", 1, 1, kNow - 9000);
  pending(4, "q", "production-inference", 1, 1, kNow);
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{3})) << "the lowest class goes first";
}

}  // namespace
}  // namespace tessera
