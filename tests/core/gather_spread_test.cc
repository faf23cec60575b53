// Gathering spread gangs (config.gather_spread): a running gang that prefers one node but runs over
// several moves onto one node once a node has room for all of it that this cycle's pending jobs left
// idle (a checkpoint-first preemption with move_to, as a defragmenting move).
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

// Three nodes of 8 H100s. Jobs 1 and 3 (6 GPUs each) fill n0 and n1 but 2 GPUs each; job 2, a gang
// of 4 one-GPU tasks that prefers one node, was spread over those (2 on n0, 2 on n1) an hour ago.
// n2 is empty.
class GatherSpreadTest : public SchedulerTest {
 protected:
  void setup() {
    make_cluster(3, 8);
    make_queues({{"q", "", {}, {}, 1}});
    running(1, "q", "research", 1, 6, kNow - 3600);
    running(3, "q", "research", 1, 6, kNow - 3600);
    ASSERT_TRUE(cluster.set_schedulable(NodeId(2), false).ok());  // so that job 2 is spread
    Job& g = running(2, "q", "research", 4, 1, kNow - 3600);
    ASSERT_TRUE(cluster.set_schedulable(NodeId(2), true).ok());
    g.gang.topology.mode = TopologyMode::kPreferred;
    g.gang.topology.level = "node";
    g.checkpoint.interval = 1800;
    ASSERT_NE(job(2).placement.front().node, job(2).placement.back().node) << "the fixture spreads job 2";
  }
  Job& job(int id) {
    for (Job& j : jobs)
      if (j.id.value == uint32_t(id)) return j;
    return jobs.front();
  }
};

TEST_F(GatherSpreadTest, ASpreadGangMovesOntoANodeWithRoomForAllOfIt) {
  setup();
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  const PreemptDecision& p = d.preempt.front();
  EXPECT_EQ(p.victim.value, 2u);
  EXPECT_EQ(p.phase, PreemptPhase::kRequestCheckpoint);
  ASSERT_EQ(p.move_to.size(), 4u);
  for (const TaskPlacement& t : p.move_to) EXPECT_EQ(t.node, p.move_to.front().node);
  EXPECT_EQ(cluster.node(p.move_to.front().node).name, "n2");
  EXPECT_EQ(p.reason.rfind("gather:", 0), 0u) << p.reason;
}

TEST_F(GatherSpreadTest, OffWhenTheSettingIsOff) {
  setup();
  config.gather_spread = false;
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(GatherSpreadTest, APendingJobThatFitsGetsTheRoomFirst) {
  setup();
  pending(4, "q", "research", 1, 8, kNow - 10);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{4}));
  EXPECT_TRUE(d.preempt.empty()) << "the room went to the waiting job; nothing is left to gather on";
}

TEST_F(GatherSpreadTest, NotWhileRecentlyStartedOrPreempted) {
  setup();
  job(2).started = kNow - 60;  // within preemption_protection (600 s)
  EXPECT_TRUE(cycle().preempt.empty());
  job(2).started = kNow - 3600;
  job(2).last_preempted = kNow - 60;
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(GatherSpreadTest, AJobThatDoesNotCheckpointStays) {
  setup();
  job(2).checkpoint.interval = 0;
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(GatherSpreadTest, ARequiredSpreadOrUnpreferringGangStays) {
  setup();
  job(2).gang.topology.mode = TopologyMode::kNone;
  EXPECT_TRUE(cycle().preempt.empty());
}

}  // namespace
}  // namespace tessera
