// The scheduling cycle on hand-built clusters: fair-share order, limits, guarantees, priorities,
// gangs, preemption (least lost work, protection, no useless or looping preemption, reclaim),
// validation and determinism.
#include "core/sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

TEST_F(SchedulerTest, StartsInFairShareOrderAcrossTwoQueues) {
  make_cluster(1, 4);
  make_queues({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}});
  for (int i = 1; i <= 4; ++i) pending(i, "a", "research", 1, 1, i);       // a's jobs are older
  for (int i = 5; i <= 8; ++i) pending(i, "b", "research", 1, 1, 100 + i);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{1, 5, 2, 6})) << "queues alternate as their shares fill";
  ASSERT_EQ(d.pending.size(), 4u);
  // Nothing more starts, so the shares stay equal: the queue id breaks the tie.
  EXPECT_EQ(d.pending[0].job.value, 3u);
  EXPECT_EQ(d.pending[2].job.value, 7u);
  EXPECT_EQ(d.pending[0].overall_position, 1);
  EXPECT_EQ(d.pending[2].overall_position, 3);
  EXPECT_EQ(d.pending[2].queue_position, 1);
  EXPECT_EQ(info(d, 8)->queue_position, 2);
  EXPECT_FALSE(d.pending[0].reason.empty());
  EXPECT_TRUE(d.preempt.empty());
}

TEST_F(SchedulerTest, LimitGivesTheQueueAndClassInTheReason) {
  make_cluster(2, 8);
  config.gpu_class["H100-80GB-SXM"] = "h100";
  make_queues({{"team-a", "", {}, {{"h100", 2000}}, 1}});
  Job& j = pending(1, "team-a", "research", 1, 4);
  j.gang.task.gpu_models = {"H100-80GB-SXM"};
  pending(2, "team-a", "research", 1, 2).gang.task.gpu_models = {"H100-80GB-SXM"};
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{2}));
  ASSERT_NE(info(d, 1), nullptr);
  EXPECT_EQ(info(d, 1)->reason, "queue team-a at its limit of 2 GPUs of class h100");
}

TEST_F(SchedulerTest, LimitOnAnyCoversEveryModel) {
  make_cluster(1, 8);
  make_queues({{"team-a", "", {}, {{"any", 3000}}, 1}});
  pending(1, "team-a", "research", 1, 2);
  pending(2, "team-a", "research", 1, 2, 5).gang.task.gpu_models = {"H100-80GB-SXM"};
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{1}));
  EXPECT_NE(info(d, 2)->reason.find("team-a"), std::string::npos) << info(d, 2)->reason;
}

TEST_F(SchedulerTest, HierarchyIsWalkedFromTheTop) {
  make_cluster(1, 4);
  make_queues({{"org", "", {}, {}, 1}, {"x", "org", {}, {}, 1}, {"y", "org", {}, {}, 1}, {"z", "", {}, {}, 1}});
  for (int i = 0; i < 4; ++i) {
    pending(10 + i, "x", "research", 1, 1, i);
    pending(20 + i, "y", "research", 1, 1, i);
    pending(30 + i, "z", "research", 1, 1, i);
  }
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{10, 30, 20, 31})) << "org and z share the top level, x and y org's half";
}

TEST_F(SchedulerTest, SharesCountTheirMilliAgainstLimits) {
  make_cluster(1, 2);
  make_queues({{"a", "", {}, {{"any", 1000}}, 1}});
  for (int i = 1; i <= 3; ++i) jobs.push_back([&] {
    Job j = pending(i, "a", "research", 1, 1, i);
    jobs.pop_back();
    j.gang.task = share(500);
    return j;
  }());
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{1, 2}));
  EXPECT_NE(info(d, 3)->reason.find("queue a at its limit"), std::string::npos) << info(d, 3)->reason;
}

TEST_F(SchedulerTest, QueueBelowGuaranteeIsServedFirst) {
  make_cluster(1, 2);
  make_queues({{"a", "", {}, {}, 1}, {"b", "", {{"any", 2000}}, {}, 1}});
  pending(1, "a", "research", 1, 1, 0);
  pending(2, "a", "research", 1, 1, 0);
  pending(3, "b", "research", 1, 1, 50);
  pending(4, "b", "research", 1, 1, 50);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(info(d, 1)->overall_position, 1);
}

TEST_F(SchedulerTest, PriorityOrdersJobsInsideAQueue) {
  make_cluster(1, 1);
  make_queues({{"a", "", {}, {}, 1}});
  pending(1, "a", "research", 1, 1, 0);
  pending(2, "a", "production-training", 1, 1, 500);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{2}));
  EXPECT_EQ(info(d, 1)->queue_position, 1);
}

TEST_F(SchedulerTest, UserWithLessRunningUsageGoesFirst) {
  make_cluster(1, 2);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 1, kNow - 10, "alice");
  pending(2, "a", "research", 1, 1, 0, "alice");
  pending(3, "a", "research", 1, 1, 50, "bob");
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3})) << "bob runs nothing, alice already runs a GPU";
  EXPECT_TRUE(d.preempt.empty());
}

TEST_F(SchedulerTest, GangIsAllOrNothingThroughTheCycle) {
  make_cluster(2, 4);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 1, kNow - 10);
  pending(2, "a", "research", 2, 4, 0);  // needs both nodes whole
  pending(3, "a", "research", 1, 2, 10).expected_runtime = 3600;  // ends long before job 1 (24 h assumed)
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3})) << "the gang waits whole; smaller work still starts";
  const PendingInfo* p = info(d, 2);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->reason.empty());
  EXPECT_EQ(p->overall_position, 1);
  EXPECT_TRUE(d.preempt.empty()) << "equal classes never preempt";
}

TEST_F(SchedulerTest, PriorityPreemptionPicksLeastLostWork) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "preemptible", 1, 4, kNow - 7200);  // 2 hours without a checkpoint
  Job& ck = running(2, "a", "preemptible", 1, 4, kNow - 7200);
  ck.checkpoint.interval = 600;
  ck.checkpoint.last = kNow - 60;  // checkpointed a minute ago
  pending(3, "a", "production-training", 1, 4, 0);
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty()) << "the preemptor waits for its victims";
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 2u);
  EXPECT_EQ(d.preempt[0].for_job.value, 3u);
  EXPECT_EQ(d.preempt[0].phase, PreemptPhase::kRequestCheckpoint);
  EXPECT_EQ(d.preempt[0].reason, "priority: production-training job job-3 needs 4 GPUs");
  EXPECT_EQ(info(d, 3)->reason, "waiting for 1 preempted job to checkpoint and exit");
}

TEST_F(SchedulerTest, NonCheckpointingVictimIsEvicted) {
  make_cluster(1, 4);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "preemptible", 1, 4, kNow - 7200);
  pending(2, "a", "production-inference", 1, 4, 0);
  pending(3, "a", "research", 1, 1, 10);
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].phase, PreemptPhase::kEvict);
  EXPECT_EQ(d.preempt[0].reason, "priority: production-inference job job-2 needs 4 GPUs");
  EXPECT_TRUE(d.start.empty()) << "the victim's room is held for the preemptor this cycle";
  EXPECT_EQ(info(d, 3)->overall_position, 2);
}

