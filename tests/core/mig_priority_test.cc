// Urgent work is served at once, MIG or not (issue 20, defect 5): a production MIG request that no
// GPU in MIG mode can serve claims an idle GPU for repartitioning ahead of lower-class whole-GPU
// jobs, and when none is idle it frees one by priority preemption.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

class MigPriorityTest : public SchedulerTest {
 protected:
  void SetUp() override {
    make_cluster(1, 8);  // whole H100s, none in MIG mode
    make_queues({{"q", "", {}, {}, 1}});
    config.dynamic_mig = true;
  }
  void pending_slice(int id, const std::string& cls, Time submitted) {
    Job& j = pending(id, "q", cls, 1, 1, submitted);
    j.gang = gang(1, mig("1g.10gb"), id);
  }
};

TEST_F(MigPriorityTest, TheIdleGpuIsHeldForTheSliceNotTakenByALowerClass) {
  for (int i = 1; i <= 7; ++i) running(i, "q", "research", 1, 1, kNow - 7200);
  pending_slice(8, "production-inference", kNow - 10);
  pending(9, "q", "research", 1, 1, kNow - 20);  // older, but of a lower class
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty()) << "the research job took the GPU the slice needs";
  ASSERT_EQ(d.reconfigure_mig.size(), 1u);
  EXPECT_TRUE(d.reconfigure_mig[0].enable_mig);
  EXPECT_EQ(info(d, 8)->category, WaitCategory::kMigReconfiguring) << info(d, 8)->reason;
  EXPECT_TRUE(d.preempt.empty()) << "an idle GPU was there: nobody needs to go";
}

TEST_F(MigPriorityTest, WithNoIdleGpuALowerClassJobIsPreemptedForIt) {
  for (int i = 1; i <= 8; ++i) running(i, "q", "research", 1, 1, kNow - 7200 + i);
  pending_slice(9, "production-inference", kNow - 10);
  Decisions d = cycle();
  ASSERT_EQ(victims(d).size(), 1u);
  EXPECT_NE(d.preempt[0].reason.find("priority:"), std::string::npos) << d.preempt[0].reason;
  EXPECT_EQ(info(d, 9)->category, WaitCategory::kPreempting) << info(d, 9)->reason;
}

TEST_F(MigPriorityTest, ASliceOfTheSameClassDoesNotPreempt) {
  for (int i = 1; i <= 8; ++i) running(i, "q", "research", 1, 1, kNow - 7200 + i);
  pending_slice(9, "research", kNow - 10);
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty());
}

}  // namespace
}  // namespace tessera
