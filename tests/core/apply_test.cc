// Applying decisions (core/sched/apply.h) on hand-built clusters: each decision kind, the two-phase
// preemption, moves, MIG reconfiguration, refusals, and the job transitions callers use directly.
#include "core/sched/apply.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

constexpr Time kT = 1000;

class ApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.add_node(node_spec("n" + std::to_string(i), "H100-80GB-SXM", 8)).ok());
  }

  // `gpus` whole GPUs on node `node`, as one task.
  static TaskPlacement on(uint32_t node, std::vector<uint16_t> gpus) {
    TaskPlacement p;
    p.node = NodeId(node);
    p.cpu = MilliCpu(1000);
    p.memory = MiB(1024);
    p.task_class = task_class(whole(int(gpus.size())));
    for (uint16_t g : gpus) p.gpus.push_back(GpuGrant{g, GrantKind::kWhole, MilliGpu(1000), MiB(0), -1, 0, false, 0});
    return p;
  }
  Job& job(uint32_t id, int tasks = 1, int gpus = 1, Duration checkpoint_interval = 0) {
    Job j;
    j.id = JobId(id);
    j.name = "job-" + std::to_string(id);
    j.gang = gang(tasks, whole(gpus), int(id));
    j.checkpoint.interval = checkpoint_interval;
    return jobs[id] = j;
  }
  // A job running on `placement` (applied to the cluster) since `started`.
  Job& running(uint32_t id, std::vector<TaskPlacement> placement, Duration checkpoint_interval = 0, Time started = 0) {
    Job& j = job(id, int(placement.size()), int(placement.front().gpus.size()), checkpoint_interval);
    EXPECT_TRUE(cluster.apply_all(placement).ok());
    j.placement = std::move(placement);
    j.state = JobState::kRunning;
    j.started = started;
    return j;
  }
  JobLookup lookup() {
    return [this](JobId id) -> Job* {
      auto it = jobs.find(id.value);
      return it == jobs.end() ? nullptr : &it->second;
    };
  }
  ApplyResult apply(const Decisions& d, const ApplyOptions& o = {}, Time now = kT) {
    ApplyResult r = apply_decisions(d, cluster, lookup(), now, o);
    EXPECT_TRUE(cluster.check_invariants().ok());
    return r;
  }
  static StartDecision start(uint32_t id, std::vector<TaskPlacement> p) { return {JobId(id), std::move(p)}; }
  static PreemptDecision preempt(uint32_t id, PreemptPhase phase, Time evict_by, std::vector<TaskPlacement> move_to = {}) {
    PreemptDecision p;
    p.victim = JobId(id);
    p.for_job = JobId(99);
    p.phase = phase;
    p.reason = "test";
    p.evict_by = evict_by;
    p.move_to = std::move(move_to);
    return p;
  }
  const Gpu& gpu(uint32_t node, uint16_t index) const { return cluster.node(NodeId(node)).gpus[index]; }

  ClusterState cluster;
  std::map<uint32_t, Job> jobs;
};

TEST(MilliHeld, SumsWholeSharesAndMigInstances) {
  TaskPlacement p;
  p.gpus.push_back(GpuGrant{0, GrantKind::kWhole, MilliGpu(0), MiB(0), -1, 0, false, 0});
  p.gpus.push_back(GpuGrant{1, GrantKind::kShare, MilliGpu(250), MiB(1024), -1, 0, false, 0});
  p.gpus.push_back(GpuGrant{2, GrantKind::kMig, MilliGpu(142), MiB(0), 19, 0, true, 0});
  EXPECT_EQ(milli_held(p), 1392);
  EXPECT_EQ(milli_held(std::vector<TaskPlacement>{p, p}), 2784);
  EXPECT_EQ(milli_held(std::vector<TaskPlacement>{}), 0);
}

TEST_F(ApplyTest, StartRecordsPlacementAndRuns) {
  Job& j = job(1, 2, 4);
  Decisions d;
  d.start.push_back(start(1, {on(0, {0, 1, 2, 3}), on(1, {0, 1, 2, 3})}));
  const ApplyResult r = apply(d);
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_TRUE(r.refused.empty());
  EXPECT_TRUE(r.started[0].running);
  EXPECT_FALSE(r.started[0].off_move);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.started, kT);
  EXPECT_EQ(j.placement, d.start[0].placement);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 8000);
  EXPECT_EQ(milli_held(j.placement), 8000);
  EXPECT_TRUE(gpu(0, 3).whole_held);
  EXPECT_FALSE(gpu(0, 4).whole_held);
}