TEST_F(SchedulerTest, MinRuntimeAndProtectionWindowAreRespected) {
  make_cluster(1, 2);
  make_queues({{"a", "", {}, {}, 1}});
  config.priority_classes = priority_classes_default();
  for (auto& pc : config.priority_classes)
    if (pc.name == "preemptible") pc.min_runtime = 600;
  config.preemption_protection = 900;
  running(1, "a", "preemptible", 1, 1, kNow - 60);  // inside min_runtime
  Job& prot = running(2, "a", "preemptible", 1, 1, kNow - 700);
  prot.last_preempted = kNow - 800;  // inside the protection window
  pending(3, "a", "production-training", 1, 1, 0);
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_TRUE(d.start.empty());
  EXPECT_EQ(info(d, 3)->reason.find("waiting for"), std::string::npos);
  // 200 s later both windows are over for job 2 only.
  d = cycle(kNow + 200);
  EXPECT_EQ(victims(d), (std::set<uint32_t>{2}));
  // Later still, job 1 is the cheaper victim (less work since its start).
  d = cycle(kNow + 1000);
  EXPECT_EQ(victims(d), (std::set<uint32_t>{1}));
}

TEST_F(SchedulerTest, NoUselessPreemption) {
  make_cluster(2, 4);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "production-inference", 1, 4, kNow - 7200);  // node 0, never a victim
  running(2, "a", "preemptible", 1, 2, kNow - 7200);           // node 1
  pending(3, "a", "production-training", 2, 4, 0);             // needs both nodes whole
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty()) << "freeing job 2 alone would not make room";
  EXPECT_TRUE(d.start.empty());
  EXPECT_EQ(info(d, 3)->reason.find("waiting for"), std::string::npos);
}

TEST_F(SchedulerTest, OnlyNeededVictimsArePreempted) {
  make_cluster(1, 4);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "preemptible", 1, 1, kNow - 100);   // cheapest, but too small alone
  running(2, "a", "preemptible", 1, 3, kNow - 200);
  pending(3, "a", "research", 1, 3, 0);
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{2})) << "job 1 was tried first but is not needed";
}

TEST_F(SchedulerTest, ReclaimPreemptsABorrower) {
  make_cluster(1, 4);
  make_queues({{"a", "", {{"any", 4000}}, {}, 1}, {"b", "", {}, {}, 1}});
  for (int i = 1; i <= 4; ++i) running(i, "b", "research", 1, 1, kNow - 1000 * i);
  pending(5, "a", "research", 1, 2, 0);
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{1, 2})) << "the two most recently started lose least";
  for (auto& p : d.preempt) EXPECT_EQ(p.reason, "reclaim: queue a takes back its guarantee");
  EXPECT_EQ(info(d, 5)->reason, "waiting for 2 preempted jobs to checkpoint and exit");
}

// A queue reclaiming for a request without models must also be ordered below its guarantee, or the
// room its reclaim frees goes to the other queue first and it reclaims again (an endless loop at one
// timestamp when the victims restart). Here b's reclaim has just freed 2 GPUs.
TEST_F(SchedulerTest, ModelFreeDemandCountsInGuaranteedClassesSoTheReclaimerGetsTheRoom) {
  make_cluster(1, 8);
  make_queues({{"a", "", {{"H100-80GB-SXM", 4000}}, {}, 1}, {"b", "", {{"H100-80GB-SXM", 4000}}, {}, 1}});
  running(1, "a", "research", 1, 2, kNow - 1000);
  running(2, "a", "research", 1, 2, kNow - 1000);
  running(3, "b", "research", 1, 2, kNow - 1000);
  pending(4, "a", "research", 1, 2, 0);  // a is at its guarantee: it waits
  pending(5, "b", "research", 1, 2, 0);  // b is below its guarantee: it gets the free GPUs
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{5}));
  EXPECT_TRUE(d.preempt.empty());
}

// A limit on a model class is checked on the GPUs chosen (the request names no model): preempting
// for a placement that limit then refuses frees room for nobody, every protection window again.
TEST_F(SchedulerTest, NoPreemptionForAPlacementTheQueueLimitWouldRefuse) {
  make_cluster(2, 8);
  make_queues({{"a", "", {}, {{"H100-80GB-SXM", 8000}}, 1}, {"b", "", {}, {}, 1}});
  running(1, "a", "production-training", 1, 8, kNow - 5000);  // not preemptible by job 3 (same class)
  running(2, "b", "research", 1, 8, kNow - 5000);             // b borrows: a priority victim
  pending(3, "a", "production-training", 1, 8, 0);
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty()) << "queue a is at its limit of 8 H100s: job 3 could not start anyway";
  EXPECT_TRUE(d.start.empty());
}

// A preemptor whose victim is still checkpointing (asked in an earlier cycle) waits for it; it does
// not preempt another job in the cycles before the victim leaves.
TEST_F(SchedulerTest, VictimStillCheckpointingIsCountedNotAnotherOne) {
  make_cluster(2, 8);
  make_queues({{"q", "", {}, {}, 1}});
  Job& leaving = running(1, "q", "research", 1, 8, kNow - 5000);
  leaving.checkpoint.interval = 600;
  leaving.state = JobState::kCheckpointing;
  running(2, "q", "research", 1, 8, kNow - 5000).checkpoint.interval = 600;
  pending(3, "q", "production-inference", 1, 8, 0);
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty()) << "job 1 is leaving: its 8 GPUs are enough";
  EXPECT_TRUE(d.start.empty());
  EXPECT_TRUE(info(d, 3)->reserved) << "its reservation is job 1's exit";
}

// The cycle after a reclaim evicted a borrower's production-training job: that job (a higher tier)
// must not take back the GPUs the owner is owed, or the owner reclaims again, every cycle.
TEST_F(SchedulerTest, HigherTierBorrowerDoesNotRetakeWhatAnOwnerIsOwed) {
  make_cluster(2, 8);
  make_queues({{"owner", "", {{"H100-80GB-SXM", 8000}}, {}, 1}, {"borrower", "", {}, {}, 1}});
  running(1, "borrower", "production-inference", 1, 8, kNow - 1000);
  pending(2, "borrower", "production-training", 1, 8, 0);  // just reclaimed
  pending(3, "owner", "research", 1, 8, 0);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3}));
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_NE(info(d, 2)->reason.find("queue owner is owed"), std::string::npos) << info(d, 2)->reason;
}

// Free GPUs are owed only to waiting jobs that could use them: an owner below its guarantee whose
// only waiting job is a gang bigger than the free GPUs does not keep a borrower off them (it keeps
// its reservation). HigherTierBorrowerDoesNotRetakeWhatAnOwnerIsOwed is the other side.
TEST_F(SchedulerTest, FreeGpusTheOwnersJobsCannotUseAreLent) {
  make_cluster(3, 8);
  make_queues({{"owner", "", {{"H100-80GB-SXM", 8000}}, {}, 1}, {"borrower", "", {}, {}, 1}});
  running(1, "borrower", "research", 1, 8, kNow - 1000);
  running(2, "borrower", "research", 1, 4, kNow - 1000);  // free: 4 on n1, 8 on n2
  pending(3, "owner", "research", 2, 8, 0);               // 16 GPUs: more than its guarantee, no reclaim
  pending(4, "borrower", "research", 1, 8, 1).expected_runtime = 600;
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{4})) << (info(d, 4) ? info(d, 4)->reason : "");
  EXPECT_TRUE(d.preempt.empty());
  ASSERT_NE(info(d, 3), nullptr);
}

