// Pools and the pool placement rules on hand-built clusters: inference only on owned/reserved (by
// default), jobs that do not checkpoint never on spot, spot: never / allowed / preferred, and the
// reasons that name the rule and the pool.
#include "core/pool.h"

#include <gtest/gtest.h>

#include "core/sched/scheduler.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

constexpr Time kNow = 100000;

Pool pool(const std::string& name, PoolKind kind) {
  Pool p;
  p.name = name;
  p.kind = kind;
  return p;
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = QueueTree::build({QueueSpec{"default", "", {}, {}, 1}});
    ASSERT_TRUE(t.ok());
    tree = std::move(t.value());
    for (auto [name, kind] : {std::pair{"reserved-a", PoolKind::kReserved}, {"od-a", PoolKind::kOnDemand},
                              {"spot-a", PoolKind::kSpot}}) {
      auto id = cluster.add_pool(pool(name, kind));
      ASSERT_TRUE(id.ok()) << id.error().message;
    }
  }
  // A node of 8 H100s in pool `pool_name`.
  void add(const std::string& name, const std::string& pool_name) {
    NodeSpec s = node_spec(name, "H100-80GB-SXM", 8);
    s.pool = cluster.find_pool(pool_name).value();
    ASSERT_TRUE(cluster.add_node(s).ok());
  }
  Job& job(int id, JobKind kind, int gpus, Duration checkpoint_interval, std::optional<SpotPolicy> spot = std::nullopt) {
    Job j;
    j.id = JobId(uint32_t(id));
    j.name = "job-" + std::to_string(id);
    j.user = "u";
    j.queue = tree.find("default").value();
    j.priority_class = "research";
    j.gang = gang(1, whole(gpus), id);
    j.gang.kind = kind;
    j.gang.spot = spot;
    j.checkpoint.interval = checkpoint_interval;
    jobs.push_back(j);
    return jobs.back();
  }
  Decisions cycle() {
    Snapshot snap;
    snap.cluster = &cluster;
    snap.queues = &tree;
    snap.jobs = jobs;
    auto s = Scheduler::create(config);
    EXPECT_TRUE(s.ok());
    return s.value()->cycle(snap, kNow);
  }
  std::string node_of(const Decisions& d, int id) const {
    for (const StartDecision& s : d.start)
      if (s.job.value == uint32_t(id)) return cluster.node(s.placement.at(0).node).name;
    return "";
  }
  static std::string reason(const Decisions& d, int id) {
    for (const PendingInfo& p : d.pending)
      if (p.job.value == uint32_t(id)) return p.reason;
    return "(started)";
  }

  ClusterState cluster;
  QueueTree tree;
  std::vector<Job> jobs;
  SchedulerConfig config;
};

TEST_F(PoolTest, PoolTableAndNodeKinds) {
  EXPECT_EQ(cluster.pools().size(), 4u);
  EXPECT_EQ(cluster.pool(PoolId(0)).name, "default");
  EXPECT_EQ(cluster.pool(PoolId(0)).kind, PoolKind::kOwned);
  add("s0", "spot-a");
  ASSERT_TRUE(cluster.add_node(node_spec("o0", "H100-80GB-SXM", 8)).ok());  // no pool: default
  EXPECT_EQ(cluster.node(NodeId(0)).pool_kind, PoolKind::kSpot);
  EXPECT_EQ(cluster.node(NodeId(1)).pool, PoolId(0));
  EXPECT_EQ(cluster.node(NodeId(1)).pool_kind, PoolKind::kOwned);
  NodeSpec bad = node_spec("x", "H100-80GB-SXM", 8);
  bad.pool = PoolId(17);
  auto r = cluster.add_node(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("node 'x': pool"), std::string::npos) << r.error().message;
  EXPECT_FALSE(cluster.add_pool(pool("spot-a", PoolKind::kSpot)).ok());  // twice
  EXPECT_EQ(pool_kinds_text(pool_kind_bit(PoolKind::kOwned) | pool_kind_bit(PoolKind::kReserved)), "owned/reserved");
  EXPECT_EQ(parse_pool_kind("on-demand").value(), PoolKind::kOnDemand);
  EXPECT_FALSE(parse_pool_kind("cheap").ok());
}

TEST_F(PoolTest, InferenceIsRefusedOnSpotAndOnDemandByDefault) {
  add("s0", "spot-a");
  add("d0", "od-a");
  job(1, JobKind::kInference, 1, 0);
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty());
  const std::string why = reason(d, 1);
  EXPECT_NE(why.find("inference jobs run only on owned/reserved pools"), std::string::npos) << why;
  EXPECT_NE(why.find("the free GPUs are on on-demand pool od-a, spot pool spot-a"), std::string::npos) << why;
}