TEST_F(ApplyTest, StartClockAndCheckpointBookkeepingFollowTheOptions) {
  for (StartClock clock : {StartClock::kNow, StartClock::kAfterRestartCost}) {
    for (CheckpointOnStart ck : {CheckpointOnStart::kKeep, CheckpointOnStart::kFromStart}) {
      cluster = ClusterState();
      SetUp();
      Job& j = job(1, 1, 1, 600);
      j.preemptions = 1;  // a restart: the restart cost applies with kAfterRestartCost
      j.checkpoint.restart_cost = 120;
      j.checkpoint.last = 5;
      ApplyOptions o;
      o.started = clock;
      o.checkpoint_on_start = ck;
      Decisions d;
      d.start.push_back(start(1, {on(0, {0})}));
      apply(d, o);
      const Time started = clock == StartClock::kNow ? kT : kT + 120;
      EXPECT_EQ(j.started, started);
      EXPECT_EQ(j.checkpoint.last, ck == CheckpointOnStart::kKeep ? 5 : started);
    }
  }
  // A first run has no restart cost; a job that does not checkpoint keeps its checkpoint.last.
  Job& first = job(2, 1, 1, 0);
  first.checkpoint.restart_cost = 120;
  first.checkpoint.last = -1;
  ApplyOptions o;
  o.started = StartClock::kAfterRestartCost;
  o.checkpoint_on_start = CheckpointOnStart::kFromStart;
  Decisions d;
  d.start.push_back(start(2, {on(1, {0})}));
  apply(d, o);
  EXPECT_EQ(first.started, kT);
  EXPECT_EQ(first.checkpoint.last, -1);
}

TEST_F(ApplyTest, StartWhosePlacementNoLongerAppliesIsRefused) {
  running(1, {on(0, {0, 1})});
  Job& late = job(2, 1, 2);
  Decisions d;
  d.start.push_back(start(2, {on(0, {1, 2})}));  // GPU 1 is taken since the snapshot
  const ApplyResult r = apply(d);
  EXPECT_TRUE(r.started.empty());
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].decision, DecisionKind::kStart);
  EXPECT_EQ(r.refused[0].reason, Refusal::kPlacementConflict);
  EXPECT_EQ(r.refused[0].job, JobId(2));
  EXPECT_FALSE(r.refused[0].detail.empty());
  EXPECT_EQ(late.state, JobState::kPending);
  EXPECT_TRUE(late.placement.empty());
  EXPECT_EQ(cluster.allocated_gpu_milli(), 2000);  // all or nothing: GPU 2 stays free
  EXPECT_FALSE(gpu(0, 2).whole_held);
  EXPECT_STREQ(refusal_name(r.refused[0].reason), "placement_conflict");
}

TEST_F(ApplyTest, StartOnANodeThatTakesNoWorkIsRefused) {
  Job& j = job(1);
  ASSERT_TRUE(cluster.set_schedulable(NodeId(1), false).ok());
  Decisions d;
  d.start.push_back(start(1, {on(1, {0})}));
  ApplyResult r = apply(d);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].reason, Refusal::kNodeTakesNoWork);
  EXPECT_EQ(r.refused[0].node, NodeId(1));
  EXPECT_EQ(j.state, JobState::kPending);
  // The caller's own view of which nodes take work wins over Node::schedulable.
  ApplyOptions o;
  o.takes_work = [](NodeId n) { return n.value != 0; };
  Decisions d0;
  d0.start.push_back(start(1, {on(0, {0})}));
  r = apply(d0, o);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].reason, Refusal::kNodeTakesNoWork);
  r = apply(d, o);
  EXPECT_TRUE(r.refused.empty());
  EXPECT_EQ(j.state, JobState::kRunning);
}

TEST_F(ApplyTest, StartOfAJobNoLongerPendingOrUnknownIsRefused) {
  running(1, {on(0, {0})});
  Decisions d;
  d.start.push_back(start(1, {on(0, {1})}));
  d.start.push_back(start(7, {on(0, {2})}));
  const ApplyResult r = apply(d);
  ASSERT_EQ(r.refused.size(), 2u);
  EXPECT_EQ(r.refused[0].reason, Refusal::kNotPending);
  EXPECT_EQ(r.refused[1].reason, Refusal::kUnknownJob);
  EXPECT_EQ(r.refused[1].index, 1u);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 1000);
}

