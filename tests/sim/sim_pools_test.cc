// Capacity pools in the time-driven simulator: autoscaled on-demand nodes (provisioning delay,
// billing from request to release, idle nodes given back), spot reclaims replayed from a trace
// (checkpoint within the notice, or back to the last periodic checkpoint when it does not fit),
// inference kept off spot, cost per pool, and the simulated provider on its own.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "sim/cluster_config.h"
#include "sim/sim_provider.h"
#include "sim/sim_run.h"
#include "sim_test_jobs.h"

namespace tessera::sim {
namespace {

using testing::job;
using testing::workload;

WorkloadJob checkpointing(const std::string& name, Time at, int gpus, Duration work) {
  WorkloadJob j = job(name, at, 1, gpus, work);
  j.checkpoint.interval = 1800;
  j.checkpoint.save_cost = 60;
  j.checkpoint.restart_cost = 120;
  return j;
}

SimCluster cluster(const std::string& yaml) {
  auto c = parse_cluster_yaml(yaml);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return std::move(*c);
}

std::string trace_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / ("tessera-" + name + ".csv")).string();
  std::ofstream(path) << text;
  return path;
}

const char* kOnDemand = R"(
levels: [zone]
autoscaling: {enabled: true, scale_down_idle: 600}
pools:
  - {name: od, kind: on-demand, price: "2.00", provisioning_delay: 300}
nodes:
  - {name: od, count: 4, gpu_model: V100-16GB, gpus: 8, cpu: 64000, memory: 524288, path: [z], pool: od}
)";

TEST(SimPools, AutoscaledNodesComeAfterTheDelayAreBilledAndGoBackWhenIdle) {
  SimCluster c = cluster(kOnDemand);
  Workload w = workload({job("a", 0, 1, 8, 3600), job("b", 0, 2, 8, 3600), job("c", 10000, 1, 8, 3600)});
  auto r = run_simulation(c, w, SimRunOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SimMetrics& m = r->metrics;
  EXPECT_EQ(m.finished, 3);
  // a and b wait for 3 nodes (300 s), run 3600 s; c arrives after the 3 were given back (idle
  // 600 s after 3,900), waits for a new one.
  EXPECT_DOUBLE_EQ(m.jct_mean_s, (3900.0 + 3900.0 + 3900.0) / 3);
  EXPECT_EQ(m.nodes_provisioned, 4);
  EXPECT_EQ(m.nodes_released, 3);
  // Billed: 3 nodes x 8 GPUs from 0 to 4,500, then 1 x 8 from 10,000 to 13,900.
  const double gpu_h = (24.0 * 4500 + 8.0 * 3900) / 3600;
  EXPECT_NEAR(m.billed_gpu_hours, gpu_h, 1e-9);
  EXPECT_NEAR(m.cost, gpu_h * 2.0, 1e-9);
  ASSERT_EQ(m.pools.size(), 1u);
  EXPECT_EQ(m.pools[0].kind, "on-demand");
  EXPECT_NEAR(m.pools[0].used_gpu_hours, (8.0 * 3600 + 16.0 * 3600 + 8.0 * 3600) / 3600, 1e-9);
  EXPECT_NEAR(m.used_gpu_hours_by_kind[int(PoolKind::kOnDemand)], 32.0, 1e-9);

  // Without autoscaling every node is up (and billed) from the start.
  c.autoscaling.enabled = false;
  auto fixed = run_simulation(c, w, SimRunOptions{});
  ASSERT_TRUE(fixed.ok());
  EXPECT_DOUBLE_EQ(fixed->metrics.jct_mean_s, 3600);
  EXPECT_NEAR(fixed->metrics.billed_gpu_hours, 32.0 * 13600 / 3600, 1e-9);
}

std::string spot_cluster(int notice, const std::string& trace) {
  return R"(
levels: [zone]
pools:
  - {name: spot, kind: spot, price: "1.00", provisioning_delay: 200, notice: )" +
         std::to_string(notice) + ", interruption_trace: " + trace + R"(}
nodes:
  - {name: s, count: 2, gpu_model: V100-16GB, gpus: 8, cpu: 64000, memory: 524288, path: [z], pool: spot}
)";
}

