// The FGD allocation experiment: protocol pieces (Python rounding, tuning, curve), determinism,
// the CLI, and the reproduction of the published openb curves when the trace is present.
#include "sim/alloc_bound.h"
#include "sim/alloc_experiment.h"

#include "core/placement/engine.h"
#include "core/placement/fit.h"

#include <gtest/gtest.h>

#include "run_binary.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace tessera::sim {
namespace {

TEST(AllocExperiment, PythonRounding) {
  EXPECT_EQ(round_half_even(0.5), 0);
  EXPECT_EQ(round_half_even(1.5), 2);
  EXPECT_EQ(round_half_even(2.5), 2);
  EXPECT_EQ(round_half_even(2.5000001), 3);
  EXPECT_EQ(round_half_even(-0.5), 0);
  EXPECT_DOUBLE_EQ(round2(2.675), 2.67);  // 2.675 is 2.67499999... in binary
  EXPECT_DOUBLE_EQ(round2(0.125), 0.12);  // exact tie: to even
  EXPECT_DOUBLE_EQ(round2(0.375), 0.38);
  EXPECT_DOUBLE_EQ(round2(95.3849), 95.38);
}

OpenbPod pod(std::string name, int gpus, int64_t milli = 1000, int64_t cpu = 1000) {
  OpenbPod p;
  p.name = std::move(name);
  p.task.cpu = MilliCpu(cpu);
  p.task.gpu_count = gpus;
  if (gpus > 0) p.task.milli_per_gpu = MilliGpu(milli);
  return p;
}

int64_t demand(const std::vector<OpenbPod>& sorted, const std::vector<uint32_t>& order) {
  int64_t d = 0;
  for (uint32_t i : order) d += pod_demand_milli(sorted[i].task);
  return d;
}

TEST(AllocExperiment, TuningUpKeepsOriginalsFirstAndStopsAtTheTarget) {
  std::vector<OpenbPod> sorted{pod("a", 1), pod("b", 0), pod("c", 1, 500), pod("d", 2)};  // 3500 milli
  Rng rng(7);
  const auto order = plan_arrivals(sorted, 10000, 1.3, rng);  // target 13000
  ASSERT_GE(order.size(), 4u);
  EXPECT_EQ(std::set<uint32_t>(order.begin(), order.begin() + 4), (std::set<uint32_t>{0, 1, 2, 3}));
  const int64_t total = demand(sorted, order);
  EXPECT_LE(total, 13000 + 1000);  // the stop test adds per-GPU milli: overshoot by < one 2-GPU pod
  EXPECT_GT(total, 13000 - 1000);
  // Same seed, same plan; another seed, another one.
  Rng again(7), other(8);
  EXPECT_EQ(plan_arrivals(sorted, 10000, 1.3, again), order);
  EXPECT_NE(plan_arrivals(sorted, 10000, 1.3, other), order);
}

TEST(AllocExperiment, TuningUpStopTestUsesPerGpuMilli) {
  std::vector<OpenbPod> sorted{pod("big", 8)};  // 8000 of a 13000 target
  Rng rng(1);
  const auto order = plan_arrivals(sorted, 10000, 1.3, rng);
  // 8000 + 1000 (per-GPU) <= 13000: one copy is added, then 16000 + 1000 > 13000 stops.
  EXPECT_EQ(order.size(), 2u);
  EXPECT_EQ(demand(sorted, order), 16000);
}

TEST(AllocExperiment, TuningDownRemovesUntilAtOrBelowTarget) {
  std::vector<OpenbPod> sorted;
  for (int i = 0; i < 20; ++i) sorted.push_back(pod("p" + std::to_string(100 + i), 1));  // 20000
  Rng rng(3);
  const auto order = plan_arrivals(sorted, 10000, 1.3, rng);
  EXPECT_EQ(order.size(), 13u);
  EXPECT_EQ(std::set<uint32_t>(order.begin(), order.end()).size(), 13u) << "a subset, no copies";
}

TEST(AllocExperiment, CurveRoundsAndFallsBackToNeighbours) {
  // 10 GPUs: 1 % = 100 milli.
  std::vector<AllocRow> rows{{100, 100}, {100, 100}, {250, 200}, {350, 301}, {500, 333}};
  const auto curve = alloc_curve(rows, 10, 6);
  ASSERT_EQ(curve.size(), 7u);
  EXPECT_DOUBLE_EQ(curve[1], 1.0);
  EXPECT_DOUBLE_EQ(curve[2], 2.0);  // 2.5 rounds to 2 (half to even)
  EXPECT_DOUBLE_EQ(curve[4], 3.01);  // 3.5 rounds to 4
  EXPECT_DOUBLE_EQ(curve[3], round2((2.0 + 3.01) / 2));  // none at 3: rows within 2..4
  EXPECT_DOUBLE_EQ(curve[5], 3.33);
  EXPECT_DOUBLE_EQ(curve[6], 3.33);  // none at 6: the row at 5
  EXPECT_DOUBLE_EQ(curve[0], 1.0);   // none at 0: the rows at 1
  EXPECT_TRUE(std::isnan(alloc_curve(rows, 10, 9)[8]));
}

AllocWorkload small_synthetic() { return synthetic_workload(5, 60); }

TEST(AllocExperiment, SyntheticRunsAreDeterministicAndSane) {
  const AllocWorkload w = small_synthetic();
  EXPECT_GT(w.cluster.total_gpus(), 100);
  int cpu = 0, share = 0, multi = 0;
  for (const auto& p : w.pods) {
    cpu += p.task.cpu_only();
    share += p.task.gpu_share();
    multi += p.task.gpu_count > 1;
  }
  EXPECT_NEAR(double(cpu) / double(w.pods.size()), 0.13, 0.05);
  EXPECT_NEAR(double(share) / double(w.pods.size()), 0.38, 0.06);
  auto a = run_alloc(w, "fgd", 11), b = run_alloc(w, "fgd", 11), r = run_alloc(w, "random", 11);
  ASSERT_TRUE(a.ok() && b.ok() && r.ok());
  EXPECT_EQ(a->curve.size(), 131u);
  for (int p = 0; p <= 130; ++p) {
    if (!std::isnan(a->curve[p])) {
      EXPECT_EQ(a->curve[p], b->curve[p]) << p;
    }
  }
  EXPECT_GT(a->curve[130], 80.0);
  EXPECT_LE(a->curve[130], 100.0);
  EXPECT_GE(a->curve[130], r->curve[130]) << "FGD should not lose to Random";
  EXPECT_FALSE(run_alloc(w, "nope", 1).ok());
}

TaskRequest ask(int gpus, int64_t milli, int64_t cpu, int64_t mem = 1024) {
  TaskRequest t;
  t.cpu = MilliCpu(cpu);
  t.memory = MiB(mem);
  t.gpu_count = gpus;
  if (gpus > 0) t.milli_per_gpu = MilliGpu(milli);
  return t;
}

TEST(UnfitPods, CoversWhatAsksAtLeastAsMuchUnderTheSameConstraints) {
  UnfitPods u;
  EXPECT_FALSE(u.covers(ask(0, 0, 1000)));
  u.add(ask(1, 470, 4000));
  EXPECT_TRUE(u.covers(ask(1, 470, 4000)));
  EXPECT_TRUE(u.covers(ask(1, 810, 8000, 4096)));
  EXPECT_TRUE(u.covers(ask(2, 470, 4000)));
  EXPECT_FALSE(u.covers(ask(1, 320, 4000))) << "a smaller share may fit";
  EXPECT_FALSE(u.covers(ask(1, 810, 2000))) << "less CPU may fit";
  EXPECT_FALSE(u.covers(ask(1, 1000, 8000))) << "another GPU form";
  TaskRequest named = ask(1, 810, 8000);
  named.gpu_models = {"T4"};
  EXPECT_FALSE(u.covers(named)) << "other constraints";
  u.add(ask(1, 1000, 16000));
  EXPECT_TRUE(u.covers(ask(8, 1000, 64000)));
  EXPECT_EQ(u.size(), 2u);
  u.add(ask(1, 230, 4000));  // covers the 470 one, which goes
  EXPECT_EQ(u.size(), 2u);
  EXPECT_TRUE(u.covers(ask(1, 470, 4000)));
}

// Sound: on a cluster that only fills, every pod it covers fits no node (checked by a full scan).
TEST(UnfitPods, EveryPodItCoversFitsNoNodeWhileNothingLeaves) {
  const AllocWorkload w = synthetic_workload(5, 40, SyntheticMix::kMemoryHeavy);
  ClusterState c = w.cluster;
  auto policy = make_policy("best-fit");
  ASSERT_TRUE(policy.ok());
  PlacementEngine engine(**policy, EngineOptions{});
  UnfitPods u;
  int covered = 0;
  Gang g;
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < w.pods.size(); ++i) {
      g.id = JobId(uint32_t(round * w.pods.size() + i));
      g.task = w.pods[i].task;
      const bool fits = std::any_of(c.nodes().begin(), c.nodes().end(),
                                    [&](const Node& n) { return check_fit(n, g.task) == Misfit::kFits; });
      if (u.covers(g.task)) {
        ++covered;
        ASSERT_FALSE(fits) << "pod " << i << " of round " << round;
        continue;
      }
      if (!fits) u.add(g.task);
      else (void)engine.place_and_commit(c, g);
    }
  EXPECT_GT(covered, 100) << "the cluster fills, so later pods are covered";
}