// Two preemptors in one cycle: the second uses what the first one's victim leaves over (a 16-GPU
// gang for an 8-GPU job) instead of preempting another gang.
TEST_F(SchedulerTest, SecondPreemptorUsesTheFirstVictimsLeftover) {
  make_cluster(4, 8);
  make_queues({{"q", "", {}, {}, 1}});
  running(1, "q", "research", 2, 8, kNow - 5000).checkpoint.interval = 600;
  running(2, "q", "research", 2, 8, kNow - 5000).checkpoint.interval = 600;
  pending(3, "q", "production-inference", 1, 8, 0);
  pending(4, "q", "production-inference", 1, 8, 1);
  Decisions d = cycle();
  EXPECT_EQ(victims(d).size(), 1u) << "one gang frees 16 GPUs: enough for both";
  EXPECT_EQ(info(d, 3)->reason, "waiting for 1 preempted job to checkpoint and exit");
  EXPECT_TRUE(d.start.empty());
}

TEST_F(SchedulerTest, ReclaimForAMultiGpuTaskTakesVictimsNodeByNode) {
  make_cluster(2, 4);
  make_queues({{"a", "", {{"any", 4000}}, {}, 1}, {"b", "", {}, {}, 1}});
  config.max_preemptions_per_cycle = 4;
  // Borrower b's 1-GPU jobs: odd ids on n0, even ids on n1; the lower the id, the less work lost.
  for (int i : {1, 3, 5, 7}) running(i, "b", "research", 1, 1, kNow - 100 * i);
  for (int i : {2, 4, 6, 8}) running(i, "b", "research", 1, 1, kNow - 100 * i);
  pending(9, "a", "research", 1, 4, 0);  // four GPUs on one node
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{1, 3, 5, 7}))
      << "n0 loses the least in all; the four cheapest jobs overall (1-4) would free no node";
}

TEST_F(SchedulerTest, ReclaimBeyondTheCycleBudgetPreemptsTheRestInLaterCycles) {
  make_cluster(1, 4);
  make_queues({{"a", "", {{"any", 4000}}, {}, 1}, {"b", "", {}, {}, 1}});
  config.max_preemptions_per_cycle = 1;
  for (int i = 1; i <= 4; ++i) running(i, "b", "research", 1, 1, kNow - 1000 * i);
  pending(5, "a", "research", 1, 4, 0);
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 1u);
  EXPECT_EQ(info(d, 5)->reason,
            "waiting for 1 preempted job to checkpoint and exit; 3 more to be preempted in later cycles "
            "(max_preemptions_per_cycle)");
  jobs[0].state = JobState::kCheckpointing;  // the first victim is on its way out
  d = cycle(kNow + 10);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 2u) << "the next one; the leaving one counts first";
  EXPECT_NE(info(d, 5)->reason.find("2 more to be preempted"), std::string::npos) << info(d, 5)->reason;

  config.max_preemptions_per_cycle = 1;
  jobs[0].state = JobState::kRunning;
  jobs[4].queue = q("b");  // not an owner: priority preemption keeps the strict budget (none here)
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(SchedulerTest, AnOwnersGuaranteeComesBeforeABorrowersReservation) {
  make_cluster(2, 4);
  make_queues({{"a", "", {{"any", 4000}}, {}, 1}, {"b", "", {}, {}, 1}, {"c", "", {}, {}, 1}});
  running(1, "c", "production-training", 1, 2, kNow - 100).expected_runtime = 3700;  // n0, 2 free
  for (int i = 2; i <= 5; ++i) running(i, "b", "production-training", 1, 1, kNow - 100 * i);  // n1 full
  pending(6, "c", "production-training", 1, 4, 0);  // borrower c reserves n0 from kNow + 3600
  pending(7, "a", "research", 1, 1, 10);            // owed, fits now only on the reserved n0
  pending(8, "b", "research", 1, 1, 20);            // a borrower too: keeps off the reservation
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{7}));
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_NE(info(d, 8)->reason.find("backfill: would delay"), std::string::npos) << info(d, 8)->reason;
}

TEST_F(SchedulerTest, TheFreeGpusOfAPreemptorsFitAreHeldForItThisCycle) {
  make_cluster(1, 8);
  make_queues({{"a", "", {{"any", 8000}}, {}, 1}, {"b", "", {}, {}, 1}, {"c", "", {{"any", 8000}}, {}, 1}});
  config.backfill = false;
  Job& leaving = running(1, "b", "research", 1, 4, kNow - 1000);  // reclaimed: checkpointing out
  leaving.state = JobState::kCheckpointing;
  leaving.evict_by = kNow + 200;
  pending(2, "a", "research", 1, 8, 0);   // the owner, first in order: the free 4 and the leaving 4
  pending(3, "c", "research", 1, 4, 10);  // within its own guarantee (not a borrower), next in order
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty()) << "job 3 would take the owner's free half and leave its victim's exit to nobody";
  ASSERT_NE(info(d, 3), nullptr);
  EXPECT_NE(info(d, 3)->reason.find("4 GPUs held this cycle for job job-2, waiting for preempted jobs to leave"),
            std::string::npos)
      << info(d, 3)->reason;
  jobs[1].queue = q("b");  // job 2 is no longer owed anything and does not wait for the leaving job
  jobs[1].priority_class = "preemptible";
  d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3})) << "nothing is held: job 3 takes the free half";
}

// Team b's 1-GPU jobs sit one per node (b is within its guarantee, so reclaim may not take them) and
// team a is owed a 4-GPU task on one node.
class DefragmentTest : public SchedulerTest {
 protected:
  void SetUp() override {
    make_cluster(2, 4);
    make_queues({{"a", "", {{"any", 4000}}, {}, 1}, {"b", "", {{"any", 6000}}, {}, 1}});
    config.backfill = false;
    running(1, "b", "research", 1, 1, kNow - 5000).checkpoint.interval = 600;  // n0 GPU 0
    ASSERT_TRUE(cluster.set_schedulable(NodeId(0), false).ok());
    running(2, "b", "research", 1, 2, kNow - 9000).checkpoint.interval = 600;  // n1 GPUs 0-1
    ASSERT_TRUE(cluster.set_schedulable(NodeId(0), true).ok());
    pending(9, "a", "research", 1, 4, 0);
  }
};