TEST_F(ApplyTest, TwoPhasePreemptionCheckpointsThenEvicts) {
  Job& v = running(1, {on(0, {0, 1, 2, 3})}, 600, 10);
  Decisions d1;
  d1.preempt.push_back(preempt(1, PreemptPhase::kRequestCheckpoint, kT + 300));
  ApplyResult r = apply(d1);
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].effect, PreemptEffect::kCheckpointRequested);
  EXPECT_EQ(r.preempted[0].was, JobState::kRunning);
  EXPECT_FALSE(r.preempted[0].move);
  EXPECT_EQ(v.state, JobState::kCheckpointing);
  EXPECT_EQ(v.evict_by, kT + 300);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 4000);  // it keeps its GPUs while it saves
  // A second request while it checkpoints changes nothing.
  r = apply(d1, {}, kT + 10);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].reason, Refusal::kNotRunning);
  EXPECT_EQ(v.evict_by, kT + 300);
  // Phase two, at its deadline: evicted, GPUs released, back to pending.
  Decisions d2;
  d2.preempt.push_back(preempt(1, PreemptPhase::kEvict, kT + 300));
  r = apply(d2, {}, kT + 300);
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].effect, PreemptEffect::kLeft);
  EXPECT_EQ(r.preempted[0].was, JobState::kCheckpointing);
  EXPECT_EQ(r.preempted[0].vacated.milli, 4000);
  EXPECT_EQ(r.preempted[0].vacated.placement.size(), 1u);
  EXPECT_TRUE(r.preempted[0].vacated.released.ok());
  EXPECT_EQ(v.state, JobState::kPending);
  EXPECT_EQ(v.evict_by, -1);
  EXPECT_EQ(v.last_preempted, kT + 300);
  EXPECT_EQ(v.preemptions, 1);
  EXPECT_EQ(v.started, 10);  // the last run's start stays for the caller's accounting
  EXPECT_TRUE(v.placement.empty());
  EXPECT_EQ(cluster.allocated_gpu_milli(), 0);
  // Evicting it again: it holds nothing.
  r = apply(d2, {}, kT + 301);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].reason, Refusal::kNotPlaced);
}

TEST_F(ApplyTest, AJobThatCannotCheckpointLeavesAtOnce) {
  Job& v = running(1, {on(0, {0})}, 0);
  Decisions d;
  d.preempt.push_back(preempt(1, PreemptPhase::kRequestCheckpoint, kT + 300));
  const ApplyResult r = apply(d);
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].effect, PreemptEffect::kLeft);
  EXPECT_EQ(r.preempted[0].phase, PreemptPhase::kRequestCheckpoint);
  EXPECT_EQ(v.state, JobState::kPending);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 0);
  EXPECT_EQ(request_checkpoint(v, kT), Refusal::kNotRunning);
}

TEST_F(ApplyTest, LeavingByTheCallerWaitsForVacate) {
  Job& v = running(1, {on(0, {0, 1})}, 0);
  ApplyOptions o;
  o.leave = LeaveMode::kByCaller;
  Decisions d;
  d.preempt.push_back(preempt(1, PreemptPhase::kEvict, kT));
  const ApplyResult r = apply(d, o);
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].effect, PreemptEffect::kToLeave);
  EXPECT_EQ(v.state, JobState::kRunning);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 2000);
  const Vacated left = vacate(v, cluster, kT + 5);
  EXPECT_EQ(left.was, JobState::kRunning);
  EXPECT_EQ(left.milli, 2000);
  EXPECT_EQ(v.state, JobState::kPending);
  EXPECT_EQ(v.last_preempted, kT + 5);
  EXPECT_EQ(v.preemptions, 1);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 0);
}

TEST_F(ApplyTest, TasksKeptHeldStayInTheClusterUntilTheCallerReleasesThem) {
  Job& v = running(1, {on(0, {0}), on(1, {0})}, 0);
  ApplyOptions o;
  o.keep_held = [](const Job& j) { return std::vector<bool>(j.placement.size() > 1 ? 1 : 0, true); };  // task 0 still runs
  Decisions d;
  d.preempt.push_back(preempt(1, PreemptPhase::kEvict, kT));
  const ApplyResult r = apply(d, o);
  ASSERT_EQ(r.preempted.size(), 1u);
  const Vacated& left = r.preempted[0].vacated;
  ASSERT_EQ(left.kept.size(), 1u);
  EXPECT_EQ(left.kept[0].task, 0u);
  EXPECT_EQ(left.kept[0].placement.node, NodeId(0));
  EXPECT_EQ(left.milli, 2000);
  EXPECT_EQ(v.state, JobState::kPending);
  EXPECT_TRUE(v.placement.empty());
  EXPECT_TRUE(gpu(0, 0).whole_held);
  EXPECT_FALSE(gpu(1, 0).whole_held);
  ASSERT_TRUE(cluster.release(left.kept[0].placement).ok());
  EXPECT_EQ(cluster.allocated_gpu_milli(), 0);
}