TEST(AllocExperiment, MatrixAveragesSeedsAndReportsProgress) {
  const AllocWorkload w = small_synthetic();
  int calls = 0, last = 0;
  auto res = run_alloc_matrix(w, {"best-fit", "tessera"}, {1, 2}, 1.3, 2, [&](int done, int total) {
    ++calls;
    last = done;
    EXPECT_EQ(total, 4);
  });
  ASSERT_TRUE(res.ok()) << res.error().message;
  ASSERT_EQ(res->size(), 2u);
  EXPECT_EQ(last, 4);
  EXPECT_GE(calls, 1);
  auto one = run_alloc(w, "best-fit", 1), two = run_alloc(w, "best-fit", 2);
  EXPECT_NEAR((*res)[0].mean_curve[100], (one->curve[100] + two->curve[100]) / 2, 1e-9);
  EXPECT_FALSE(run_alloc_matrix(w, {"fgd", "bogus"}, {1}).ok());
}

std::pair<int, std::string> run_cli(const std::string& args) { return tessera::testing::run_tessera(args); }

TEST(AllocCli, BadArgumentsNameTheFlag) {
  auto [code, out] = run_cli("sim alloc --policy fgd --seeds x");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--seeds: expected A-B or a comma list of integers, got \"x\""), std::string::npos) << out;
  std::tie(code, out) = run_cli("sim alloc --policy fgd,nope");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--policy: unknown policy \"nope\""), std::string::npos) << out;
  std::tie(code, out) = run_cli("sim alloc --policy fgd --inflate -1");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--inflate"), std::string::npos) << out;
  std::tie(code, out) = run_cli("sim alloc --seeds 1");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--policy: required"), std::string::npos) << out;
  std::tie(code, out) = run_cli("sim alloc --policy fgd --bogus");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("unknown argument \"--bogus\""), std::string::npos) << out;
  std::tie(code, out) = run_cli("sim alloc --policy fgd --nodes /nonexistent.csv --pods x.csv");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--nodes: /nonexistent.csv: cannot open file"), std::string::npos) << out;
  std::tie(code, out) = run_cli("sim alloc --policy fgd --pods x.csv");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--nodes: required with --pods"), std::string::npos) << out;
}