TEST_F(DefragmentTest, AnOwedGangMovesAJobWithinItsGuaranteeToAnotherNode) {
  pending(10, "b", "research", 1, 1, 50);  // b is within its guarantee: it may start, off the held GPUs
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  const PreemptDecision& p = d.preempt[0];
  EXPECT_EQ(p.victim.value, 1u) << "n0 needs one GPU moved, n1 two";
  EXPECT_EQ(p.phase, PreemptPhase::kRequestCheckpoint);
  EXPECT_EQ(p.for_job.value, 9u);
  ASSERT_EQ(p.move_to.size(), 1u);
  EXPECT_EQ(p.move_to[0].node.value, 1u);
  ASSERT_EQ(p.move_to[0].gpus.size(), 1u);
  EXPECT_EQ(p.move_to[0].gpus[0].kind, GrantKind::kWhole);
  EXPECT_EQ(p.reason,
            "move: checkpoints and restarts at once on node n1 so that job job-9 of queue a, owed its guarantee, fits whole");
  EXPECT_EQ(info(d, 9)->reason, "waiting for 1 preempted job to checkpoint and exit (1 moved to other GPUs to make room)");
  // Job 10 starts on n1's last free GPU: n0's free three are held for job 9, n1's other for job 1.
  ASSERT_EQ(started(d), (std::vector<uint32_t>{10}));
  const TaskPlacement& ten = d.start[0].placement[0];
  EXPECT_EQ(ten.node.value, 1u);
  EXPECT_NE(ten.gpus[0].gpu, p.move_to[0].gpus[0].gpu);

  // Next cycle, job 1 checkpoints toward its exit: its new GPU stays held, job 9 waits for it, and
  // nothing new is preempted or started (job 11 finds no free GPU that is not held).
  jobs[0].state = JobState::kCheckpointing;
  jobs[0].evict_by = kNow + 300;
  jobs[0].move_to = p.move_to;
  jobs.back().state = JobState::kRunning;  // job 10 started
  jobs.back().started = kNow;
  jobs.back().placement = d.start[0].placement;
  ASSERT_TRUE(cluster.apply_all(d.start[0].placement).ok());
  pending(11, "b", "research", 1, 1, 60);
  d = cycle(kNow + 30);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_TRUE(d.start.empty());
  EXPECT_NE(info(d, 9)->reason.find("jobs preempted for it are checkpointing and leaving"), std::string::npos)
      << info(d, 9)->reason;
  EXPECT_NE(info(d, 11)->reason.find("3 GPUs held this cycle for job job-9"), std::string::npos) << info(d, 11)->reason;

  // Job 1 has left: it restarts on the held GPU, ahead of the order, and job 9 takes n0 whole.
  for (const TaskPlacement& tp : jobs[0].placement) ASSERT_TRUE(cluster.release(tp).ok());
  jobs[0].placement.clear();
  jobs[0].state = JobState::kPending;
  jobs[0].last_preempted = kNow + 60;
  d = cycle(kNow + 60);
  ASSERT_GE(d.start.size(), 2u);
  EXPECT_EQ(d.start[0].job.value, 1u);
  EXPECT_EQ(d.start[0].placement, jobs[0].move_to);
  bool nine = false;
  for (const StartDecision& s : d.start)
    if (s.job.value == 9) nine = s.placement.size() == 1 && s.placement[0].node.value == 0;
  EXPECT_TRUE(nine) << "job 9 starts whole on n0";
  EXPECT_TRUE(d.preempt.empty());
}

TEST_F(DefragmentTest, OnlyCheckpointingJobsOfNoHigherClassMoveAndOnlyWhenAsked) {
  config.defragment = false;
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty()) << "defragment off";
  config.defragment = true;
  jobs[0].checkpoint.interval = 0;  // job 1 would lose its work
  jobs[1].checkpoint.interval = 0;
  EXPECT_TRUE(cycle().preempt.empty()) << "jobs that do not checkpoint are not moved";
  jobs[0].checkpoint.interval = jobs[1].checkpoint.interval = 600;
  jobs[0].priority_class = jobs[1].priority_class = "production-training";
  EXPECT_TRUE(cycle().preempt.empty()) << "a higher class is not moved for a research job";
  jobs[0].priority_class = jobs[1].priority_class = "research";
  jobs[0].last_preempted = jobs[1].last_preempted = kNow - 100;
  EXPECT_TRUE(cycle().preempt.empty()) << "moved or preempted within preemption_protection";
  jobs[0].last_preempted = jobs[1].last_preempted = -1;
  config.max_moves_per_cycle = 0;
  EXPECT_TRUE(cycle().preempt.empty());
  config.max_moves_per_cycle = 8;
  EXPECT_EQ(victims(cycle()), (std::set<uint32_t>{1}));
  jobs[2].queue = q("b");  // b is not owed the 4 (it would pass its guarantee): no move for it
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(DefragmentTest, AMoveNeedsRoomElsewhereForEveryMover) {
  // n1's two free GPUs taken: job 1 has nowhere to go, and moving job 2 to n0 frees no node either.
  ASSERT_TRUE(cluster.set_schedulable(NodeId(0), false).ok());
  running(3, "b", "research", 1, 2, kNow - 100).checkpoint.interval = 600;
  ASSERT_TRUE(cluster.set_schedulable(NodeId(0), true).ok());
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_TRUE(d.start.empty());
}

TEST_F(DefragmentTest, AMovedJobWhoseGpusWereTakenIsPlacedInOrder) {
  jobs[0].move_to = {TaskPlacement{NodeId(1), MilliCpu{1000}, MiB{1024}, 1, {GpuGrant{1}}}};  // n1 GPU 1: taken
  for (const TaskPlacement& tp : jobs[0].placement) ASSERT_TRUE(cluster.release(tp).ok());
  jobs[0].placement.clear();
  jobs[0].state = JobState::kPending;
  jobs[0].last_preempted = kNow - 10;
  Decisions d = cycle();
  bool one = false;
  for (const StartDecision& s : d.start)
    if (s.job.value == 1) one = !(s.placement[0].node.value == 1 && s.placement[0].gpus[0].gpu == 1);
  EXPECT_TRUE(one) << "job 1 starts where the engine puts it";
}

TEST_F(DefragmentTest, AMoverMayGoWhereABorrowerIsReclaimedForIt) {
  // 3 nodes of 4: every node runs one 1-GPU job of d (within its guarantee) and three GPUs of
  // borrower c. Reclaiming all of c still leaves no node whole: d's job on n0 moves onto GPUs of one
  // of c's jobs elsewhere, which is reclaimed for it, and c's job on n0 for the gang.
  jobs.clear();
  make_cluster(3, 4);
  make_queues({{"a", "", {{"any", 4000}}, {}, 1}, {"c", "", {}, {}, 1}, {"d", "", {{"any", 3000}}, {}, 1}});
  for (int n = 0; n < 3; ++n) {
    running(1 + n, "d", "research", 1, 1, kNow - 5000).checkpoint.interval = 600;
    running(4 + n, "c", "research", 1, 3, kNow - 8000).checkpoint.interval = 600;
  }
  pending(9, "a", "research", 1, 4, 0);
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 3u) << info(d, 9)->reason;
  std::set<uint32_t> reclaimed;
  const PreemptDecision* move = nullptr;
  for (const PreemptDecision& p : d.preempt) {
    EXPECT_EQ(p.for_job.value, 9u);
    if (p.move_to.empty()) reclaimed.insert(p.victim.value);
    else move = &p;
  }
  ASSERT_NE(move, nullptr);
  EXPECT_EQ(move->victim.value, 1u) << "d's job on n0";
  ASSERT_EQ(move->move_to.size(), 1u);
  const uint32_t dest = move->move_to[0].node.value;
  EXPECT_NE(dest, 0u);
  EXPECT_EQ(reclaimed, (std::set<uint32_t>{4, 4 + dest})) << "c's jobs on n0 (for the gang) and on the mover's node";
  EXPECT_TRUE(d.start.empty());
}

TEST_F(SchedulerTest, ABorrowingStartWaitsForTheOwedInItsTier) {
  // a runs 16 of its 24 guaranteed GPUs and is owed a whole node for its gang; b (guarantee 2) is
  // first in the order (it uses nothing) but its 8-GPU job would borrow 6. The totals allow both
  // (16 free, 8 owed), the shapes do not: n3 is the only whole node.
  make_cluster(4, 8);
  make_queues({{"a", "", {{"any", 24000}}, {}, 1}, {"b", "", {{"any", 2000}}, {}, 1}});
  config.backfill = false;
  running(1, "a", "research", 1, 8, kNow - 100);  // n0
  running(2, "a", "research", 1, 4, kNow - 100);  // n1
  ASSERT_TRUE(cluster.set_schedulable(NodeId(1), false).ok());
  running(3, "a", "research", 1, 4, kNow - 100);  // n2
  ASSERT_TRUE(cluster.set_schedulable(NodeId(1), true).ok());
  pending(4, "b", "research", 1, 8, 0);
  pending(5, "a", "research", 1, 8, 10);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{5})) << "the owner's gang first; b's borrowing start after it";
  ASSERT_EQ(d.start.size(), 1u);
  EXPECT_EQ(d.start[0].placement[0].node.value, 3u);
  EXPECT_EQ(info(d, 4)->overall_position, 1);
}