TEST(SimPools, ACheckpointThatFitsTheNoticeSavesTheWork) {
  const std::string trace = trace_file("reclaim-all", "time_s,nodes\n1000,2\n");
  SimCluster c = cluster(spot_cluster(120, trace));
  auto r = run_simulation(c, workload({checkpointing("x", 0, 8, 5000)}), SimRunOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SimMetrics& m = r->metrics;
  EXPECT_EQ(m.finished, 1);
  EXPECT_EQ(m.spot_reclaims, 2);
  EXPECT_EQ(m.job_interruptions, 1);
  // On spot every 1,800 s of progress costs a 60 s save: rate 1800/1860. Saved at 1,060 (notice at
  // 1,000 + save 60): 1,000 s of wall time of progress kept. Nodes gone at 1,120, back at 1,320;
  // restart 120 s; the rest at the same rate.
  const double rate = 1800.0 / 1860.0;
  const double safe = 1000 * rate;
  const double finish = 1320 + 120 + std::ceil((5000 - safe) / rate);
  EXPECT_NEAR(m.jct_mean_s, finish, 1.0);
  EXPECT_NEAR(m.interruption_lost_gpu_hours, (1060 * rate - safe) * 8 / 3600, 1e-6);
  EXPECT_EQ(m.inference_spot_starts, 0);
}

TEST(SimPools, ACheckpointLongerThanTheNoticeFallsBackToTheLastPeriodicOne) {
  const std::string trace = trace_file("reclaim-late", "time_s,nodes\n3000,2\n");
  SimCluster c = cluster(spot_cluster(30, trace));  // GCP/Azure: 30 s < 60 s save
  auto r = run_simulation(c, workload({checkpointing("x", 0, 8, 5000)}), SimRunOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SimMetrics& m = r->metrics;
  EXPECT_EQ(m.finished, 1);
  EXPECT_EQ(m.job_interruptions, 1);
  // Periodic checkpoint at 1,860 (1,800 s of progress); reclaimed at 3,030: 1,170 s of wall time lost.
  const double rate = 1800.0 / 1860.0;
  EXPECT_NEAR(m.interruption_lost_gpu_hours, (3030 - 1860) * rate * 8 / 3600, 1e-6);
  const double finish = 3230 + 120 + std::ceil((5000 - 1800) / rate);
  EXPECT_NEAR(m.jct_mean_s, finish, 1.0);
}

TEST(SimPools, InferenceStaysOffSpotAndEveryPoolIsCosted) {
  SimCluster c = cluster(R"(
levels: [zone]
pools:
  - {name: base, kind: reserved, price: "1.50"}
  - {name: spot, kind: spot, price: "1.00"}
nodes:
  - {name: r, count: 1, gpu_model: V100-16GB, gpus: 8, cpu: 64000, memory: 524288, path: [z], pool: base}
  - {name: s, count: 1, gpu_model: V100-16GB, gpus: 8, cpu: 64000, memory: 524288, path: [z], pool: spot}
)");
  WorkloadJob inf1 = job("inf1", 0, 1, 8, 1000), inf2 = job("inf2", 0, 1, 8, 1000);
  inf1.gang.kind = inf2.gang.kind = JobKind::kInference;
  auto r = run_simulation(c, workload({inf1, inf2, checkpointing("t", 0, 8, 500)}), SimRunOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SimMetrics& m = r->metrics;
  EXPECT_EQ(m.finished, 3);
  EXPECT_EQ(m.inference_spot_starts, 0);
  EXPECT_DOUBLE_EQ(m.inference_spot_gpu_hours, 0);
  EXPECT_DOUBLE_EQ(m.jct_mean_s, (1000.0 + 2000.0 + 500 * 1800.0 / 1800) / 3 + (std::ceil(500 * 1860.0 / 1800) - 500) / 3);
  ASSERT_EQ(m.pools.size(), 2u);  // the unpriced default pool has no nodes: not billed
  EXPECT_EQ(m.pools[0].pool, "base");
  EXPECT_NEAR(m.pools[0].billed_gpu_hours, 8.0 * 2000 / 3600, 1e-9);
  EXPECT_NEAR(m.cost, 8.0 * 2000 / 3600 * 2.5, 1e-9);
}

TEST(SimPools, ProviderRequestsReleasesAndTraceReclaims) {
  SimCluster c = cluster(spot_cluster(120, trace_file("provider", "time_s,nodes\n500,1\n")));
  auto p = SimProvider::create(c.cluster, /*elastic=*/true, 1, 0);
  ASSERT_TRUE(p.ok()) << p.error().message;
  SimProvider& prov = **p;
  const PoolId spot = c.cluster.find_pool("spot").value();
  EXPECT_EQ(prov.running(spot), 0);
  EXPECT_FALSE(prov.request_nodes(PoolId(0), 1, 0).ok());  // default pool: owned, not elastic
  ASSERT_TRUE(prov.request_nodes(spot, 3, 100).ok());      // 2 slots: one request fails
  std::vector<ProviderEvent> ev = prov.poll(100);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ProviderEventKind::kRequestFailed);
  EXPECT_NE(ev[0].reason.find("1 short"), std::string::npos);
  EXPECT_EQ(prov.provisioning(spot), 2);
  EXPECT_EQ(prov.next_event_time().value(), 300);
  ev = prov.poll(300);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, ProviderEventKind::kNodeReady);
  EXPECT_EQ(prov.running(spot), 2);
  ev = prov.poll(500);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ProviderEventKind::kInterruptionNotice);
  EXPECT_EQ(ev[0].reclaim_at, 620);
  const NodeId hit = ev[0].node;
  EXPECT_FALSE(prov.release_node(hit, 550).ok());  // under notice: not the caller's to give back
  ev = prov.poll(620);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ProviderEventKind::kNodeReclaimed);
  EXPECT_FALSE(prov.up(hit));
  const NodeId other(hit.value == 0 ? 1 : 0);
  ASSERT_TRUE(prov.release_node(other, 700).ok());
  // Billed from the request (100): the reclaimed node to 620, the other to 700.
  EXPECT_EQ(prov.billed_gpu_seconds(spot, 1000), 8 * (520 + 600));
  EXPECT_FALSE(prov.next_event_time().has_value());

  auto bad = load_interruption_trace(trace_file("bad", "time_s,nodes\n10,x\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(":2: expected \"time_s,nodes\""), std::string::npos) << bad.error().message;
  EXPECT_FALSE(load_interruption_trace("/nonexistent/trace.csv").ok());
}