TEST(AllocCli, SyntheticRunPrintsTableAndJson) {
  const std::string json = ::testing::TempDir() + "/alloc.json";
  auto [code, out] = run_cli("sim alloc --policy best-fit --seeds 3 --json " + json);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("synthetic"), std::string::npos) << out;
  EXPECT_NE(out.find("best-fit"), std::string::npos) << out;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["policy"], "best-fit");
  EXPECT_EQ(j[0]["seeds"], nlohmann::json::array({3}));
  ASSERT_EQ(j[0]["curve"].size(), 131u);
  EXPECT_EQ(j[0]["curve"][130]["arrived_pct"], 130);
  EXPECT_GT(j[0]["curve"][130]["allocated_pct"].get<double>(), 50.0);
}

TEST(AllocCli, SeveralPodListsRunInTurn) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream n(dir + "/n.csv"), a(dir + "/a.csv"), b(dir + "/b.csv");
    n << "sn,cpu_milli,memory_mib,gpu,model\n";
    for (int i = 0; i < 4; ++i) n << "n" << i << ",32000,65536,4,T4\n";
    a << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
    b << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
    for (int i = 0; i < 20; ++i) {
      a << "p" << i << ",1000,1024,1," << (i % 2 ? 1000 : 300) << "\n";
      b << "p" << i << ",2000,1024," << (i % 3) << ",1000\n";
    }
  }
  auto [code, out] = run_cli("sim alloc --nodes " + dir + "/n.csv --pods " + dir + "/a.csv " + dir +
                             "/b.csv --policy fgd,tessera --seeds 1-2 --json " + dir + "/ab.json");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("workload: a:"), std::string::npos) << out;
  EXPECT_NE(out.find("workload: b:"), std::string::npos) << out;
  std::ifstream in(dir + "/ab.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0]["workload"], "a");
  EXPECT_EQ(j[3]["workload"], "b");
  EXPECT_EQ(j[3]["policy"], "tessera");
}