TEST_F(SchedulerTest, GpusOfAJobLeavingForAnOwnerAreOwedNotLent) {
  make_cluster(1, 8);
  make_queues({{"a", "", {{"any", 8000}}, {}, 1}, {"b", "", {}, {}, 1}});
  config.backfill = false;  // no reservation: the owed rule alone keeps the borrower off
  Job& leaving = running(1, "b", "research", 1, 4, kNow - 1000);  // reclaimed: checkpointing out
  leaving.state = JobState::kCheckpointing;
  leaving.evict_by = kNow + 200;
  pending(2, "a", "research", 1, 8, 0);   // the owner: needs the free 4 and the leaving 4
  // A borrower that would fit in the free 4 now, tried first (a higher tier): the owed rule keeps it
  // off (in the owner's tier the free 4 are already held for the owner, SchedulerTest.TheFreeGpus...).
  pending(3, "b", "production-training", 1, 4, 10);
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty()) << "the free GPUs wait for the owner, with the ones on their way";
  EXPECT_TRUE(d.preempt.empty());
  ASSERT_NE(info(d, 3), nullptr);
  EXPECT_NE(info(d, 3)->reason.find("that queue a is owed"), std::string::npos) << info(d, 3)->reason;
}

TEST_F(SchedulerTest, ReclaimNeverTakesAQueueBelowItsGuarantee) {
  make_cluster(2, 2);
  make_queues({{"a", "", {{"any", 2000}}, {}, 1}, {"b", "", {{"any", 2000}}, {}, 1}});
  running(1, "b", "research", 1, 1, kNow - 1000);              // node 0
  running(2, "b", "research", 1, 1, kNow - 1000);              // node 0
  running(3, "b", "production-inference", 1, 1, kNow - 1000);  // node 1: b borrows 1 GPU
  pending(4, "a", "research", 1, 2, 0);  // needs node 0 whole: jobs 1 and 2
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty()) << "taking jobs 1 and 2 would leave b below its guarantee";
}

TEST_F(SchedulerTest, ProductionInferenceIsNeverPreemptedByLowerClasses) {
  make_cluster(1, 2);
  make_queues({{"a", "", {{"any", 2000}}, {}, 1}, {"b", "", {}, {}, 1}});
  running(1, "b", "production-inference", 1, 1, kNow - 7200);  // borrowing in b
  running(2, "a", "production-inference", 1, 1, kNow - 7200);
  pending(3, "a", "production-training", 1, 1, 0);  // could reclaim job 1, could not priority-preempt
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty());
  // A production-inference job of queue a may reclaim it.
  jobs.back().priority_class = "production-inference";
  d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{1}));
}

TEST_F(SchedulerTest, AtMostMaxPreemptionsPerCycle) {
  make_cluster(1, 4);
  make_queues({{"a", "", {}, {}, 1}});
  config.max_preemptions_per_cycle = 1;
  for (int i = 1; i <= 4; ++i) running(i, "a", "preemptible", 1, 1, kNow - 1000);
  pending(5, "a", "production-training", 1, 1, 0);
  pending(6, "a", "production-training", 1, 1, 1);
  pending(7, "a", "production-training", 1, 2, 2);
  Decisions d = cycle();
  EXPECT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].for_job.value, 5u);
  EXPECT_EQ(info(d, 6)->reason.find("waiting for"), std::string::npos);
  config.max_preemptions_per_cycle = 16;
  d = cycle();
  EXPECT_EQ(d.preempt.size(), 4u);
}

TEST_F(SchedulerTest, FruitlessVictimSearchesAreBoundedPerCycle) {
  // Two nodes of 8, each with four 1-GPU preemptible jobs and a 4-GPU inference job (never a
  // victim). Job 9 (8 GPUs on one node) cannot be helped, though the victims add up to 8 GPUs: its
  // search finds nothing. With one search per cycle, job 10 (which one victim would help) waits
  // for the next cycle; with two it preempts at once.
  make_cluster(2, 8);
  make_queues({{"a", "", {}, {}, 1}});
  for (int i = 1; i <= 4; ++i) running(i, "a", "preemptible", 1, 1, kNow - 1000);
  running(5, "a", "production-inference", 1, 4, kNow - 1000);
  for (int i = 6; i <= 7; ++i) running(i, "a", "preemptible", 1, 1, kNow - 1000);
  running(8, "a", "production-inference", 1, 4, kNow - 1000);
  for (int i = 11; i <= 12; ++i) running(i, "a", "preemptible", 1, 1, kNow - 1000);
  pending(9, "a", "production-inference", 1, 8, 0);
  pending(10, "a", "production-training", 1, 1, 1);
  config.max_victim_searches_per_cycle = 1;
  Decisions d = cycle();
  EXPECT_TRUE(d.preempt.empty());
  config.max_victim_searches_per_cycle = 2;
  d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].for_job.value, 10u);
}

TEST_F(SchedulerTest, NoPreemptionLoop) {
  make_cluster(1, 1);
  make_queues({{"a", "", {}, {}, 1}});
  config.preemption_protection = 0;
  config.priority_classes = {{"hi", 10, true, true, 0}, {"lo", 5, true, true, 0}};
  // A (hi) preempts B (lo)...
  running(1, "a", "lo", 1, 1, kNow - 100);
  pending(2, "a", "hi", 1, 1, 0);
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{1}));
  // ... then, A running and B pending again, B cannot preempt A.
  jobs.clear();
  make_cluster(1, 1);
  running(2, "a", "hi", 1, 1, kNow);
  pending(1, "a", "lo", 1, 1, 0).last_preempted = kNow;
  d = cycle(kNow + 1000);
  EXPECT_TRUE(d.preempt.empty());
  // Equal classes never preempt each other.
  jobs.clear();
  make_cluster(1, 1);
  running(1, "a", "hi", 1, 1, kNow - 100);
  pending(2, "a", "hi", 1, 1, 0);
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(SchedulerTest, NoReclaimLoop) {
  make_queues({{"a", "", {{"any", 1000}}, {}, 1}, {"b", "", {{"any", 1000}}, {}, 1}});
  config.preemption_protection = 0;
  // b borrows a's GPU; a takes it back.
  make_cluster(1, 2);
  running(1, "b", "production-training", 1, 1, kNow - 5000);
  running(2, "b", "research", 1, 1, kNow - 4000);  // the cheaper victim
  pending(3, "a", "research", 1, 1, 0);
  Decisions d = cycle();
  EXPECT_EQ(victims(d), (std::set<uint32_t>{2}));
  // Next: a runs within its guarantee; b's pending job cannot take it back, nor by priority.
  jobs.clear();
  make_cluster(1, 2);
  running(1, "b", "production-training", 1, 1, kNow - 5000);
  running(3, "a", "research", 1, 1, kNow);
  pending(2, "b", "production-training", 1, 1, 0);
  d = cycle(kNow + 5000);
  EXPECT_TRUE(d.preempt.empty());
}