TEST(SimPools, RateDrivenReclaimsAreDeterministicAndHitJobs) {
  SimCluster c = cluster(R"(
levels: [zone]
pools:
  - {name: spot, kind: spot, price: "1.00", provisioning_delay: 300, interruption_rate: "0.5", notice: 120, correlated: 50}
nodes:
  - {name: s, count: 8, gpu_model: V100-16GB, gpus: 8, cpu: 64000, memory: 524288, path: [z], pool: spot}
)");
  std::vector<WorkloadJob> jobs;
  for (int i = 0; i < 8; ++i) jobs.push_back(checkpointing("x" + std::to_string(i), i * 60, 8, 20000));
  SimRunOptions o;
  o.seed = 3;
  auto r = run_simulation(c, workload(jobs), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics.finished, 8);
  EXPECT_GT(r->metrics.spot_reclaims, 10);  // ~0.5/node-hour x 8 nodes x ~6 h
  EXPECT_GT(r->metrics.job_interruptions, 0);
  EXPECT_GT(r->metrics.interruption_lost_gpu_hours, 0);
  EXPECT_LE(r->metrics.interruption_lost_gpu_hours, r->metrics.lost_gpu_hours + 1e-9);
  auto again = run_simulation(c, workload(jobs), o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->metrics.spot_reclaims, r->metrics.spot_reclaims);
  EXPECT_DOUBLE_EQ(again->metrics.jct_mean_s, r->metrics.jct_mean_s);
}

TEST(SimPools, ConsolidationEmptiesAnUnderUsedNodeSoItGoesBack) {
  SimCluster c = cluster(kOnDemand);
  // A (6 GPUs) and B (6) get a node each; C (2) joins A on the first; A ends at 2,300 and leaves C
  // alone there, while C's 2 GPUs fit next to B.
  Workload w = workload({checkpointing("a", 0, 6, 2000), checkpointing("b", 0, 6, 20000), checkpointing("c", 1000, 2, 20000)});
  auto r = run_simulation(c, w, SimRunOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SimMetrics& m = r->metrics;
  EXPECT_EQ(m.finished, 3);
  EXPECT_EQ(m.consolidations, 1);
  EXPECT_EQ(m.consolidation_moves, 1);
  EXPECT_EQ(m.nodes_provisioned, 2);
  c.autoscaling.consolidate_below_pct = 0;
  auto kept = run_simulation(c, w, SimRunOptions{});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->metrics.consolidations, 0);
  // Moving costs C a save and a restart, and frees a node for most of the run.
  EXPECT_LT(m.billed_gpu_hours, kept->metrics.billed_gpu_hours - 8 * 4);
  EXPECT_GT(m.jct_mean_s, kept->metrics.jct_mean_s);
  EXPECT_GT(m.lost_gpu_hours, kept->metrics.lost_gpu_hours);
}

}  // namespace
}  // namespace tessera::sim
