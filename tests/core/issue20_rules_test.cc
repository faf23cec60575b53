// Issue 20's scheduling rules: backfill counts a resumed job's restart cost; GPUs are owed only to
// jobs that could start on them; room already on its way is not reclaimed for again; a gang held to
// one topology domain gets victims inside one domain.
#include <gtest/gtest.h>

#include "core/mig.h"
#include "scheduler_fixture.h"

namespace tessera {
namespace {

class Issue20RulesTest : public SchedulerTest {};

// Rule 1. One node of 8 GPUs: job 1 (4 GPUs) ends at kNow + 1000, when job 2's 8-GPU gang is
// reserved to start; job 3 (4 GPUs) runs 900 s, but it was preempted before and restoring its
// checkpoint takes 200 s, so it would hold its GPUs until kNow + 1100.
class BackfillRestartCostTest : public Issue20RulesTest {
 protected:
  Job& setup(Duration runtime, int preemptions) {
    make_cluster(1, 8);
    make_queues({{"q", "", {}, {}, 1}});
    running(1, "q", "research", 1, 4, kNow - 100).expected_runtime = 1100;
    pending(2, "q", "research", 1, 8, kNow - 50).expected_runtime = 3600;
    Job& j = pending(3, "q", "research", 1, 4, kNow - 10);
    j.expected_runtime = runtime;
    j.preemptions = preemptions;
    j.last_preempted = preemptions > 0 ? kNow - 500 : -1;
    j.checkpoint.restart_cost = 200;
    return j;
  }
};

TEST_F(BackfillRestartCostTest, AResumedJobThatWouldOverrunByItsRestartCostWaits) {
  setup(900, 1);
  Decisions d = cycle();
  ASSERT_TRUE(d.reservation.has_value());
  EXPECT_EQ(d.reservation->start, kNow + 1000);
  EXPECT_TRUE(d.start.empty()) << "900 s of work + 200 s of restart ends after the reservation";
  ASSERT_NE(info(d, 3), nullptr);
  EXPECT_EQ(info(d, 3)->category, WaitCategory::kReservation) << info(d, 3)->reason;
  EXPECT_NE(info(d, 3)->reason.find("would delay"), std::string::npos) << info(d, 3)->reason;
}

TEST_F(BackfillRestartCostTest, AResumedJobThatEndsInTimeWithItsRestartCostStarts) {
  setup(800, 1);  // 800 + 200 ends exactly at the reservation
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{3}));
}

TEST_F(BackfillRestartCostTest, AFirstRunPaysNoRestartCost) {
  setup(900, 0);
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{3}));
}

// Rule 2. Three nodes of 8 H100s; team is guaranteed 16 H100s but limited to 8 GPUs in all, and runs
// 8: its waiting job cannot start whatever is free, so nothing is owed to it.
class LimitHeldOwedTest : public Issue20RulesTest {
 protected:
  void setup() {
    make_cluster(3, 8);
    config.gpu_class["H100-80GB-SXM"] = "h100";
    make_queues({{"team", "", {{"h100", 16000}}, {{"any", 8000}}, 1}, {"other", "", {}, {}, 1}});
    running(1, "team", "research", 1, 8, kNow - 3600);
    running(2, "other", "research", 1, 8, kNow - 3600);
    pending(3, "team", "research", 1, 8, kNow - 60);
  }
};

TEST_F(LimitHeldOwedTest, ABorrowerUsesGpusTheHeldBackOwnerCannotStartOn) {
  setup();
  pending(4, "other", "research", 1, 8, kNow - 30);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{4})) << (info(d, 4) ? info(d, 4)->reason : "");
  ASSERT_NE(info(d, 3), nullptr);
  EXPECT_EQ(info(d, 3)->category, WaitCategory::kQuota) << info(d, 3)->reason;
}

TEST_F(LimitHeldOwedTest, NoBorrowerIsReclaimedForAJobHeldBackByItsLimit) {
  setup();
  running(4, "other", "research", 1, 8, kNow - 3600);  // the last free node
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty()) << d.preempt.front().reason;
}