TEST_F(SchedulerTest, InvalidQueueOrClassGivesAReason) {
  make_cluster(1, 4);
  make_queues({{"org", "", {}, {}, 1}, {"a", "org", {}, {}, 1}});
  pending(1, "a", "research", 1, 1);
  pending(2, "a", "gold", 1, 1);
  pending(3, "org", "research", 1, 1);
  pending(4, "a", "research", 1, 1).queue = QueueId(99);
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{1}));
  EXPECT_NE(info(d, 2)->reason.find("priority_class"), std::string::npos) << info(d, 2)->reason;
  EXPECT_NE(info(d, 2)->reason.find("gold"), std::string::npos);
  EXPECT_NE(info(d, 3)->reason.find("not a leaf"), std::string::npos) << info(d, 3)->reason;
  EXPECT_NE(info(d, 4)->reason.find("queue"), std::string::npos) << info(d, 4)->reason;
  EXPECT_EQ(d.pending.size(), 3u);
}

std::string dump(const Decisions& d) {
  std::ostringstream o;
  for (auto& s : d.start) {
    o << "S" << s.job.value;
    for (auto& t : s.placement) {
      o << " n" << t.node.value;
      for (auto& g : t.gpus) o << "/" << g.gpu;
    }
    o << "\n";
  }
  for (auto& p : d.preempt) o << "P" << p.victim.value << ">" << p.for_job.value << " " << int(p.phase) << p.reason << "\n";
  for (auto& p : d.pending) o << "W" << p.job.value << " " << p.queue_position << " " << p.overall_position << p.reason << "\n";
  return o.str();
}

TEST_F(SchedulerTest, SameSnapshotGivesSameDecisions) {
  make_cluster(3, 8);
  make_queues({{"org", "", {{"any", 8000}}, {}, 2}, {"a", "org", {{"any", 4000}}, {}, 1}, {"b", "org", {}, {}, 1},
               {"c", "", {}, {}, 1}});
  int id = 1;
  for (int i = 0; i < 6; ++i) running(id++, i % 2 ? "b" : "c", i % 3 ? "preemptible" : "research", 1, 2, kNow - 100 * i);
  for (int i = 0; i < 20; ++i)
    pending(id++, i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c", i % 4 ? "research" : "production-training", 1 + i % 2,
            1 + i % 4, i % 5, "u" + std::to_string(i % 3));
  const std::string first = dump(cycle());
  EXPECT_FALSE(first.empty());
  for (int k = 0; k < 3; ++k) EXPECT_EQ(dump(cycle()), first);
  std::reverse(jobs.begin(), jobs.end());
  EXPECT_EQ(dump(cycle()), first) << "the jobs' order in the snapshot does not matter";
}

TEST_F(SchedulerTest, CheckpointGraceThenEvictAndReclaimGraceCap) {
  make_cluster(1, 8);
  make_queues({{"owner", "", {{"any", 8000}}, {}, 1}, {"borrower", "", {}, {}, 1}});
  Job& b = running(1, "borrower", "research", 1, 8, kNow - 5000);
  b.checkpoint.interval = 600;
  b.checkpoint.grace = 900;
  pending(2, "owner", "research", 1, 8, 0);
  config.reclaim_grace = 120;
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].phase, PreemptPhase::kRequestCheckpoint);
  EXPECT_EQ(d.preempt[0].evict_by, kNow + 120) << "reclaim caps the job's 900 s grace";
  // The caller acted: the job is checkpointing, to be evicted at kNow + 120.
  jobs[0].state = JobState::kCheckpointing;
  jobs[0].evict_by = kNow + 120;
  d = cycle(kNow + 60);
  EXPECT_TRUE(d.preempt.empty()) << "within its grace nothing more happens";
  EXPECT_TRUE(info(d, 2)->reserved) << "the owner is next: its reservation is the victim's exit";
  EXPECT_EQ(info(d, 2)->estimated_start, std::optional<Time>(kNow + 120));
  d = cycle(kNow + 120);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 1u);
  EXPECT_EQ(d.preempt[0].phase, PreemptPhase::kEvict);
  EXPECT_NE(d.preempt[0].reason.find("grace expired"), std::string::npos);
}

// --- Baseline orders in the same engine ---

TEST_F(SchedulerTest, PresetsAreNamedAndUnknownOnesListTheKnown) {
  for (const std::string& n : scheduler_preset_names()) {
    auto c = scheduler_preset(n);
    ASSERT_TRUE(c.ok()) << n;
    EXPECT_TRUE(Scheduler::create(*c).ok()) << n;
  }
  auto bad = scheduler_preset("yarn");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("known: tessera, fifo-gang, slurm, tiresias, drf"), std::string::npos);
}

TEST_F(SchedulerTest, FifoGangBlocksBehindTheHead) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 4, kNow - 10);
  pending(2, "a", "research", 1, 8, 0);   // head: does not fit
  pending(3, "a", "research", 1, 2, 10);  // would fit, but FIFO is strict
  config = *scheduler_preset("fifo-gang");
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty());
  EXPECT_EQ(info(d, 3)->reason, "waiting behind job job-2 (strict FIFO order)");
  config = *scheduler_preset("tessera");
  config.backfill = false;
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{3})) << "Tessera skips a blocked head";
}

TEST_F(SchedulerTest, MultifactorServesTheUnderservedQueueFirst) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}});
  running(1, "a", "research", 1, 6, kNow - 10);  // a uses 6 of 8 GPUs
  pending(2, "a", "research", 1, 2, kNow - 3600);  // older
  pending(3, "b", "research", 1, 2, kNow - 60);
  config = *scheduler_preset("slurm");
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{3})) << "fair share outweighs an hour of age";
  config.multifactor.fairshare = 0;
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{2})) << "age alone: the older job";
}

TEST_F(SchedulerTest, LeastAttainedServicePreemptsTheLongestServed) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 8, kNow - 100000).attained_gpu_s = 800000;  // past every threshold
  pending(2, "a", "research", 1, 8, kNow - 10);                               // new: top level
  config = *scheduler_preset("tiresias");
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 1u);
  jobs[0].attained_gpu_s = 0;  // same level: FIFO inside it, no preemption
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(SchedulerTest, InQueueLeastAttainedOrdersAndPreemptsOnlyInsideTheQueue) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}});
  running(1, "a", "research", 1, 4, kNow - 100000).attained_gpu_s = 400000;  // past every threshold
  running(2, "b", "research", 1, 4, kNow - 100000).attained_gpu_s = 400000;  // another team's
  pending(3, "a", "research", 1, 4, kNow - 10);                              // new: level 0
  config.in_queue_las = true;
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 1u) << "only its own queue's long-served job gives way";
  EXPECT_EQ(d.preempt[0].reason,
            "least attained service: job job-3 of the same queue has run less and needs 4 GPUs");

  config.in_queue_las = false;
  EXPECT_TRUE(cycle().preempt.empty()) << "off: equal classes of one queue never preempt";

  config.in_queue_las = true;
  make_queues({{"a", "", {{"any", 8000}}, {}, 1}, {"b", "", {}, {}, 1}});
  d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 2u) << "a queue with guarantee left reclaims from the borrower instead";
  make_queues({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}});

  jobs[0].started = kNow - 60;  // research's 10 min minimum runtime protects it
  EXPECT_TRUE(cycle().preempt.empty());
  jobs[0].started = kNow - 100000;
  jobs[0].attained_gpu_s = 100;  // same level as the waiting job: no preemption
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(SchedulerTest, InQueueLeastAttainedStartsTheLeastServedFirst) {
  make_cluster(1, 4);
  make_queues({{"a", "", {}, {}, 1}});
  pending(1, "a", "research", 1, 4, 0).attained_gpu_s = 50000;  // older, preempted after long service
  pending(2, "a", "research", 1, 4, 100);
  config.in_queue_las = true;
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{2}));
  config.in_queue_las = false;
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{1})) << "off: by submission";
}