TEST(AllocCli, SyntheticMixesAndTheBound) {
  auto [code, out] = run_cli("sim alloc --policy fgd --synthetic gpu-heavy");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--synthetic: unknown synthetic mix 'gpu-heavy' (known: openb, cpu-heavy"), std::string::npos) << out;
  std::tie(code, out) = run_cli("sim alloc --policy fgd --synthetic cpu-heavy --nodes n.csv --pods p.csv");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--synthetic: give either --synthetic or --nodes/--pods"), std::string::npos) << out;
  const std::string json = ::testing::TempDir() + "/bound.json";
  std::tie(code, out) =
      run_cli("sim alloc --policy first-fit,tessera --synthetic memory-heavy --seeds 1-2 --bound --repack --leftover --json " + json);
  if (!lp_available()) {
    EXPECT_EQ(code, 1);
    EXPECT_NE(out.find("--bound: no LP solver"), std::string::npos) << out;
    return;
  }
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("workload: synthetic-memory-heavy"), std::string::npos) << out;
  EXPECT_NE(out.find("bound (LP)"), std::string::npos) << out;
  EXPECT_NE(out.find("gap to bound"), std::string::npos) << out;
  EXPECT_NE(out.find("packing loss"), std::string::npos) << out;
  EXPECT_NE(out.find("leftover      policy             free cpu/mem    1-99 100-199 200-499 500-999    idle"),
            std::string::npos) << out;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[1]["policy"], "tessera");
  ASSERT_EQ(j[1]["per_seed"].size(), 2u);
  EXPECT_EQ(j[1]["per_seed"][1]["seed"], 2);
  for (int k = 0; k < 2; ++k)  // the packing ceiling of each run: at or above where it ended
    for (const auto& ps : j[k]["per_seed"]) {
      EXPECT_GE(ps["repack_ceiling_pct"].get<double>() + 1e-9, ps["final_pct"].get<double>()) << ps.dump();
      EXPECT_LE(ps["repack_ceiling_pct"].get<double>(), 100.0);
      // Where the rest is: its parts add up to what the run left free (to rounding).
      const auto& lo = ps["leftover_pct"];
      double parts = lo["cpu_memory"].get<double>();
      for (const char* b : {"1-99", "100-199", "200-499", "500-999", "idle"}) parts += lo[b].get<double>();
      EXPECT_NEAR(parts, lo["free"].get<double>(), 0.03) << ps.dump();
      EXPECT_NEAR(lo["free"].get<double>(), 100.0 - ps["final_pct"].get<double>(), 0.011) << ps.dump();
    }
  ASSERT_TRUE(j[2].contains("bound")) << j[2].dump();
  for (const char* p : {"80", "100", "130"}) {
    const double b = j[2]["bound_pct"][p].get<double>();
    for (int k = 0; k < 2; ++k) EXPECT_GE(b + 1e-9, j[k]["curve"][std::stoi(p)]["allocated_pct"].get<double>()) << p;
    EXPECT_LE(b, 100.0);
  }
}

