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


// config.victims_least_attained: within a class, the victim that has attained the least service
// goes before one that would lose less work. One node of 2 GPUs, both held by borrower b: job 1 has
// run 100 GPU-hours and checkpointed a minute ago (least lost work), job 2 has run one hour and
// checkpointed 20 minutes ago. Owner a's 1-GPU job reclaims one.
class LeastAttainedVictimTest : public SchedulerTest {
 protected:
  void setup() {
    make_cluster(1, 2);
    make_queues({{"a", "", {{"any", 1000}}, {}, 1}, {"b", "", {}, {}, 1}});
    Job& longer = running(1, "b", "research", 1, 1, kNow - 360000);
    longer.attained_gpu_s = 360000;
    longer.checkpoint = {1800, kNow - 60, 60, 120, 300};
    Job& younger = running(2, "b", "research", 1, 1, kNow - 3600);
    younger.attained_gpu_s = 3600;
    younger.checkpoint = {1800, kNow - 1200, 60, 120, 300};
    pending(3, "a", "research", 1, 1, kNow);
  }
};

TEST_F(LeastAttainedVictimTest, ByDefaultTheJobThatLosesLessWorkGoes) {
  setup();
  EXPECT_EQ(victims(cycle()), (std::set<uint32_t>{1}));
}

TEST_F(LeastAttainedVictimTest, WithTheSettingTheJobThatHasRunLessGoes) {
  setup();
  config.victims_least_attained = true;
  EXPECT_EQ(victims(cycle()), (std::set<uint32_t>{2})) << "the job that has run 100 GPU-hours is kept";
}

}  // namespace
}  // namespace tessera