// Rule 3. One node of 8 H100s; queue owner is guaranteed it all and reclaims from borrow, which runs
// 1-GPU research jobs. In the first two tests GPU 0 is being repartitioned (a MIG decision of an
// earlier cycle, kReconfiguring) and borrow runs on the other 7.
class RoomOnItsWayTest : public Issue20RulesTest {
 protected:
  void SetUp() override {
    make_cluster(1, 8);
    make_queues({{"owner", "", {{"any", 8000}}, {}, 1}, {"borrow", "", {}, {}, 1}});
    config.dynamic_mig = true;
  }
  void reconfigure_gpu0(const std::string& profile) {
    const GpuModel* m = cluster.catalog().find("H100-80GB-SXM").value();
    const MigProfile* p = m->find_profile(profile);
    ASSERT_NE(p, nullptr);
    MigLayout layout(m);
    while (layout.create_first_fit(*p).ok()) {
    }
    ASSERT_TRUE(cluster.set_mig_layout(GpuRef{NodeId(0u), 0}, true, layout.instances()).ok());
    ASSERT_TRUE(cluster.set_health(GpuRef{NodeId(0u), 0}, GpuHealth::kReconfiguring).ok());
  }
  void borrowers(int n) {
    for (int i = 1; i <= n; ++i) running(i, "borrow", "research", 1, 1, kNow - 7200 + i);
  }
  void pending_slice(int id, const std::string& profile, Time submitted) {
    pending(id, "owner", "research", 1, 1, submitted).gang = gang(1, mig(profile), id);
  }
};

TEST_F(RoomOnItsWayTest, ASliceWaitsForTheGpuBeingRepartitionedForIt) {
  reconfigure_gpu0("1g.10gb");
  borrowers(7);
  pending_slice(8, "1g.10gb", kNow - 10);
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty()) << "the slices are on their way: " << d.preempt.front().reason;
}

TEST_F(RoomOnItsWayTest, ARepartitionForAnotherProfileIsNoRoomForThisOne) {
  reconfigure_gpu0("7g.80gb");  // offers no 1g.10gb
  borrowers(7);
  pending_slice(8, "1g.10gb", kNow - 10);
  EXPECT_EQ(victims(cycle()).size(), 1u);
}

TEST_F(RoomOnItsWayTest, AGpuFreedForSlicesThisCycleServesTheOtherProfilesToo) {
  borrowers(8);
  pending_slice(9, "1g.10gb", kNow - 20);
  pending_slice(10, "2g.20gb", kNow - 10);
  Decisions d = cycle();
  EXPECT_EQ(victims(d).size(), 1u) << "one freed GPU holds a 1g.10gb and a 2g.20gb slice";
  ASSERT_NE(info(d, 10), nullptr);
  EXPECT_EQ(info(d, 10)->category, WaitCategory::kPreempting) << info(d, 10)->reason;
}

// Rule 4. Two leaves of two 4-GPU nodes, every GPU running a 1-GPU research job; the cheapest victims
// alternate between the leaves. A production gang of 8 one-GPU tasks that requires one leaf needs a
// whole leaf: with 8 preemptions a cycle, the 8 cheapest victims anywhere (4 per leaf) never fit it.
class DomainVictimsTest : public Issue20RulesTest {
 protected:
  void setup() {
    cluster = ClusterState(GpuCatalog::builtin(), NetworkLevels({"leaf"}));
    for (const char* n : {"a0", "a1"}) ASSERT_TRUE(cluster.add_node(node_spec(n, "H100-80GB-SXM", 4, {"leaf-a"})).ok());
    for (const char* n : {"b0", "b1"}) ASSERT_TRUE(cluster.add_node(node_spec(n, "H100-80GB-SXM", 4, {"leaf-b"})).ok());
    make_queues({{"q", "", {}, {}, 1}});
    config.max_preemptions_per_cycle = 8;
    // Jobs 1-8 fill leaf a, 9-16 leaf b (first fit); leaf a's k-th job is cheaper than leaf b's.
    for (int k = 0; k < 8; ++k) running(1 + k, "q", "research", 1, 1, kNow - 3600 - 20 * k);
    for (int k = 0; k < 8; ++k) running(9 + k, "q", "research", 1, 1, kNow - 3610 - 20 * k);
    Job& g = pending(17, "q", "production-training", 8, 1, kNow - 10);
    g.gang.topology = {TopologyMode::kRequired, "leaf"};
  }
};

TEST_F(DomainVictimsTest, VictimsFreeOneLeafNotTheCheapestAnywhere) {
  setup();
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8})) << (info(d, 17) ? info(d, 17)->reason : "");
  ASSERT_NE(info(d, 17), nullptr);
  EXPECT_EQ(info(d, 17)->category, WaitCategory::kPreempting) << info(d, 17)->reason;
}

}  // namespace
}  // namespace tessera