TEST_F(ApplyTest, MoveIsRecordedKeptWhileLeavingAndClearedOnRestart) {
  Job& v = running(1, {on(0, {0, 1})}, 600);
  const std::vector<TaskPlacement> dest{on(1, {6, 7})};
  Decisions d;
  d.preempt.push_back(preempt(1, PreemptPhase::kRequestCheckpoint, kT + 300, dest));
  ApplyResult r = apply(d);
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_TRUE(r.preempted[0].move);
  EXPECT_EQ(v.move_to, dest);
  // It saved and left: the move is kept so that it restarts there.
  vacate(v, cluster, kT + 60, VacateOptions{true, false, {}});
  EXPECT_EQ(v.checkpoint.last, kT + 60);
  EXPECT_EQ(v.move_to, dest);
  Decisions s;
  s.start.push_back(start(1, dest));
  r = apply(s, {}, kT + 61);
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_FALSE(r.started[0].off_move);
  EXPECT_TRUE(v.move_to.empty());
  EXPECT_EQ(v.placement, dest);
}

TEST_F(ApplyTest, MovedJobAwaitingItsGpusKeepsTheMove) {
  Job& a = job(1, 1, 2);
  const std::vector<TaskPlacement> dest{on(1, {6, 7})};
  a.move_to = dest;
  Decisions d;
  PendingInfo p{JobId(1), "moved: waits for its new GPUs", WaitCategory::kPreempting, 1, 1, {}, false, false};
  p.awaits_move = true;
  d.pending.push_back(p);
  ApplyResult r = apply(d);
  EXPECT_TRUE(r.moves_dropped.empty());
  EXPECT_EQ(a.move_to, dest);
  // The next cycle no longer says it awaits the move: the move is given up.
  d.pending[0].awaits_move = false;
  r = apply(d);
  ASSERT_EQ(r.moves_dropped.size(), 1u);
  EXPECT_TRUE(a.move_to.empty());
}

TEST_F(ApplyTest, MovedJobStartedElsewhereOrStillPendingGivesTheMoveUp) {
  Job& a = job(1, 1, 2);
  Job& b = job(2, 1, 2);
  a.move_to = {on(1, {6, 7})};
  b.move_to = {on(1, {4, 5})};
  Decisions d;
  d.start.push_back(start(1, {on(0, {0, 1})}));  // elsewhere than held for it
  d.pending.push_back(PendingInfo{JobId(2), "no room", WaitCategory::kCapacity, 1, 1, {}, false, false});
  const ApplyResult r = apply(d);
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_TRUE(r.started[0].off_move);
  EXPECT_TRUE(a.move_to.empty());
  ASSERT_EQ(r.moves_dropped.size(), 1u);
  EXPECT_EQ(r.moves_dropped[0], JobId(2));
  EXPECT_TRUE(b.move_to.empty());
  // A lost job gives its move up as it leaves; cancel_move says whether there was one.
  Job& c = running(3, {on(0, {4})}, 600);
  c.move_to = {on(1, {0})};
  VacateOptions lost;
  lost.drop_move = true;
  vacate(c, cluster, kT, lost);
  EXPECT_TRUE(c.move_to.empty());
  EXPECT_FALSE(cancel_move(c));
  c.move_to = {on(1, {0})};
  EXPECT_TRUE(cancel_move(c));
}

TEST_F(ApplyTest, MigReconfigurationTakesTheGpuOutOfServiceUntilReady) {
  const GpuModel* h100 = cluster.node(NodeId(0)).gpus[0].model;
  const MigProfile* p = h100->find_profile("1g.10gb");
  ASSERT_NE(p, nullptr);
  running(1, {on(0, {1})});
  MigReconfigDecision m;
  m.gpu = GpuRef{NodeId(0), 0};
  m.enable_mig = true;
  m.layout = {MigInstance{p->id, 0, uint8_t(p->memory_slices), false}};
  m.reason = "test";
  m.ready_at = kT + 60;
  MigReconfigDecision busy = m;
  busy.gpu = GpuRef{NodeId(0), 1};  // held whole by job 1
  MigReconfigDecision late = m;
  late.gpu = GpuRef{NodeId(0), 2};
  late.ready_at = kT - 5;  // ready already: out of service until the caller says so, from now
  Decisions d;
  d.reconfigure_mig = {m, busy, late};
  ApplyResult r = apply(d);
  ASSERT_EQ(r.reconfigured.size(), 2u);
  EXPECT_EQ(r.reconfigured[0].gpu, m.gpu);
  EXPECT_EQ(r.reconfigured[0].ready_at, kT + 60);
  EXPECT_EQ(r.reconfigured[1].decision, 2u);
  EXPECT_EQ(r.reconfigured[1].ready_at, kT);
  EXPECT_TRUE(gpu(0, 0).mig_enabled);
  EXPECT_EQ(gpu(0, 0).mig.instances().size(), 1u);
  EXPECT_EQ(gpu(0, 0).health, GpuHealth::kReconfiguring);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].decision, DecisionKind::kMigReconfigure);
  EXPECT_EQ(r.refused[0].reason, Refusal::kMigLayoutRejected);
  EXPECT_EQ(r.refused[0].gpu, busy.gpu);
  EXPECT_FALSE(gpu(0, 1).mig_enabled);
  // Again while it reconfigures: refused, nothing changes.
  Decisions again;
  again.reconfigure_mig = {m};
  again.reconfigure_mig[0].enable_mig = false;
  again.reconfigure_mig[0].layout.clear();
  r = apply(again);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].reason, Refusal::kGpuNotHealthy);
  EXPECT_TRUE(gpu(0, 0).mig_enabled);
}