TEST_F(PoolTest, InferenceRunsOnReserved) {
  add("s0", "spot-a");
  add("r0", "reserved-a");
  job(1, JobKind::kInference, 1, 0);
  EXPECT_EQ(node_of(cycle(), 1), "r0");
}

TEST_F(PoolTest, InferenceKindsAreConfigurable) {
  add("s0", "spot-a");
  config.pool_rules.inference_kinds = kAnyPoolKind;
  job(1, JobKind::kInference, 1, 0, SpotPolicy::kAllowed);
  job(2, JobKind::kInference, 1, 0);  // does not checkpoint: still never on spot
  Decisions d = cycle();
  EXPECT_EQ(node_of(d, 1), "");  // does not checkpoint either
  EXPECT_NE(reason(d, 2).find("jobs that do not checkpoint never run on spot pools"), std::string::npos) << reason(d, 2);
  jobs.clear();
  job(3, JobKind::kInference, 1, 600, SpotPolicy::kAllowed);
  EXPECT_EQ(node_of(cycle(), 3), "s0");
}

// Dynamic MIG: the layout change for a waiting inference job is planned on the owned node, not on
// the spot node (lower id) where the job may never run.
TEST_F(PoolTest, MigLayoutChangeForInferenceIsPlannedOnAnAllowedPool) {
  add("s0", "spot-a");
  ASSERT_TRUE(cluster.add_node(node_spec("o1", "H100-80GB-SXM", 8)).ok());  // default: owned
  Job& j = job(1, JobKind::kInference, 0, 0);
  j.gang.task = mig("1g.10gb");
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty()) << "no GPU is in MIG mode yet";
  ASSERT_EQ(d.reconfigure_mig.size(), 1u);
  EXPECT_EQ(cluster.node(d.reconfigure_mig[0].gpu.node).name, "o1");
  EXPECT_TRUE(d.reconfigure_mig[0].enable_mig);
}

TEST_F(PoolTest, NonCheckpointableJobsNeverRunOnSpot) {
  add("s0", "spot-a");
  job(1, JobKind::kTraining, 8, 0, SpotPolicy::kPreferred);
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty());
  const std::string why = reason(d, 1);
  EXPECT_NE(why.find("jobs that do not checkpoint never run on spot pools; the free GPUs are on spot pool spot-a"),
            std::string::npos) << why;
}

TEST_F(PoolTest, CheckpointableTrainingMayUseSpotByDefault) {
  add("s0", "spot-a");
  job(1, JobKind::kTraining, 8, 1800);
  job(2, JobKind::kInteractive, 1, 1800);  // default never for interactive
  Decisions d = cycle();
  EXPECT_EQ(node_of(d, 1), "s0");
  EXPECT_NE(reason(d, 2).find("only checkpointable training and batch jobs use spot pools"), std::string::npos)
      << reason(d, 2);
}

TEST_F(PoolTest, PreferredPicksSpotWhenBothFit) {
  ASSERT_TRUE(cluster.add_node(node_spec("o0", "H100-80GB-SXM", 8)).ok());
  add("d1", "od-a");
  add("s2", "spot-a");
  job(1, JobKind::kTraining, 2, 1800, SpotPolicy::kPreferred);
  EXPECT_EQ(node_of(cycle(), 1), "s2");
  jobs.clear();
  job(2, JobKind::kTraining, 2, 1800, SpotPolicy::kAllowed);
  EXPECT_EQ(node_of(cycle(), 2), "o0");  // allowed: no preference, the tie goes to the lowest id
}

TEST_F(PoolTest, PreferredFallsBackToOtherPools) {
  ASSERT_TRUE(cluster.add_node(node_spec("o0", "H100-80GB-SXM", 8)).ok());
  add("s1", "spot-a");
  job(1, JobKind::kTraining, 8, 1800, SpotPolicy::kPreferred);
  job(2, JobKind::kTraining, 8, 1800, SpotPolicy::kPreferred);
  Decisions d = cycle();
  EXPECT_EQ(node_of(d, 1), "s1");
  EXPECT_EQ(node_of(d, 2), "o0");
}

