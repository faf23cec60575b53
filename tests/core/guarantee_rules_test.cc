// Guarantee rules across a cycle (issue 20): reclaim takes from a queue only while it still borrows
// once the victims chosen before, in this cycle or still leaving from an earlier one, are gone.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

using GuaranteeRulesTest = SchedulerTest;

// Guarantees exceed the cluster (16 GPUs; owner 16, other 8). The owner's two 8-GPU jobs arrive in
// one cycle: the first reclaims one of the borrower's jobs; the borrower is then at its guarantee,
// so the second job must not reclaim its other job.
TEST_F(GuaranteeRulesTest, TwoJobsOfAnOwnerInOneCycleDoNotTakeTheVictimQueueBelowItsGuarantee) {
  make_cluster(2, 8);
  make_queues({{"owner", "", {{"any", 16000}}, {}, 1}, {"other", "", {{"any", 8000}}, {}, 1}});
  running(1, "other", "research", 1, 8, kNow - 3600);
  running(2, "other", "research", 1, 8, kNow - 3000);
  pending(3, "owner", "research", 1, 8, kNow);
  pending(4, "owner", "research", 1, 8, kNow + 1);
  Decisions d = cycle();
  EXPECT_EQ(victims(d).size(), 1u) << "the second victim would take queue other below its guarantee";
}

// The same across cycles: a victim still checkpointing counts as gone.
TEST_F(GuaranteeRulesTest, AVictimStillLeavingCountsAsGone) {
  make_cluster(2, 8);
  make_queues({{"owner", "", {{"any", 16000}}, {}, 1}, {"other", "", {{"any", 8000}}, {}, 1}});
  Job& leaving = running(1, "other", "research", 1, 8, kNow - 3600);
  leaving.checkpoint.interval = 600;
  leaving.state = JobState::kCheckpointing;
  running(2, "other", "research", 1, 8, kNow - 3000);
  pending(3, "owner", "research", 1, 8, kNow);
  pending(4, "owner", "research", 1, 8, kNow + 1);
  Decisions d = cycle();
  EXPECT_TRUE(victims(d).empty()) << "job 1's exit is all queue other owes";
}


// Priority preemption takes another queue's jobs only while that queue keeps its guarantee once they
// are gone: two victims from a queue 4 GPUs over its guarantee took it to nothing.
TEST_F(GuaranteeRulesTest, PriorityVictimsOfAnotherQueueLeaveItItsGuarantee) {
  make_cluster(2, 8);
  make_queues({{"a", "", {{"any", 4000}}, {}, 1}, {"c", "", {}, {}, 1}, {"urgent", "", {}, {}, 1}});
  running(1, "a", "research", 1, 4, kNow - 3600);  // n0, a borrows 4 of its 8
  running(2, "a", "research", 1, 4, kNow - 3600);  // n0
  running(3, "c", "research", 1, 4, kNow - 9000);  // n1: older, more to lose
  running(4, "c", "research", 1, 4, kNow - 9000);  // n1
  pending(5, "urgent", "production-inference", 1, 8, kNow);
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{3, 4})) << "queue a would fall below its guarantee of 4 GPUs";
}

}  // namespace
}  // namespace tessera
