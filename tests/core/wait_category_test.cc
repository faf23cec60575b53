// Every pending job's wait category (PendingInfo::category) on hand-built clusters: one case per
// category, each set by the rule that holds the job back, whatever the reason text says.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

class WaitCategoryTest : public SchedulerTest {
 protected:
  WaitCategory category_of(const Decisions& d, int id) {
    const PendingInfo* p = info(d, id);
    EXPECT_NE(p, nullptr) << "job " << id << " is not pending";
    return p ? p->category : WaitCategory::kOther;
  }
};

TEST_F(WaitCategoryTest, UnknownClassIsInvalid) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  pending(1, "a", "gold", 1, 1);
  Decisions d = cycle();
  EXPECT_EQ(category_of(d, 1), WaitCategory::kInvalid) << info(d, 1)->reason;
  EXPECT_STREQ(wait_category_name(WaitCategory::kInvalid), "invalid");
}

TEST_F(WaitCategoryTest, NoRoomIsCapacityAndStrictOrderBehindItIsOrder) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 6, kNow - 10);
  pending(2, "a", "research", 1, 4, 0);
  pending(3, "a", "research", 1, 1, 5);
  config.strict_order = true;
  config.preemption = false;
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty());
  EXPECT_EQ(category_of(d, 2), WaitCategory::kCapacity) << info(d, 2)->reason;
  EXPECT_EQ(category_of(d, 3), WaitCategory::kOrder) << info(d, 3)->reason;
}

TEST_F(WaitCategoryTest, QueueLimitIsQuota) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {{"any", 2000}}, 1}});
  pending(1, "a", "research", 1, 4);
  Decisions d = cycle();
  EXPECT_EQ(category_of(d, 1), WaitCategory::kQuota) << info(d, 1)->reason;
}

TEST_F(WaitCategoryTest, HeldForTheReservationIsReservation) {
  make_cluster(2, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 8, kNow - 100).expected_runtime = 3700;
  pending(2, "a", "research", 2, 8, 0);                            // reserved at job 1's end
  pending(3, "a", "research", 1, 4, 10).expected_runtime = 7200;  // would run past it
  Decisions d = cycle();
  EXPECT_EQ(category_of(d, 2), WaitCategory::kCapacity) << info(d, 2)->reason;
  EXPECT_TRUE(info(d, 2)->reserved);
  EXPECT_EQ(category_of(d, 3), WaitCategory::kReservation) << info(d, 3)->reason;
}

TEST_F(WaitCategoryTest, WaitingForVictimsIsPreempting) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 8, kNow - 5000).checkpoint.interval = 600;
  pending(2, "a", "production-inference", 1, 8, 0);
  Decisions d = cycle();
  ASSERT_EQ(victims(d), (std::set<uint32_t>{1}));
  EXPECT_EQ(category_of(d, 2), WaitCategory::kPreempting) << info(d, 2)->reason;
}

TEST_F(WaitCategoryTest, RoomOnlyAcrossNodesForAOneNodeGangIsTopology) {
  make_cluster(2, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 6, kNow - 10);  // n0: 2 GPUs free
  running(2, "a", "research", 1, 6, kNow - 10);  // n1: 2 GPUs free
  Job& g = pending(3, "a", "research", 2, 2, 0);
  g.gang.topology = {TopologyMode::kRequired, "node"};
  config.preemption = false;
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty());
  EXPECT_EQ(category_of(d, 3), WaitCategory::kTopology) << info(d, 3)->reason;

  g.gang.topology = {};  // allowed to spread, the same gang starts
  d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3}));
}

TEST_F(WaitCategoryTest, MigSliceWithNoGpuInMigModeIsMigReconfiguring) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  for (int i = 1; i <= 8; ++i) running(i, "a", "research", 1, 1, kNow - 10);
  Job& j = pending(9, "a", "research", 1, 1, 0);
  j.gang = gang(1, mig("1g.10gb"), 9);
  config.dynamic_mig = true;
  config.preemption = false;
  Decisions d = cycle();
  EXPECT_EQ(category_of(d, 9), WaitCategory::kMigReconfiguring) << info(d, 9)->reason;
}

}  // namespace
}  // namespace tessera