TEST_F(SchedulerTest, TopologyWaitHoldsASpreadableGangForOneNodeThenSpreadsIt) {
  make_cluster(2, 4);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 3, kNow - 100);  // n0: 1 GPU free
  running(2, "a", "research", 1, 3, kNow - 100);  // n1: 1 GPU free
  // Two 1-GPU tasks that prefer one node: no node has two free GPUs, spread over both they fit.
  Job& j = pending(3, "a", "research", 2, 1, kNow - 600);
  j.gang.topology = {TopologyMode::kPreferred, "node"};
  EXPECT_EQ(started(cycle()), (std::vector<uint32_t>{3})) << "no wait configured: spread at once";

  config.topology_wait = 3600;
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty()) << "10 minutes into an hour's wait: holds out for one node";
  ASSERT_NE(info(d, 3), nullptr);
  EXPECT_NE(info(d, 3)->reason.find("holds out for one node (config.topology_wait 1h"), std::string::npos)
      << info(d, 3)->reason;

  jobs.back().submitted = kNow - 3600;
  d = cycle();
  ASSERT_EQ(started(d), (std::vector<uint32_t>{3})) << "the wait is over: spread";
  std::set<uint32_t> nodes;
  for (const TaskPlacement& p : d.start[0].placement) nodes.insert(p.node.value);
  EXPECT_EQ(nodes.size(), 2u);

  jobs.back().last_preempted = kNow - 60;  // a stopped job waits afresh
  EXPECT_TRUE(cycle().start.empty());
}

TEST_F(SchedulerTest, DrfServesTheLowestDominantShare) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}});
  running(1, "a", "research", 1, 4, kNow - 10);
  pending(2, "a", "research", 1, 4, 0);   // older, but a already holds half the GPUs
  pending(3, "b", "research", 1, 4, 50);
  config = *scheduler_preset("drf");
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3}));
  EXPECT_EQ(d.pending.size(), 1u);
  EXPECT_EQ(d.pending[0].job.value, 2u);
}

// --- Backfill and reservations (EASY) ---

TEST_F(SchedulerTest, BlockedGangGetsAReservationAtTheEarliestEnd) {
  make_cluster(2, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 4, kNow - 100).expected_runtime = 1000;  // ends at kNow + 900
  running(2, "a", "research", 1, 4, kNow - 100).expected_runtime = 3000;  // ends at kNow + 2900
  running(3, "a", "research", 1, 4, kNow - 100).expected_runtime = 5000;  // ends at kNow + 4900
  Job& big = pending(4, "a", "research", 2, 8, 0);  // needs both nodes whole: only when all three are gone
  big.gang.task.cpu = MilliCpu(0);  // asks GPUs only: its reason names no CPU or memory
  big.gang.task.memory = MiB(0);
  Decisions d = cycle();
  const PendingInfo* p = info(d, 4);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->reserved);
  ASSERT_TRUE(p->estimated_start.has_value());
  EXPECT_EQ(*p->estimated_start, kNow + 4900);
  // Relative to the cycle's time: no raw epoch seconds (the API carries estimated_start for local times).
  EXPECT_NE(p->reason.find("reserved to start in 1h 21m"), std::string::npos) << p->reason;
  EXPECT_EQ(p->reason.find("t="), std::string::npos) << p->reason;
  EXPECT_NE(p->reason.find("(2 tasks of 8 GPUs)"), std::string::npos) << "the job asked no CPU or memory: " << p->reason;
  EXPECT_EQ(p->reason.find("CPU"), std::string::npos) << p->reason;
  EXPECT_EQ(p->reason.find("MiB"), std::string::npos) << p->reason;
}

TEST_F(SchedulerTest, BackfillStartsOnlyWhatDoesNotDelayTheReservation) {
  make_cluster(2, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 8, kNow - 100).expected_runtime = 3700;  // node 0 busy until kNow + 3600
  pending(2, "a", "research", 2, 8, 0);  // reserved at kNow + 3600 on both nodes
  pending(3, "a", "research", 1, 4, 10).expected_runtime = 7200;  // would run past the reservation
  pending(4, "a", "research", 1, 4, 20).expected_runtime = 1800;  // ends before it: backfills
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{4}));
  const PendingInfo* p2 = info(d, 2);
  ASSERT_NE(p2, nullptr);
  EXPECT_TRUE(p2->reserved);
  EXPECT_EQ(p2->estimated_start, std::optional<Time>(kNow + 3600));
  const PendingInfo* p3 = info(d, 3);
  ASSERT_NE(p3, nullptr);
  EXPECT_FALSE(p3->reserved);
  EXPECT_NE(p3->reason.find("backfill: would delay job job-2's reservation"), std::string::npos) << p3->reason;

  config.backfill = false;  // without backfill the reservation is not kept: job 3 starts too
  d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3, 4}));
  EXPECT_FALSE(info(d, 2)->reserved);
}

// A gang naming no model, whose queue's limit on the model class its GPUs would have is reached,
// gets no reservation (it could not start then anyway), so it blocks no backfill.
TEST_F(SchedulerTest, NoReservationForAJobTheLimitOnItsGpusWouldRefuse) {
  make_cluster(4, 8);
  make_queues({{"a", "", {}, {{"H100-80GB-SXM", 16000}}, 1}, {"b", "", {}, {}, 1}});
  running(1, "a", "research", 2, 8, kNow - 100).expected_runtime = 4000;
  running(2, "b", "research", 1, 8, kNow - 100).expected_runtime = 1000;
  pending(3, "a", "research", 2, 8, 0);
  pending(4, "b", "research", 1, 8, 10).expected_runtime = 10000;
  Decisions d = cycle();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{4}));
  EXPECT_FALSE(info(d, 3)->reserved);
  EXPECT_NE(info(d, 3)->reason.find("no reservation: queue a at its limit of 16 GPUs"), std::string::npos)
      << info(d, 3)->reason;
}

TEST_F(SchedulerTest, BackfillKeepsOffReservedNodesButUsesOthers) {
  make_cluster(3, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 8, kNow - 100).expected_runtime = 3700;  // n0 until kNow + 3600
  running(2, "a", "research", 1, 4, kNow - 100).expected_runtime = 90000;  // n1 half, for a day
  pending(3, "a", "research", 2, 8, 0);     // two whole nodes: n0 and n2 at kNow + 3600
  pending(4, "a", "research", 1, 4, 10);    // unknown runtime (24 h): may not touch n0 or n2
  pending(5, "a", "research", 1, 8, 20);    // a whole node for 24 h: none off the reservation
  Decisions d = cycle();
  ASSERT_EQ(started(d), (std::vector<uint32_t>{4}));
  EXPECT_EQ(cluster.node(d.start[0].placement[0].node).name, "n1") << "backfilled next to job 2";
  EXPECT_EQ(info(d, 3)->estimated_start, std::optional<Time>(kNow + 3600));
  EXPECT_NE(info(d, 5)->reason.find("backfill: would delay"), std::string::npos) << info(d, 5)->reason;
}