// Reproduces the FGD artifact's published seed means on openb_pod_list_default for a few seeds.
TEST(AllocOpenb, ReproducesPublishedCurvesOnDefault) {
  const std::string dir = std::string(TESSERA_SHARED_DATA) + "/openb";
  if (!std::filesystem::exists(dir + "/openb_pod_list_default.csv"))
    GTEST_SKIP() << "openb trace not found in " << dir << " (../shared/data/openb): skipping the reproduction test";
  auto nodes = load_openb_nodes(dir + "/openb_node_list_gpu_node.csv");
  auto pods = load_openb_pods(dir + "/openb_pod_list_default.csv");
  auto pub = load_published_curves(dir + "/fgd_expected_allocation.csv");
  ASSERT_TRUE(nodes.ok() && pods.ok() && pub.ok());
  EXPECT_EQ(nodes->total_gpus(), 6212);
  const AllocWorkload w{"openb_pod_list_default", std::move(*nodes), std::move(*pods)};
  const std::vector<uint64_t> seeds{42, 43, 44};
  auto res = run_alloc_matrix(w, {"fgd", "best-fit"}, seeds, 1.3, 0);
  ASSERT_TRUE(res.ok()) << res.error().message;
  // Tolerances: a 3-seed mean of either side has a standard error of ~0.1 pp.
  const std::pair<const char*, double> tol[] = {{"fgd", 0.5}, {"best-fit", 0.8}};
  for (size_t i = 0; i < 2; ++i) {
    const auto published = published_mean(*pub, w.name, tol[i].first, seeds);
    ASSERT_GT(published.size(), 130u) << tol[i].first;
    for (int p : {100, 130})
      EXPECT_NEAR((*res)[i].mean_curve[p], published[p], tol[i].second) << tol[i].first << " at " << p << "%";
  }
  EXPECT_GT((*res)[0].mean_curve[130], (*res)[1].mean_curve[130]) << "FGD beats best fit";
}

// On the model-constrained mix, 8-GPU pods (0.5% of pods) need an untouched 8-GPU node. The
// fragment measure rewarded opening fresh nodes (they strand and fragment nothing), so Tessera
// touched every 8-GPU node by half the demand, and the 8-GPU pods failed from then on: 78.4% at 80%
// arrived against first fit's 79.7% on the 1,200-node mix. With the cluster's node kinds, Tessera
// keeps their share of untouched nodes (Reserve) and places as much as first fit there, while
// staying ahead of it and of FGD at 130%.
TEST(SyntheticMixes, WholeNodeShapesFindTheUntouchedNodesTheyNeed) {
  const AllocWorkload w = synthetic_workload(1, 600, SyntheticMix::kModelConstrained);
  const std::vector<uint64_t> seeds{1, 2, 3, 4};
  auto res = run_alloc_matrix(w, {"tessera", "fgd", "first-fit"}, seeds, 1.3, 0);
  ASSERT_TRUE(res.ok()) << res.error().message;
  const double t = (*res)[0].mean_curve[80], f = (*res)[1].mean_curve[80], ff = (*res)[2].mean_curve[80];
  EXPECT_GE(t, std::max(f, ff) - 0.05) << "at 80%: tessera " << t << ", fgd " << f << ", first-fit " << ff;
  for (size_t s = 0; s < seeds.size(); ++s)
    EXPECT_GE((*res)[0].seed_curves[s][80], (*res)[2].seed_curves[s][80] - 0.1) << "seed " << seeds[s];
  const double t130 = (*res)[0].mean_curve[130], f130 = (*res)[1].mean_curve[130], ff130 = (*res)[2].mean_curve[130];
  EXPECT_GT(t130, std::max(f130, ff130) + 0.5) << "at 130%: tessera " << t130 << ", fgd " << f130 << ", first-fit " << ff130;
  std::printf("model-constrained at 80%%: tessera %.2f, fgd %.2f, first-fit %.2f; at 130%%: %.2f, %.2f, %.2f\n", t, f, ff,
              t130, f130, ff130);
}

}  // namespace
}  // namespace tessera::sim