TEST_F(ApplyTest, GangBoundTaskByTaskRunsOnceComplete) {
  Job& j = job(1, 2, 1);
  Decisions d;
  d.start.push_back(start(1, {on(0, {0})}));
  ApplyResult r = apply(d);
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_FALSE(r.started[0].running);
  EXPECT_EQ(j.state, JobState::kPending);
  EXPECT_EQ(j.placement.size(), 1u);
  EXPECT_EQ(j.started, -1);
  d.start[0].placement = {on(1, {0})};
  r = apply(d, {}, kT + 1);
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_TRUE(r.started[0].running);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.started, kT + 1);
  EXPECT_EQ(j.placement.size(), 2u);
  // A partially bound job that loses its pods gives them back.
  Job& k = job(2, 2, 1);
  d.start = {start(2, {on(0, {5})})};
  apply(d);
  const Vacated v = vacate(k, cluster, kT + 2);
  EXPECT_EQ(v.was, JobState::kPending);
  EXPECT_EQ(v.milli, 1000);
  EXPECT_FALSE(gpu(0, 5).whole_held);
}

TEST_F(ApplyTest, EndJobReleasesAndKeepsItsFinalState) {
  Job& j = running(1, {on(0, {0, 1})}, 600);
  const Vacated v = end_job(j, cluster, JobState::kSucceeded);
  EXPECT_EQ(v.was, JobState::kRunning);
  EXPECT_EQ(v.milli, 2000);
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_EQ(j.preemptions, 0);
  EXPECT_TRUE(j.placement.empty());
  EXPECT_EQ(cluster.allocated_gpu_milli(), 0);
}

TEST_F(ApplyTest, OneCycleAppliesPreemptionsThenMigThenStartsThenPending) {
  const MigProfile* p = gpu(1, 7).model->find_profile("1g.10gb");
  ASSERT_NE(p, nullptr);
  Job& victim = running(1, {on(0, {0, 1, 2, 3, 4, 5, 6, 7})}, 0);
  Job& leaving = running(2, {on(1, {0})}, 600);
  Job& starter = job(3, 1, 2);
  Decisions d;
  d.preempt.push_back(preempt(2, PreemptPhase::kRequestCheckpoint, kT + 100));
  d.preempt.push_back(preempt(1, PreemptPhase::kEvict, kT));
  d.reconfigure_mig.push_back(MigReconfigDecision{GpuRef{NodeId(1), 7}, true, {MigInstance{p->id, 0, uint8_t(p->memory_slices), false}}, "mig", kT + 60});
  d.start.push_back(start(3, {on(1, {1, 2})}));
  const ApplyResult r = apply(d);
  ASSERT_EQ(r.preempted.size(), 2u);
  EXPECT_EQ(r.preempted[0].job, JobId(2));
  EXPECT_EQ(r.preempted[0].decision, 0u);
  EXPECT_EQ(r.preempted[1].job, JobId(1));
  EXPECT_EQ(r.preempted[1].effect, PreemptEffect::kLeft);
  EXPECT_EQ(r.reconfigured.size(), 1u);
  EXPECT_EQ(r.started.size(), 1u);
  EXPECT_TRUE(r.refused.empty());
  EXPECT_EQ(victim.state, JobState::kPending);
  EXPECT_EQ(leaving.state, JobState::kCheckpointing);
  EXPECT_EQ(starter.state, JobState::kRunning);
  EXPECT_EQ(cluster.allocated_gpu_milli(), 3000);
}

}  // namespace
}  // namespace tessera