TEST_F(SchedulerTest, ReservationUsesLearnedRuntimes) {
  make_cluster(1, 8);
  make_queues({{"a", "", {}, {}, 1}});
  running(1, "a", "research", 1, 8, kNow - 100);  // no estimate: the history knows job-1 runs 600 s
  pending(2, "a", "research", 1, 8, 0);
  RuntimeHistory history;
  history.record("u", "job-1", 500);
  history.record("u", "job-1", 600);
  history.record("u", "other", 9000);
  auto s = Scheduler::create(config);
  ASSERT_TRUE(s.ok());
  Snapshot snap = snapshot();
  snap.runtimes = &history;
  Decisions d = s.value()->cycle(snap, kNow);
  EXPECT_EQ(info(d, 2)->estimated_start, std::optional<Time>(kNow + 500)) << "longest recent run: 600 s";
  snap.runtimes = nullptr;
  d = s.value()->cycle(snap, kNow);
  EXPECT_EQ(info(d, 2)->estimated_start, std::optional<Time>(kNow - 100 + config.default_runtime));
  jobs[0].max_runtime = 300;  // a hard cap wins over the learned estimate
  snap.jobs = jobs;
  snap.runtimes = &history;
  d = s.value()->cycle(snap, kNow);
  EXPECT_EQ(info(d, 2)->estimated_start, std::optional<Time>(kNow + 200));
}

TEST_F(SchedulerTest, RuntimeHistoryKeepsTheLongestOfTheLastRuns) {
  RuntimeHistory h;
  EXPECT_FALSE(h.estimate("u", "x").has_value());
  h.record("u", "x", 100);
  h.record("u", "x", 0);  // ignored
  EXPECT_EQ(h.estimate("u", "x"), std::optional<Duration>(100));
  h.record("u", "x", 5000);
  for (int i = 0; i < int(RuntimeHistory::kKeep); ++i) h.record("u", "x", 200);
  EXPECT_EQ(h.estimate("u", "x"), std::optional<Duration>(200)) << "5000 fell out of the window";
  EXPECT_FALSE(h.estimate("v", "x").has_value()) << "per user";
}

// --- Dynamic MIG ---

TEST_F(SchedulerTest, PendingMigWorkTurnsAnIdleWholeGpuIntoSlices) {
  make_cluster(1, 2);
  make_queues({{"a", "", {}, {}, 1}});
  Job& j = pending(1, "a", "production-inference", 1, 0, 0);
  j.gang.task.mig_profile = "1g.10gb";
  j.gang.task.gpu_count = 1;
  j.gang.task.gpu_models = {"H100-80GB-SXM"};
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty()) << "no GPU is in MIG mode yet";
  ASSERT_EQ(d.reconfigure_mig.size(), 1u);
  const MigReconfigDecision& r = d.reconfigure_mig[0];
  EXPECT_TRUE(r.enable_mig);
  EXPECT_FALSE(r.layout.empty());
  EXPECT_EQ(r.ready_at, kNow + config.mig.reconfigure_cost);
  const PendingInfo* p = info(d, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->reason.find("MIG layout change planned on 1 GPU"), std::string::npos) << p->reason;
  EXPECT_EQ(p->estimated_start, std::optional<Time>(kNow + config.mig.reconfigure_cost));

  config.dynamic_mig = false;
  EXPECT_TRUE(cycle().reconfigure_mig.empty());
}

TEST_F(SchedulerTest, AnOwnersMigRequestReclaimsAWholeGpuFromABorrower) {
  make_cluster(1, 4);  // all whole, all held by the borrower
  make_queues({{"inference", "", {{"any", 2000}}, {}, 1}, {"train", "", {}, {}, 1}});
  for (int i = 1; i <= 4; ++i) running(i, "train", "research", 1, 1, kNow - 1000 * i);
  Job& j = pending(5, "inference", "production-inference", 1, 0, 0);
  j.gang.task.mig_profile = "2g.20gb";
  j.gang.task.gpu_count = 1;
  j.gang.task.gpu_models = {"H100-80GB-SXM"};
  Decisions d = cycle();
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].victim.value, 1u) << "the borrower's job that loses the least";
  EXPECT_EQ(d.preempt[0].reason, "reclaim: queue inference takes back its guarantee (a GPU for 2g.20gb MIG slices)");
  EXPECT_EQ(info(d, 5)->reason, "waiting for 1 preempted job to checkpoint and exit; its GPU then becomes 2g.20gb MIG slices");

  jobs[0].state = JobState::kCheckpointing;  // on its way out: no second victim
  EXPECT_TRUE(cycle(kNow + 10).preempt.empty());

  jobs[0].state = JobState::kRunning;
  make_queues({{"inference", "", {}, {}, 1}, {"train", "", {}, {}, 1}});  // no guarantee: nothing owed,
  d = cycle();                                                             // but urgent work frees a GPU
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0].reason.rfind("priority: ", 0), 0u) << d.preempt[0].reason;
  jobs.back().priority_class = "research";  // a slice of the borrower's own class takes nothing
  EXPECT_TRUE(cycle().preempt.empty());
}

TEST_F(SchedulerTest, AnOwedMigRequestGetsAnIdleGpuBeforeBorrowedTrainingDemand) {
  make_cluster(1, 4);
  make_queues({{"inference", "", {{"any", 2000}}, {}, 1}, {"train", "", {}, {}, 1}});
  running(1, "train", "research", 1, 3, kNow - 100);  // one GPU idle
  pending(2, "train", "research", 1, 2, 0);           // a borrower's training job waits for whole GPUs
  Job& j = pending(3, "inference", "production-inference", 1, 0, 0);
  j.gang.task.mig_profile = "2g.20gb";
  j.gang.task.gpu_count = 1;
  j.gang.task.gpu_models = {"H100-80GB-SXM"};
  Decisions d = cycle();
  ASSERT_EQ(d.reconfigure_mig.size(), 1u) << "the idle GPU becomes slices for the owed service";
  EXPECT_TRUE(d.reconfigure_mig[0].enable_mig);

  make_queues({{"inference", "", {}, {}, 1}, {"train", "", {}, {}, 1}});  // nobody is owed
  d = cycle();
  ASSERT_EQ(d.reconfigure_mig.size(), 1u) << "a production service comes before research training all the same";
  jobs.back().priority_class = "research";  // of the same class, whole-GPU demand keeps the GPU whole
  EXPECT_TRUE(cycle().reconfigure_mig.empty()) << "whole-GPU demand keeps the idle GPU whole";
}

TEST_F(SchedulerTest, TrainingWaitingOnMigGpusTurnsIdleOnesBackToWhole) {
  cluster = ClusterState();
  NodeSpec spec = node_spec("n0", "H100-80GB-SXM", 2);
  spec.mig_gpus = {0, 1};
  ASSERT_TRUE(cluster.add_node(spec).ok());
  make_queues({{"a", "", {}, {}, 1}});
  pending(1, "a", "production-training", 1, 2, 0);
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty());
  ASSERT_EQ(d.reconfigure_mig.size(), 2u);
  for (const MigReconfigDecision& r : d.reconfigure_mig) {
    EXPECT_FALSE(r.enable_mig);
    EXPECT_TRUE(r.layout.empty());
  }
  const PendingInfo* p = info(d, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->reason.find("in MIG mode now"), std::string::npos) << p->reason;
  EXPECT_NE(p->reason.find("turning MIG GPUs back to whole on 2 GPUs"), std::string::npos) << p->reason;
  // Hysteresis: GPUs changed a moment ago are left alone.
  auto s = Scheduler::create(config);
  ASSERT_TRUE(s.ok());
  Snapshot snap = snapshot();
  snap.mig_last_changed[GpuRef{NodeId(0), 0}] = kNow - 10;
  snap.mig_last_changed[GpuRef{NodeId(0), 1}] = kNow - 10;
  EXPECT_TRUE(s.value()->cycle(snap, kNow).reconfigure_mig.empty());
}

}  // namespace
}  // namespace tessera