namespace tessera::sim {
namespace {

TEST(SyntheticMixes, EachStressesItsDimension) {
  auto share_of = [](const AllocWorkload& w, auto pred) {
    int64_t k = 0;
    for (const OpenbPod& p : w.pods) k += pred(p.task) ? 1 : 0;
    return double(k) / double(w.pods.size());
  };
  const AllocWorkload base = synthetic_workload(2, 200), cpu = synthetic_workload(2, 200, SyntheticMix::kCpuHeavy),
                      mem = synthetic_workload(2, 200, SyntheticMix::kMemoryHeavy),
                      share = synthetic_workload(2, 200, SyntheticMix::kShareHeavy),
                      multi = synthetic_workload(2, 200, SyntheticMix::kMultiGpu),
                      model = synthetic_workload(2, 200, SyntheticMix::kModelConstrained);
  EXPECT_EQ(cpu.name, "synthetic-cpu-heavy");
  EXPECT_EQ(base.cluster.total_gpus(), cpu.cluster.total_gpus()) << "the same cluster";
  auto cpu_only = [](const TaskRequest& t) { return t.cpu_only(); };
  EXPECT_GT(share_of(cpu, cpu_only), 2 * share_of(base, cpu_only) - 0.03);
  auto gib_per_core = [](const AllocWorkload& w) {
    int64_t mem = 0, cpu = 0;
    for (const OpenbPod& p : w.pods) mem += p.task.memory.v, cpu += p.task.cpu.v;
    return double(mem) / double(cpu);
  };
  EXPECT_GT(gib_per_core(mem), 1.3 * gib_per_core(base));
  auto shares = [](const TaskRequest& t) { return t.gpu_share(); };
  EXPECT_GT(share_of(share, shares), 0.65);
  auto multi_gpu = [](const TaskRequest& t) { return t.gpu_count > 1; };
  EXPECT_GT(share_of(multi, multi_gpu), 0.25);
  EXPECT_LT(share_of(base, multi_gpu), 0.03);
  auto named = [](const TaskRequest& t) { return !t.gpu_models.empty(); };
  EXPECT_GT(share_of(model, named), 0.2);
  EXPECT_EQ(share_of(base, named), 0.0);
  for (const OpenbPod& p : model.pods)
    for (const std::string& m : p.task.gpu_models) EXPECT_TRUE(GpuCatalog::builtin().find(m).ok()) << m;
  auto bad = parse_synthetic_mix("gpu-heavy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("known: openb, cpu-heavy"), std::string::npos) << bad.error().message;
}

// Where CPU runs out before GPUs, Tessera's multi-resource fragmentation keeps CPU for the GPUs
// that need it: it allocates more than first fit and FGD, on the seed mean and on most seeds.
TEST(SyntheticMixes, OnACpuHeavyMixTesseraBeatsFirstFitAndFgd) {
  const AllocWorkload w = synthetic_workload(4, 400, SyntheticMix::kCpuHeavy);
  const std::vector<uint64_t> seeds{1, 2, 3, 4, 5, 6};
  auto res = run_alloc_matrix(w, {"tessera", "fgd", "first-fit"}, seeds, 1.3, 0);
  ASSERT_TRUE(res.ok()) << res.error().message;
  const double t = (*res)[0].mean_curve[130], f = (*res)[1].mean_curve[130], ff = (*res)[2].mean_curve[130];
  EXPECT_GT(t, f + 0.3) << "tessera " << t << ", fgd " << f;
  EXPECT_GT(t, ff + 0.3) << "tessera " << t << ", first-fit " << ff;
  int wins = 0;
  for (size_t s = 0; s < seeds.size(); ++s)
    wins += (*res)[0].seed_curves[s][130] > std::max((*res)[1].seed_curves[s][130], (*res)[2].seed_curves[s][130]);
  EXPECT_GE(wins, 5) << "seeds won of 6";
  std::printf("cpu-heavy at 130%%: tessera %.2f, fgd %.2f, first-fit %.2f; tessera best on %d of 6 seeds\n", t, f, ff, wins);
}

// 8-GPU pods with 120 cores fit only the few CPU-rich nodes. The multi-resource fragmentation
// alone sends CPU-hungry one-GPU pods there (nothing strands on such a node), and the 8-GPU pods
// failed long before the cluster was full (openb multigpu50: 78.2% at 80% arrived, against 80.0%
// for FGD). With the cluster's node kinds in the profile, Tessera leaves those nodes to them.
TEST(SyntheticMixes, AShapeThatFitsFewNodesKeepsThem) {
  AllocWorkload w{"restricted", ClusterState(GpuCatalog::builtin()), {}};
  for (int i = 0; i < 400; ++i) {
    NodeSpec spec;
    spec.name = "node-" + std::to_string(i);
    const bool rich = i % 8 == 3;  // 50 of 400
    spec.cpu = MilliCpu(rich ? 128000 : 96000);
    spec.memory = MiB(rich ? 786432 : 393216);
    spec.gpu_model = rich ? "G3" : "G2";
    spec.gpu_count = 8;
    ASSERT_TRUE(w.cluster.add_node(std::move(spec)).ok());
  }
  Rng rng(7);
  const int64_t one_gpu_cpu[] = {4000, 8000, 11300, 12000, 18708, 24000};
  for (int i = 0; i < 4000; ++i) {
    OpenbPod p;
    p.name = "pod-" + std::to_string(10000 + i);
    TaskRequest& t = p.task;
    const int64_t cls = int64_t(rng.uniform(100));
    if (cls < 3) t.gpu_count = 8, t.cpu = MilliCpu(120000);
    else if (cls < 15) t.gpu_count = 8, t.cpu = MilliCpu(64000);
    else t.gpu_count = 1, t.cpu = MilliCpu(one_gpu_cpu[rng.uniform(6)]);
    t.memory = MiB(t.cpu.v / 1000 * 4096);
    w.pods.push_back(std::move(p));
  }
  const std::vector<uint64_t> seeds{1, 2, 3, 4, 5, 6};
  auto res = run_alloc_matrix(w, {"tessera", "fgd", "first-fit"}, seeds, 1.3, 0);
  ASSERT_TRUE(res.ok()) << res.error().message;
  const double t = (*res)[0].mean_curve[80], f = (*res)[1].mean_curve[80], ff = (*res)[2].mean_curve[80];
  EXPECT_GE(t, std::max(f, ff) - 0.05) << "at 80%: tessera " << t << ", fgd " << f << ", first-fit " << ff;
  EXPECT_GT(t, 79.0) << "at 80% arrived, nearly everything fits";
  const double t130 = (*res)[0].mean_curve[130], f130 = (*res)[1].mean_curve[130];
  EXPECT_GE(t130, f130 - 0.05) << "at 130%: tessera " << t130 << ", fgd " << f130;
  std::printf("at 80%%: tessera %.2f, fgd %.2f, first-fit %.2f; at 130%%: tessera %.2f, fgd %.2f\n", t, f, ff, t130,
              f130);
}

}  // namespace
}  // namespace tessera::sim