TEST_F(PoolTest, NeverRefusesSpotEvenWhenOnlySpotIsFree) {
  ASSERT_TRUE(cluster.add_node(node_spec("o0", "H100-80GB-SXM", 8)).ok());
  add("s1", "spot-a");
  Job& busy = job(1, JobKind::kTraining, 8, 0);
  busy.state = JobState::kRunning;
  busy.started = kNow - 100;
  TaskPlacement tp;
  tp.node = NodeId(0);
  tp.cpu = busy.gang.task.cpu;
  tp.memory = busy.gang.task.memory;
  tp.task_class = task_class(busy.gang.task);
  for (uint16_t g = 0; g < 8; ++g) tp.gpus.push_back(GpuGrant{g});
  ASSERT_TRUE(cluster.apply(tp).ok());
  busy.placement = {tp};
  config.preemption = false;
  job(2, JobKind::kTraining, 8, 1800, SpotPolicy::kNever);
  Decisions d = cycle();
  EXPECT_TRUE(d.start.empty());
  const std::string why = reason(d, 2);
  EXPECT_NE(why.find("the job says spot: never; the free GPUs are on spot pool spot-a"), std::string::npos) << why;
}

TEST_F(PoolTest, RulesAsAMask) {
  Gang g;
  g.kind = JobKind::kTraining;
  g.checkpointable = true;
  PoolRules rules;
  EXPECT_EQ(pool_kinds_for(g, rules), kAnyPoolKind);
  g.spot = SpotPolicy::kNever;
  EXPECT_EQ(pool_kinds_for(g, rules), kNoSpot);
  g.kind = JobKind::kInference;
  g.spot = SpotPolicy::kPreferred;
  EXPECT_EQ(pool_kinds_for(g, rules), rules.inference_kinds);
  apply_pool_rules(g, rules);
  EXPECT_FALSE(g.task.prefer_spot);  // spot is not allowed, so not preferred
}

TEST_F(PoolTest, JobsInterruptedTooOftenPreferOtherPools) {
  add("s0", "spot-a");
  add("d0", "od-a");
  config.policy = "best-fit";
  job(1, JobKind::kTraining, 4, 600, SpotPolicy::kPreferred);
  EXPECT_EQ(node_of(cycle(), 1), "s0");  // prefers spot
  jobs.back().spot_interruptions = 2;
  EXPECT_EQ(node_of(cycle(), 1), "s0");  // below the limit (3)
  jobs.back().spot_interruptions = 3;
  EXPECT_EQ(node_of(cycle(), 1), "d0");  // now prefers anything but spot
  config.pool_rules.spot_max_interruptions = 0;  // 0 = never
  EXPECT_EQ(node_of(cycle(), 1), "s0");
  // Avoiding is a preference: with only spot room it still runs there.
  config.pool_rules.spot_max_interruptions = 3;
  jobs.clear();
  job(2, JobKind::kTraining, 8, 600).spot_interruptions = 5;
  job(3, JobKind::kTraining, 8, 600).spot_interruptions = 5;
  Decisions d = cycle();
  EXPECT_EQ(node_of(d, 2), "d0");
  EXPECT_EQ(node_of(d, 3), "s0");
}

TEST(PoolInterval, YoungIntervalFromThePoolsInterruptionRate) {
  Pool spot;
  spot.kind = PoolKind::kSpot;
  spot.interruptions_per_million_hours = 500000;  // 0.5 per node-hour: M = 7,200 s
  EXPECT_EQ(mean_seconds_between_interruptions(spot), 7200);
  EXPECT_EQ(spot_checkpoint_interval(spot, 60, 1, 0), 930);      // sqrt(2 * 60 * 7200) = 929.5
  EXPECT_EQ(spot_checkpoint_interval(spot, 60, 4, 0), 465);      // M / 4 nodes: sqrt(216000) = 464.8
  EXPECT_EQ(spot_checkpoint_interval(spot, 60, 1, 1800), 930);   // shorter than the job's own
  EXPECT_EQ(spot_checkpoint_interval(spot, 60, 1, 300), 300);    // the job's own is shorter
  EXPECT_EQ(spot_checkpoint_interval(spot, 0, 1, 1800), 1800);   // no save cost known
  Pool od;
  od.kind = PoolKind::kOnDemand;
  EXPECT_EQ(mean_seconds_between_interruptions(od), 0);
  EXPECT_EQ(spot_checkpoint_interval(od, 60, 1, 1800), 1800);
  spot.interruptions_per_million_hours = 0;
  EXPECT_EQ(spot_checkpoint_interval(spot, 60, 1, 1800), 1800);
}

}  // namespace
}  // namespace tessera
