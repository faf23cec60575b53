// The time-driven simulator on small hand-made clusters and workloads: timing of runs (spread
// slowdown, restart cost), the baselines' behaviour (k8s-default's partial gangs, FIFO's
// head-of-line blocking), failures and lost work, metrics and determinism.
#include "sim/sim_run.h"
#include "sim_test_jobs.h"

#include <gtest/gtest.h>

#include "sim/scenario.h"

namespace tessera::sim {
namespace {

using testing::job;
using testing::workload;

SimCluster make_cluster(int nodes, int gpus, std::vector<QueueSpec> queues = {{"default", "", {}, {}, 1}}) {
  std::vector<NodeSpec> specs;
  for (int i = 0; i < nodes; ++i) {
    NodeSpec n;
    n.name = "n" + std::to_string(i);
    n.gpu_model = "H100-80GB-SXM";
    n.gpu_count = gpus;
    n.cpu = MilliCpu(128000);
    n.memory = MiB(1 << 20);
    specs.push_back(n);
  }
  auto c = build_cluster({}, specs);
  EXPECT_TRUE(c.ok());
  return SimCluster{std::move(*c), std::move(queues), SchedulerConfig{}};
}

TEST(SimRun, JobsRunForTheirWorkAndSpreadGangsRunSlower) {
  SimCluster c = make_cluster(2, 8);
  WorkloadJob spread = job("spread", 0, 2, 8, 1000);  // 16 GPUs: must span both nodes
  spread.spread_slowdown_milli = 2000;
  Workload w = workload({spread, job("single", 5000, 1, 8, 1000)});
  SimRunOptions o;
  auto r = run_simulation(c, w, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SimMetrics& m = r->metrics;
  EXPECT_EQ(m.finished, 2);
  ASSERT_EQ(r->jct_s.size(), 2u);
  EXPECT_DOUBLE_EQ(r->jct_s[0], 1000) << "on one node: its work";
  EXPECT_DOUBLE_EQ(r->jct_s[1], 2000) << "spread over two nodes: twice as long";
  EXPECT_DOUBLE_EQ(m.makespan_s, 6000);
  EXPECT_DOUBLE_EQ(m.wait_mean_s, 0);
  // Allocation: 16 GPUs for 2000 s, 8 for 1000 s, over 6000 s of 16 GPUs.
  EXPECT_NEAR(m.allocation_pct, (16.0 * 2000 + 8 * 1000) / (16.0 * 6000) * 100, 0.01);
  EXPECT_NEAR(m.effective_util_pct, (16.0 * 1000 + 8 * 1000) / (16.0 * 6000) * 100, 0.01) << "the spread gang counts half";
  EXPECT_EQ(m.preemptions, 0);
}

TEST(SimRun, K8sDefaultHoldsPartialGangsWhileTesseraPlacesThemWhole) {
  SimCluster c = make_cluster(2, 8);
  // `first` holds n0 until t=1000. The gang arrives at 10: k8s binds one of its pods on n1 and that
  // pod holds 8 GPUs idle until n0 frees; `small` cannot start meanwhile. Tessera keeps the gang
  // whole (reserved at t=1000) and backfills `small` (done by 520) on n1.
  WorkloadJob first = job("first", 0, 1, 8, 1000);
  first.expected_runtime = 1000;
  WorkloadJob small = job("small", 20, 1, 8, 500);
  small.expected_runtime = 500;
  Workload w = workload({first, job("gang", 10, 2, 8, 1000), small});
  SimRunOptions o;
  o.policy = "k8s-default";
  auto k = run_simulation(c, w, o);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->metrics.finished, 3);
  EXPECT_GT(k->metrics.allocation_pct - k->metrics.effective_util_pct, 15) << "a pod held 8 GPUs idle for 990 s";
  o.policy = "tessera";
  auto t = run_simulation(c, w, o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->metrics.finished, 3);
  EXPECT_NEAR(t->metrics.allocation_pct, t->metrics.effective_util_pct, 0.01) << "nothing held idle";
  EXPECT_LT(t->metrics.wait_mean_s, k->metrics.wait_mean_s);
  EXPECT_LT(t->metrics.makespan_s, k->metrics.makespan_s);
}

TEST(SimRun, FifoGangBlocksBehindItsHeadWhileSlurmBackfills) {
  SimCluster c = make_cluster(2, 8);
  WorkloadJob first = job("first", 0, 1, 8, 3000);
  first.expected_runtime = 3000;
  WorkloadJob big = job("big", 10, 2, 8, 1000);  // waits for `first`
  WorkloadJob small = job("small", 20, 1, 4, 1000);
  small.expected_runtime = 1000;  // ends before `first`: backfills under Slurm
  Workload w = workload({first, big, small});
  SimRunOptions o;
  o.policy = "fifo-gang";
  auto f = run_simulation(c, w, o);
  ASSERT_TRUE(f.ok()) << f.error().message;
  o.policy = "slurm";
  auto s = run_simulation(c, w, o);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(f->metrics.finished, 3);
  ASSERT_EQ(s->metrics.finished, 3);
  EXPECT_EQ(f->jct_s, (std::vector<double>{3000, 3990, 4980})) << "FIFO holds `small` behind `big`";
  EXPECT_EQ(s->jct_s, (std::vector<double>{1000, 3000, 3990})) << "backfilled, and `big` is not delayed";
}

TEST(SimRun, FailuresLoseWorkSinceTheLastCheckpointAndJobsStillFinish) {
  SimCluster c = make_cluster(4, 8);
  std::vector<WorkloadJob> jobs;
  for (int i = 0; i < 8; ++i) {
    WorkloadJob j = job("j" + std::to_string(i), i * 100, 1, 8, 20000);
    if (i % 2) j.checkpoint.interval = 1800;
    jobs.push_back(j);
  }
  Workload w = workload(jobs);
  SimRunOptions o;
  o.node_mtbf = 20000;
  o.node_repair = 600;
  o.seed = 7;
  auto r = run_simulation(c, w, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics.finished, 8);
  EXPECT_GT(r->metrics.failures, 0);
  EXPECT_GT(r->metrics.lost_gpu_hours, 0);
  auto again = run_simulation(c, w, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->metrics.failures, r->metrics.failures) << "deterministic for a seed";
  EXPECT_DOUBLE_EQ(again->metrics.lost_gpu_hours, r->metrics.lost_gpu_hours);
  EXPECT_DOUBLE_EQ(again->metrics.jct_mean_s, r->metrics.jct_mean_s);
}

TEST(SimRun, FairnessAndGuaranteesAreMeasured) {
  SimCluster c = make_cluster(1, 8,
                              {{"a", "", {{"any", 4000}}, {}, 1}, {"b", "", {{"any", 4000}}, {}, 1}});
  std::vector<WorkloadJob> jobs;
  for (int i = 0; i < 8; ++i) jobs.push_back(job("a" + std::to_string(i), 0, 1, 1, 5000, "a"));
  jobs.push_back(job("b0", 100, 1, 4, 1000, "b"));
  Workload w = workload(jobs);
  SimRunOptions o;
  auto t = run_simulation(c, w, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_LE(t->metrics.max_below_guarantee_s, 300 + 60) << "b reclaims its guarantee within the grace";
  EXPECT_GT(t->metrics.jain_fairness, 0.9);
  o.policy = "fifo-gang";
  auto f = run_simulation(c, w, o);
  ASSERT_TRUE(f.ok());
  EXPECT_GE(f->metrics.max_below_guarantee_s, 4900) << "FIFO has no guarantees: b waits for a's jobs";
  EXPECT_LT(f->metrics.jain_fairness, t->metrics.jain_fairness);
}

TEST(SimRun, GuaranteeUnmetCountsOnlyWaitingJobsThatFitTheUnusedGuarantee) {
  // b holds 3 of its 4 guaranteed GPUs; its waiting 4-GPU job would exceed the guarantee: b is below
  // its guarantee with demand, but owed nothing. Its 1-GPU job (t=2000) is owed, and reclaimed.
  SimCluster c = make_cluster(1, 8, {{"a", "", {}, {}, 1}, {"b", "", {{"any", 4000}}, {}, 1}});
  std::vector<WorkloadJob> jobs{job("b-run", 0, 1, 3, 100000, "b")};
  for (int i = 0; i < 5; ++i) jobs.push_back(job("a" + std::to_string(i), 10, 1, 1, 100000, "a"));
  jobs.push_back(job("b-big", 100, 1, 4, 1000, "b"));
  jobs.push_back(job("b-small", 2000, 1, 1, 1000, "b"));
  SimRunOptions o;
  o.horizon = 5000;
  auto r = run_simulation(c, workload(jobs), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GE(r->metrics.max_below_guarantee_s, 1900) << "below its guarantee with b-big waiting from t=100";
  EXPECT_GT(r->metrics.guarantee_unmet_s, 0) << "b-small was owed for a while";
  EXPECT_LE(r->metrics.max_guarantee_unmet_s, 300 + 60) << "and got its GPU back within the grace";
}

TEST(SimRun, WaitCountsJobsNeverStartedAndWaitsAfterPreemption) {
  SimCluster c = make_cluster(1, 8);
  WorkloadJob victim = job("victim", 0, 1, 8, 10000);
  victim.priority_class = "preemptible";
  victim.checkpoint.interval = 600;
  WorkloadJob urgent = job("urgent", 1000, 1, 8, 2000);
  urgent.priority_class = "production-training";
  WorkloadJob never = job("never", 1500, 1, 16, 100);  // 16 GPUs on an 8-GPU cluster: never starts
  SimRunOptions o;
  o.horizon = 20000;
  auto r = run_simulation(c, workload({victim, urgent, never}), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics.unstarted, 1);
  EXPECT_GE(r->metrics.first_start_p99_s, 18000) << "the job never started counts its wait so far (to the last event)";
  EXPECT_GE(r->metrics.wait_p99_s, 18000);
  // The victim waited after its preemption (from ~1060 until urgent left at ~3060+): the queueing
  // delay counts it, the time to first start does not.
  EXPECT_GT(r->metrics.wait_mean_s, r->metrics.first_start_mean_s);
}

TEST(SimRun, AnEventRightAfterACycleGetsItsOwnCycleNotThePeriodicOne) {
  // The victim saves in 5 s, within min_cycle_gap (10 s) of the cycle that preempted it, while the
  // periodic cycle (every 300 s, the preemptor is waiting) is already due later: the preemptor
  // starts at the gap's end, not 300 s on.
  SimCluster c = make_cluster(1, 8);
  WorkloadJob victim = job("victim", 0, 1, 8, 100000);
  victim.priority_class = "preemptible";
  victim.checkpoint.interval = 600;
  victim.checkpoint.save_cost = 5;
  WorkloadJob urgent = job("urgent", 1000, 1, 8, 1000);
  urgent.priority_class = "production-training";
  SimRunOptions o;
  o.horizon = 5000;
  auto r = run_simulation(c, workload({victim, urgent}), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics.preemptions, 1);
  EXPECT_LE(r->metrics.first_start_p99_s, 10) << "urgent started at t=1010";
}

TEST(SimRun, DynamicMigServesSlicesOnWholeGpusAfterTheReconfigureCost) {
  // One node of 8 whole A100-80GB; 14 inference services of 2g.20gb (2 of 7 compute each). Tessera
  // lays out MIG on idle GPUs (out of service for reconfigure_cost) and packs 3 per GPU; k8s-default
  // gives each a whole GPU, so only 8 run and each counts 2/7 as effective.
  SimCluster c = make_cluster(1, 8);
  NodeSpec n;
  n.name = "a";
  n.gpu_model = "A100-80GB";
  n.gpu_count = 8;
  n.cpu = MilliCpu(128000);
  n.memory = MiB(1 << 20);
  c.cluster = *build_cluster({}, {n});
  c.config.mig.reconfigure_cost = 120;
  std::vector<WorkloadJob> jobs;
  for (int i = 0; i < 14; ++i) {
    WorkloadJob j = job("svc" + std::to_string(i), 0, 1, 0, 10000);
    j.gang.task.mig_profile = "2g.20gb";
    j.useful_milli_per_task = 2000 / 7;
    j.service = true;
    j.priority_class = "production-inference";
    jobs.push_back(j);
  }
  Workload w = workload(jobs);
  SimRunOptions o;
  auto t = run_simulation(c, w, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->metrics.finished, 14);
  EXPECT_GT(t->metrics.mig_reconfigurations, 0);
  EXPECT_LE(t->metrics.mig_reconfigurations, 8);
  // All start once their GPUs are ready: 120 s of reconfiguration, then 10000 s of work.
  EXPECT_DOUBLE_EQ(t->metrics.wait_mean_s, 120);
  EXPECT_DOUBLE_EQ(t->metrics.makespan_s, 10120);

  o.policy = "k8s-default";
  auto k = run_simulation(c, w, o);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->metrics.finished, 14);
  EXPECT_EQ(k->metrics.mig_reconfigurations, 0);
  EXPECT_DOUBLE_EQ(k->metrics.makespan_s, 20000) << "8 at a time on whole GPUs, then the other 6";
  EXPECT_GT(t->metrics.effective_util_pct, k->metrics.effective_util_pct);
}

TEST(SimRun, DefragmentingMoveGivesAnOwedGangAWholeNodeForASaveAndARestart) {
  // b's two 1-GPU jobs (within b's guarantee) sit one per node; a is owed a 4-GPU task on one node.
  // One of b's jobs checkpoints (60 s) and restarts at once on the other node (120 s restart); the
  // gang starts when it has left. Without moves the gang waits for b's jobs to end.
  SimCluster c = make_cluster(2, 4, {{"a", "", {{"any", 4000}}, {}, 1}, {"b", "", {{"any", 4000}}, {}, 1}});
  c.config.policy = "spread";
  std::vector<WorkloadJob> jobs;
  for (const char* n : {"b0", "b1"}) {
    jobs.push_back(job(n, 0, 1, 1, 100000, "b"));
    jobs.back().checkpoint = {600, -1, 60, 120, 300};
  }
  jobs.push_back(job("gang", 100, 1, 4, 1000, "a"));
  SimRunOptions o;
  auto r = run_simulation(c, workload(jobs), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics.defrag_moves, 1);
  EXPECT_EQ(r->metrics.preemptions, 1);
  std::vector<double> jct = r->jct_s;
  std::sort(jct.begin(), jct.end());
  EXPECT_EQ(jct, (std::vector<double>{1060, 100000, 100000 + 60 + 120})) << "the moved job loses its save and restart";
  EXPECT_LE(r->metrics.max_guarantee_unmet_s, 60);
  c.config.defragment = false;
  auto f = run_simulation(c, workload(jobs), o);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->metrics.defrag_moves, 0);
  EXPECT_GE(f->metrics.max_guarantee_unmet_s, 99000) << "the gang waits for b's jobs to end";
}

TEST(SimRun, AJobHeldBackByAModelClassLimitIsOwedNothing) {
  // team is guaranteed 16 GPUs but limited to 8 of class h100, and runs 8; its second 8-GPU H100
  // job cannot start whatever is free, so the 16 GPUs other borrows are not owed to it (as the core
  // and the scenario invariant judge it). Before the simulator checked only limits on "any".
  SimCluster c = make_cluster(3, 8, {{"team", "", {{"any", 16000}}, {{"h100", 8000}}, 1}, {"other", "", {}, {}, 1}});
  c.config.gpu_class["H100-80GB-SXM"] = "h100";
  std::vector<WorkloadJob> jobs = {job("a", 0, 1, 8, 100000, "team"), job("o1", 0, 1, 8, 100000, "other"),
                                   job("o2", 0, 1, 8, 100000, "other"), job("b", 10, 1, 8, 1000, "team")};
  for (WorkloadJob& j : jobs) j.gang.task.gpu_models = {"H100-80GB-SXM"};
  auto r = run_simulation(c, workload(jobs), SimRunOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics.preemptions, 0) << "nothing is reclaimed for a job its limit holds back";
  EXPECT_LE(r->metrics.max_guarantee_unmet_s, 60);
  // A limit on "any" (guaranteed H100s) was counted before too: both judge it alike.
  c.queues[0].guaranteed = {{"h100", 16000}};
  c.queues[0].limit = {{"any", 8000}};
  auto a = run_simulation(c, workload(jobs), SimRunOptions{});
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->metrics.max_guarantee_unmet_s, r->metrics.max_guarantee_unmet_s);
}

// A job no node can hold waits for ever. Once every job has arrived and none has started or finished
// for the stall limit, with none running, the run stops, stalled, instead of cycling for ever; FIFO
// also holds the job queued behind it for ever.
TEST(SimRun, ARunThatCanStartNothingMoreStopsStalled) {
  SimCluster c = make_cluster(2, 8);
  WorkloadJob after = job("after", 20, 1, 4, 1000);
  after.expected_runtime = 1000;
  Workload w = workload({job("first", 0, 1, 8, 1000), job("huge", 10, 1, 16, 1000), after});
  SimRunOptions o;
  o.stall_limit = 86400;
  for (const std::string p : {"tessera", "fifo-gang", "slurm", "k8s-default"}) {
    o.policy = p;
    auto r = run_simulation(c, w, o);
    ASSERT_TRUE(r.ok()) << p << ": " << r.error().message;
    const SimMetrics& m = r->metrics;
    const bool fifo = p == "fifo-gang";
    EXPECT_EQ(m.finished, fifo ? 1 : 2) << p;
    EXPECT_EQ(m.unstarted, fifo ? 2 : 1) << p;
    const Time last = fifo ? 1000 : 1020;  // the last finish
    EXPECT_GE(m.stalled_at, last + o.stall_limit) << p;
    EXPECT_LE(m.stalled_at, last + o.stall_limit + o.cycle_interval) << p;
  }
  o.policy = "tessera";
  o.stall_limit = 0;  // never: it runs to the horizon
  o.horizon = 200000;
  auto r = run_simulation(c, w, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics.stalled_at, -1);
  EXPECT_EQ(r->metrics.unstarted, 1);
  o.stall_limit = -1;
  r = run_simulation(c, w, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--stall-limit"), std::string::npos) << r.error().message;
}

TEST(SimRun, BadInputNamesTheField) {
  SimCluster c = make_cluster(1, 8);
  Workload w = workload({job("x", 0, 1, 1, 10, "nobody")});
  c.queues = {{"a", "", {}, {}, 1}};
  auto r = run_simulation(c, w, SimRunOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("team 'nobody'"), std::string::npos) << r.error().message;
  SimRunOptions o;
  o.policy = "yarn";
  c.queues = {{"default", "", {}, {}, 1}};
  r = run_simulation(c, workload({job("x", 0, 1, 1, 10)}), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--policy"), std::string::npos);
  EXPECT_NE(r.error().message.find("k8s-default"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim
