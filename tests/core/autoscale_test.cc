// The autoscaling planner on hand-made pool states: which pool demand goes to (spot first for jobs
// that may use it and it is cheapest, other pools for jobs avoiding spot or not allowed on it),
// capacity on the way claimed before new nodes, multi-node gangs taking whole nodes, max_nodes and
// the budget holding demand back with a reason, guarantees first, and idle nodes given back.
#include "core/autoscale.h"

#include <gtest/gtest.h>

#include "core/placement/engine.h"
#include "core/placement/policy.h"
#include "core/sched/job.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

ElasticPool epool(uint32_t id, const std::string& name, PoolKind kind, int64_t price_micro, int max_nodes) {
  ElasticPool p;
  p.pool = PoolId(id);
  p.name = name;
  p.kind = kind;
  p.gpu_model = "V100-16GB";
  p.gpus_per_node = 8;
  p.price_micro_per_gpu_hour = price_micro;
  p.max_nodes = max_nodes;
  return p;
}

DemandItem demand(uint32_t job, int tasks, int gpus, PoolKindMask kinds = kAnyPoolKind) {
  DemandItem d;
  d.job = JobId(job);
  d.tasks = tasks;
  d.gpus_per_task = gpus;
  d.pool_kinds = kinds;
  d.submitted = job;
  return d;
}

AutoscaleInput input() {
  AutoscaleInput in;
  in.now = 10000;
  in.config.enabled = true;
  in.pools = {epool(1, "od", PoolKind::kOnDemand, 2740000, 10), epool(2, "spot", PoolKind::kSpot, 1030000, 10)};
  return in;
}

int up(const AutoscalePlan& p, uint32_t pool) {
  for (const ScaleUp& u : p.up)
    if (u.pool == PoolId(pool)) return u.nodes;
  return 0;
}

TEST(Autoscale, DisabledPlansNothing) {
  AutoscaleInput in = input();
  in.config.enabled = false;
  in.demand = {demand(1, 1, 8)};
  const AutoscalePlan p = plan_autoscaling(in);
  EXPECT_TRUE(p.up.empty());
  EXPECT_TRUE(p.down.empty());
}

TEST(Autoscale, DemandGoesToTheCheapestPoolItMayUse) {
  AutoscaleInput in = input();
  in.demand = {demand(1, 1, 8), demand(2, 1, 8, kNoSpot)};
  AutoscalePlan p = plan_autoscaling(in);
  EXPECT_EQ(up(p, 2), 1);  // job 1 may use spot, the cheapest
  EXPECT_EQ(up(p, 1), 1);  // job 2 may not
  ASSERT_EQ(p.up.size(), 2u);
  EXPECT_EQ(p.up[0].pool, PoolId(1));  // pool id order

  // A job interrupted too often goes to on-demand although spot is cheaper; one preferring spot goes
  // to spot even when spot costs more.
  in.demand = {demand(1, 1, 8)};
  in.demand[0].avoid_spot = true;
  p = plan_autoscaling(in);
  EXPECT_EQ(up(p, 1), 1);
  EXPECT_EQ(up(p, 2), 0);
  in.pools[1].price_micro_per_gpu_hour = 9000000;
  in.demand = {demand(1, 1, 8)};
  EXPECT_EQ(up(plan_autoscaling(in), 1), 1);
  in.demand[0].prefer_spot = true;
  EXPECT_EQ(up(plan_autoscaling(in), 2), 1);
}

TEST(Autoscale, CapacityOnTheWayIsClaimedBeforeNewNodes) {
  AutoscaleInput in = input();
  in.pools[1].provisioning = 1;  // 8 GPUs of spot on the way
  in.demand = {demand(1, 1, 4), demand(2, 1, 4)};
  EXPECT_TRUE(plan_autoscaling(in).up.empty());
  in.demand.push_back(demand(3, 1, 2));
  in.demand.push_back(demand(4, 1, 2));
  const AutoscalePlan p = plan_autoscaling(in);
  EXPECT_EQ(up(p, 2), 1);  // jobs 3 and 4 share one new node
  EXPECT_EQ(up(p, 1), 0);
}

TEST(Autoscale, MultiNodeGangsTakeWholeNodes) {
  AutoscaleInput in = input();
  in.demand = {demand(1, 4, 8), demand(2, 3, 4)};  // 4 nodes; 3 tasks of 4 GPUs: 2 per node -> 2 nodes
  EXPECT_EQ(up(plan_autoscaling(in), 2), 6);
}

TEST(Autoscale, MaxNodesAndBudgetHoldDemandWithAReason) {
  AutoscaleInput in = input();
  in.pools[0].max_nodes = 2;
  in.pools[0].running = 2;
  in.demand = {demand(1, 1, 8, kNoSpot)};
  AutoscalePlan p = plan_autoscaling(in);
  EXPECT_TRUE(p.up.empty());
  ASSERT_EQ(p.held.size(), 1u);
  EXPECT_NE(p.held[0].second.find("on-demand pool od is at its max_nodes 2"), std::string::npos) << p.held[0].second;

  in = input();
  in.pools[0].running = 1;  // 8 x $2.74 = $21.92/h already
  in.config.budget_micro_per_hour = 40000000;  // $40/h: room for one more spot node ($8.24), not on-demand ($21.92)
  in.demand = {demand(1, 1, 8, kNoSpot), demand(2, 1, 8), demand(3, 1, 8)};
  p = plan_autoscaling(in);
  EXPECT_EQ(up(p, 1), 0);
  EXPECT_EQ(up(p, 2), 2);  // $21.92 + 2 x $8.24 = $38.40
  ASSERT_EQ(p.held.size(), 1u);
  EXPECT_EQ(p.held[0].first, JobId(1));
  EXPECT_NE(p.held[0].second.find("budget $40.00/h would be exceeded by pool od ($21.92/h now, +$21.92/h)"), std::string::npos)
      << p.held[0].second;

  // Nothing it may use at all.
  in = input();
  in.demand = {demand(1, 1, 8, pool_kind_bit(PoolKind::kReserved))};
  p = plan_autoscaling(in);
  ASSERT_EQ(p.held.size(), 1u);
  EXPECT_NE(p.held[0].second.find("no elastic pool of a kind it may use (reserved)"), std::string::npos);
  in.demand = {demand(1, 1, 16)};  // bigger than any node
  EXPECT_EQ(plan_autoscaling(in).held.size(), 1u);
  in.demand = {demand(1, 1, 8)};
  in.demand[0].gpu_models = {"H100-80GB-SXM"};
  EXPECT_EQ(plan_autoscaling(in).held.size(), 1u);
}

TEST(Autoscale, DemandWithinGuaranteeIsServedFirst) {
  AutoscaleInput in = input();
  in.pools[1].max_nodes = 1;
  in.pools[0].max_nodes = 0;
  in.demand = {demand(1, 1, 8), demand(2, 1, 8)};
  in.demand[1].within_guarantee = true;
  const AutoscalePlan p = plan_autoscaling(in);
  EXPECT_EQ(up(p, 2), 1);
  ASSERT_EQ(p.held.size(), 1u);
  EXPECT_EQ(p.held[0].first, JobId(1));  // the older job waits: job 2's team is below its guarantee
}

TEST(Autoscale, IdleNodesGoBackAfterTheIdleTimeDownToMinNodes) {
  AutoscaleInput in = input();
  in.pools[0].running = 3;
  in.pools[0].min_nodes = 1;
  in.config.scale_down_idle_s = 600;
  in.idle = {{NodeId(7), PoolId(1), 9000}, {NodeId(5), PoolId(1), 9000}, {NodeId(6), PoolId(1), 9500},
             {NodeId(8), PoolId(1), 9900}};
  AutoscalePlan p = plan_autoscaling(in);
  ASSERT_EQ(p.down.size(), 2u);  // 3 running, min 1; node 8 idle only 100 s
  EXPECT_EQ(p.down[0].node, NodeId(5));  // (idle_since, node) order
  EXPECT_EQ(p.down[1].node, NodeId(7));
  // A pool that grows this round keeps its idle nodes.
  in.demand = {demand(1, 2, 8, kNoSpot)};
  p = plan_autoscaling(in);
  EXPECT_EQ(up(p, 1), 2);
  EXPECT_TRUE(p.down.empty());
}

// Two on-demand nodes and one spot node of 8 GPUs; jobs placed by hand.
class ConsolidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Pool od;
    od.name = "od";
    od.kind = PoolKind::kOnDemand;
    Pool spot;
    spot.name = "spot";
    spot.kind = PoolKind::kSpot;
    const PoolId o = cluster.add_pool(od).value(), s = cluster.add_pool(spot).value();
    for (auto [name, pool] : {std::pair{"od-0", o}, {"od-1", o}, {"spot-0", s}}) {
      NodeSpec n = node_spec(name, "V100-16GB", 8);
      n.pool = pool;
      ASSERT_TRUE(cluster.add_node(n).ok());
    }
  }
  // Places a job of `gpus` whole GPUs on node `node` (best fit there) and records it.
  void run(uint32_t id, int gpus, uint32_t node, int64_t started = 0, bool checkpoints = true) {
    auto policy = make_policy("best-fit");
    PlacementEngine engine(**policy, EngineOptions{});
    ClusterState only = cluster;
    for (const Node& n : cluster.nodes())
      if (n.id.value != node) {
        ASSERT_TRUE(only.set_schedulable(n.id, false).ok());
      }
    Gang g = gang(1, whole(gpus), int(id));
    PlacementResult r = engine.place(only, g);
    ASSERT_EQ(r.outcome, Outcome::kPlaced) << r.reason;
    ASSERT_TRUE(cluster.apply_all(r.tasks).ok());
    MovableJob m;
    m.job = JobId(id);
    m.gang = g;
    m.placement = r.tasks;
    m.checkpointable = checkpoints;
    m.started = started;
    jobs.push_back(m);
  }
  std::vector<NodeId> elastic() const { return {NodeId(0), NodeId(1), NodeId(2)}; }
  ClusterState cluster;
  std::vector<MovableJob> jobs;
  AutoscaleConfig config;
};

TEST_F(ConsolidationTest, TheLeastUsedNodeWhoseJobsFitElsewhereIsEmptied) {
  run(1, 6, 0);  // od-0: 6 of 8
  run(2, 2, 1);  // od-1: 2 of 8 -> its job fits on od-0
  auto c = plan_consolidation(cluster, elastic(), jobs, config, 10000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->node, NodeId(1));
  EXPECT_EQ(c->jobs, std::vector<JobId>{JobId(2)});
  EXPECT_NE(c->reason.find("2 of 8 GPUs used on on-demand node od-1"), std::string::npos) << c->reason;
  // Off, too young, or not checkpointing: nothing moves.
  config.consolidate_below_pct = 0;
  EXPECT_FALSE(plan_consolidation(cluster, elastic(), jobs, config, 10000).has_value());
  config.consolidate_below_pct = 50;
  EXPECT_FALSE(plan_consolidation(cluster, elastic(), jobs, config, 3599).has_value());
  jobs[1].checkpointable = false;
  EXPECT_FALSE(plan_consolidation(cluster, elastic(), jobs, config, 10000).has_value());
}

TEST_F(ConsolidationTest, NothingMovesWhenItWouldNotFitOrTheNodeIsBusy) {
  run(1, 7, 0);  // od-0: 7 of 8
  run(2, 3, 1);  // od-1: 3 of 8: does not fit on od-0's 1 free GPU, and may not use spot
  jobs[1].gang.task.pool_kinds = kNoSpot;
  EXPECT_FALSE(plan_consolidation(cluster, elastic(), jobs, config, 10000).has_value());
  jobs[1].gang.task.pool_kinds = kAnyPoolKind;  // it may: on-demand -> spot costs less
  auto c = plan_consolidation(cluster, elastic(), jobs, config, 10000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->node, NodeId(1));
  // A spot node's jobs never move to on-demand (it would cost more).
  jobs.clear();
  cluster = ClusterState();
  SetUp();
  run(1, 4, 0);  // od-0: 4 of 8
  run(2, 2, 2);  // spot-0: 2 of 8
  c = plan_consolidation(cluster, elastic(), jobs, config, 10000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->node, NodeId(0));  // od-0's job fits on spot; spot-0's job may not go to od
  EXPECT_FALSE(plan_consolidation(cluster, {NodeId(2)}, jobs, config, 10000).has_value());
  // A node whose occupants the caller does not list is never emptied.
  jobs.pop_back();
  EXPECT_FALSE(plan_consolidation(cluster, {NodeId(2)}, jobs, config, 10000).has_value());
}

TEST(OnDemandFallback, SpotJobsWaitForSpotBeforeTakingOnDemand) {
  PoolRules rules;
  rules.on_demand_fallback_after_s = 600;
  Job j;
  j.submitted = 1000;
  j.checkpoint.interval = 1800;
  j.gang = gang(1, whole(8));
  Gang g = j.gang;
  apply_job_pool_rules(g, j, rules, 1300);
  EXPECT_FALSE(g.task.pool_kinds & pool_kind_bit(PoolKind::kOnDemand));  // waited 300 s of 600
  EXPECT_TRUE(g.task.pool_kinds & pool_kind_bit(PoolKind::kSpot));
  g = j.gang;
  apply_job_pool_rules(g, j, rules, 1600);
  EXPECT_TRUE(g.task.pool_kinds & pool_kind_bit(PoolKind::kOnDemand));  // fell back
  j.last_preempted = 1500;  // stopped again: waits again
  g = j.gang;
  apply_job_pool_rules(g, j, rules, 1600);
  EXPECT_FALSE(g.task.pool_kinds & pool_kind_bit(PoolKind::kOnDemand));
  j.spot_interruptions = 3;  // avoids spot: on-demand at once
  g = j.gang;
  apply_job_pool_rules(g, j, rules, 1600);
  EXPECT_TRUE(g.task.pool_kinds & pool_kind_bit(PoolKind::kOnDemand));
  EXPECT_TRUE(g.avoid_spot);
  j.spot_interruptions = 0;
  j.checkpoint.interval = 0;  // may not use spot: nothing to wait for
  g = j.gang;
  apply_job_pool_rules(g, j, rules, 1600);
  EXPECT_TRUE(g.task.pool_kinds & pool_kind_bit(PoolKind::kOnDemand));
  rules.on_demand_fallback_after_s = -1;  // off
  j.checkpoint.interval = 1800;
  g = j.gang;
  apply_job_pool_rules(g, j, rules, 1500);
  EXPECT_TRUE(g.task.pool_kinds & pool_kind_bit(PoolKind::kOnDemand));
}

TEST(PoolRank, CommittedCapacityFirstThenSpotThenOnDemand) {
  ClusterState c;
  for (auto [name, kind] : {std::pair{"od", PoolKind::kOnDemand}, {"spot", PoolKind::kSpot}, {"res", PoolKind::kReserved}}) {
    Pool p;
    p.name = name;
    p.kind = kind;
    const PoolId id = c.add_pool(p).value();
    NodeSpec n = node_spec(std::string(name) + "-0", "V100-16GB", 8);
    n.pool = id;
    ASSERT_TRUE(c.add_node(n).ok());
  }
  auto policy = make_policy("best-fit");
  PlacementEngine engine(**policy, EngineOptions{});
  Gang g = gang(1, whole(2));
  auto node_of = [&](const Gang& x) { return c.node(engine.place(c, x).tasks.at(0).node).name; };
  EXPECT_EQ(node_of(g), "res-0");
  g.task.pool_kinds = kAnyPoolKind & ~pool_kind_bit(PoolKind::kReserved);
  EXPECT_EQ(node_of(g), "spot-0");
  g.task.avoid_spot = true;
  EXPECT_EQ(node_of(g), "od-0");
  g.task.avoid_spot = false;
  g.task.pool_kinds = kAnyPoolKind;
  g.task.prefer_spot = true;
  EXPECT_EQ(node_of(g), "spot-0");
}

}  // namespace
}  // namespace tessera
