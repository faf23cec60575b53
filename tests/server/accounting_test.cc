// Chargeback accounting (server/accounting.h) on hand-built event logs: MIG, fractional and whole
// GPUs, clipping at the period's edges, preempted and lost attempts, utilisation weighting, the
// idle-share rules, rates in micro-units and rounding; a reconciliation on a simulated month; and a
// golden-file test of the CSV.
#include "server/accounting.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "core/cluster.h"

namespace tessera::server::accounting {
namespace {

using Json = nlohmann::json;

const std::string kData = TESSERA_SOURCE_DIR "/tests/server/data/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

config::ClusterConfig cluster(config::IdleShare rule = config::IdleShare::kProportional) {
  auto c = config::load_cluster_config(kData + "chargeback_cluster.yaml");
  EXPECT_TRUE(c.ok()) << c.error().message;
  c->chargeback.idle_share = rule;
  return *c;
}

const int64_t T0 = *parse_utc_time("2026-11-01", "from");  // a day: [T0, T1)
const int64_t T1 = T0 + 86400;

struct Log {
  std::vector<EventRow> events;
  std::map<int64_t, JobInfo> jobs;
  int64_t seq = 0;
  void add(int64_t job, int64_t t, const std::string& kind, Json detail = Json::object()) {
    events.push_back(EventRow{++seq, job, t, kind, "test", detail.dump()});
  }
  // A task placement as the controller's "started" event writes it.
  static Json task(const std::string& node, std::vector<int> gpus, int64_t gpu_milli, Json mig = nullptr) {
    return Json{{"task", 0}, {"node", node}, {"gpus", gpus}, {"gpu_milli", gpu_milli}, {"mig", mig},
                {"cpu_milli", 1000}, {"memory_mib", 1024}};
  }
  void start(int64_t job, int64_t t, Json placement) { add(job, t, "started", Json{{"attempt", 1}, {"placement", placement}}); }
  void end(int64_t job, int64_t t, const std::string& kind, std::optional<double> util = std::nullopt) {
    Json d{{"reason", "test"}};
    if (util) d["gpu_util_pct"] = *util;
    add(job, t, kind, d);
    if (kind == "preempted" || kind == "lost") add(job, t, "requeued");
  }
};

int64_t sum_row(const Report& r, const std::vector<std::string>& key, int64_t Amounts::*field) {
  for (const Row& row : r.rows)
    if (row.key == key) return row.amounts.*field;
  ADD_FAILURE() << "no row " << ::testing::PrintToString(key);
  return -1;
}

TEST(Accounting, WholeFractionalAndMigShares) {
  Log log;
  log.jobs = {{1, {"vision", "alice", "p1"}}, {2, {"nlp", "bob", "p2"}}, {3, {"prod", "carol", ""}}};
  log.add(0, T0, "audit");  // the log begins at T0
  log.start(1, T0 + 100, Json::array({Log::task("h-0", {0, 1}, 1000)}));
  log.start(2, T0 + 100, Json::array({Log::task("h-1", {7}, 428, Json{{"gpu", 7}, {"profile", "3g.40gb"}, {"start", 0}})}));
  log.start(3, T0 + 100, Json::array({Log::task("a", {0}, 500)}));
  log.end(1, T0 + 100 + 3600, "succeeded");
  log.end(2, T0 + 100 + 7000, "succeeded");
  log.end(3, T0 + 100 + 3600, "cancelled");
  auto l = compute_ledger(log.events, log.jobs, cluster(config::IdleShare::kNone), {T0, T1, 0});
  ASSERT_TRUE(l.ok()) << l.error().message;
  const Report r = aggregate(*l, {Dim::kUser, Dim::kModel});
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(sum_row(r, {"alice", "H100-80GB-SXM"}, &Amounts::allocated), 2 * 1000 * 3600);  // 2 GPU-hours
  // 3g on a 7-slice GPU: mig_milli = 3000/7 (428 milli), from the profile, not from gpu_milli.
  const GpuModel& h100 = **GpuCatalog::builtin().find("H100-80GB-SXM");
  ASSERT_EQ(mig_milli(h100, h100.find_profile("3g.40gb")->id), 428);
  EXPECT_EQ(sum_row(r, {"bob", "H100-80GB-SXM"}, &Amounts::allocated), 428 * 7000);
  EXPECT_EQ(sum_row(r, {"carol", "A100-80GB"}, &Amounts::allocated), 500 * 3600);  // half a GPU for an hour
  EXPECT_EQ(format_gpu_hours(500 * 3600), "0.500000");
  // Teams are the queues' top-level ancestors.
  const Report teams = aggregate(*l, {Dim::kTeam});
  ASSERT_EQ(teams.rows.size(), 2u);
  EXPECT_EQ(teams.rows[0].key, std::vector<std::string>{"prod"});
  EXPECT_EQ(teams.rows[1].key, std::vector<std::string>{"research"});
  EXPECT_EQ(teams.rows[1].amounts.allocated, 2 * 1000 * 3600 + 428 * 7000);
  // Costs: allocated × rate, micro-units, half-even per cell. 2 H100-hours at 2.49 = 4.98.
  EXPECT_EQ(sum_row(r, {"alice", "H100-80GB-SXM"}, &Amounts::allocated_cost), 4980000);
  // 428 × 7000 ms = 0.832222.. GPU-h × 2.49 = 2.072233.33.. -> 2072233.
  EXPECT_EQ(sum_row(r, {"bob", "H100-80GB-SXM"}, &Amounts::allocated_cost), 2072233);
  EXPECT_EQ(sum_row(r, {"carol", "A100-80GB"}, &Amounts::allocated_cost), 800000);
  EXPECT_EQ(r.totals.allocated_cost, 4980000 + 2072233 + 800000);
  EXPECT_EQ(r.totals.idle_share, 0) << "idle_share: none shares nothing";
}

TEST(Accounting, SpotHoursAreChargedAtTheSpotPrice) {
  auto c = config::parse_cluster_config_yaml(R"(
levels: [leaf]
pools:
  - {name: spot-a, kind: spot, price: "0.95", notice: 120}
  - {name: od, kind: on-demand}
nodes:
  - {name: h, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 256000, memory: 2097152, path: [leaf-0]}
  - {name: s, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 256000, memory: 2097152, path: [leaf-0], pool: spot-a}
  - {name: d, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 256000, memory: 2097152, path: [leaf-0], pool: od}
queues:
  - {name: research}
chargeback:
  rates: {H100-80GB-SXM: "2.49"}
  idle_share: none
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  Log log;
  log.jobs = {{1, {"research", "alice", "p"}}, {2, {"research", "bob", "p"}}, {3, {"research", "carol", "p"}}};
  log.add(0, T0, "audit");
  log.start(1, T0, Json::array({Log::task("s", {0, 1}, 1000)}));
  log.start(2, T0, Json::array({Log::task("h", {0}, 1000)}));
  log.start(3, T0, Json::array({Log::task("d", {0}, 1000)}));
  for (int j = 1; j <= 3; ++j) log.end(j, T0 + 3600, "succeeded");
  auto l = compute_ledger(log.events, log.jobs, *c, {T0, T1, 0});
  ASSERT_TRUE(l.ok()) << l.error().message;
  const Report r = aggregate(*l, {Dim::kUser, Dim::kPool});
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(sum_row(r, {"alice", "spot-a"}, &Amounts::allocated_cost), 1900000);  // 2 GPU-h at the spot 0.95
  EXPECT_EQ(sum_row(r, {"bob", "default"}, &Amounts::allocated_cost), 2490000);   // the model rate
  EXPECT_EQ(sum_row(r, {"carol", "od"}, &Amounts::allocated_cost), 2490000);      // unpriced pool: model rate
  const std::string csv = chargeback_csv(*l, r);
  EXPECT_NE(csv.find(",alice,,spot-a,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",0.950000,1.900000,"), std::string::npos) << csv;  // ListUnitPrice is the pool's
  const Json j = chargeback_json(*l, r);
  EXPECT_EQ(j["pool_rates"]["spot-a"], "0.950000");
}

// Spot interruptions (docs/chargeback.md): an attempt ended preempted or lost after a spot_interrupted
// event for its job counts in `interrupted` (and in preempted/lost as before), costed at the hours' own
// price; the notice counts once, in the reclaimed node's pool. Ordinary preemptions and notices the job
// outlived are not interruptions.
TEST(Accounting, SpotInterruptionsPerTeam) {
  auto c = config::parse_cluster_config_yaml(R"(
levels: [leaf]
pools:
  - {name: spot-a, kind: spot, price: "0.95", notice: 120}
nodes:
  - {name: h, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 256000, memory: 2097152, path: [leaf-0]}
  - {name: s, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 256000, memory: 2097152, path: [leaf-0], pool: spot-a}
  - {name: s2, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 256000, memory: 2097152, path: [leaf-0], pool: spot-a}
queues:
  - {name: research}
  - {name: vision, parent: research}
  - {name: nlp, parent: research}
  - {name: prod}
chargeback:
  rates: {H100-80GB-SXM: "2.49"}
  idle_share: none
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  Log log;
  log.jobs = {{1, {"vision", "alice", "p"}}, {2, {"prod", "bob", "p"}}, {3, {"prod", "carol", "p"}},
              {4, {"prod", "dave", "p"}}, {5, {"nlp", "erin", "p"}}};
  auto notice = [&](int64_t job, int64_t t, const std::string& node, const std::string& path) {
    log.add(job, t, "spot_interrupted", Json{{"node", node}, {"path", path}, {"reason", "test"}, {"interruptions", 1}});
  };
  log.add(0, T0, "audit");
  // 1 (research): 2 spot GPUs for an hour, the notice requeues it at once; then an hour on h, succeeded.
  log.start(1, T0, Json::array({Log::task("s", {0, 1}, 1000)}));
  notice(1, T0 + 3600, "s", "requeue");
  log.add(1, T0 + 3600, "preempted", Json{{"reason", "spot interruption"}, {"spot_interruption", true}});
  log.add(1, T0 + 3600, "requeued");
  log.start(1, T0 + 4000, Json::array({Log::task("h", {0}, 1000)}));
  log.end(1, T0 + 7600, "succeeded");
  // 2 (prod): asked to checkpoint by the notice, stopped (preempted) 60 s later: 1860 s of one spot GPU.
  log.start(2, T0, Json::array({Log::task("s2", {0}, 1000)}));
  notice(2, T0 + 1800, "s2", "checkpoint");
  log.add(2, T0 + 1800, "checkpoint_requested", Json{{"reason", "spot interruption"}, {"evict_by", T0 + 1920}});
  log.end(2, T0 + 1860, "preempted");
  // 3 (prod): an ordinary preemption, not an interruption.
  log.start(3, T0, Json::array({Log::task("h", {1}, 1000)}));
  log.end(3, T0 + 3600, "preempted");
  // 4 (prod): noticed, but it finished before the reclaim: nothing lost.
  log.start(4, T0, Json::array({Log::task("s2", {1}, 1000)}));
  notice(4, T0 + 500, "s2", "checkpoint");
  log.end(4, T0 + 600, "succeeded");
  // 5 (research): a gang on h and s, lost when s was reclaimed: both halves were interrupted work.
  log.start(5, T0 + 1000, Json::array({Log::task("h", {2}, 1000), Log::task("s", {2}, 1000)}));
  notice(5, T0 + 2800, "s", "checkpoint");
  log.end(5, T0 + 2800, "lost");

  auto l = compute_ledger(log.events, log.jobs, *c, {T0, T1, 0});
  ASSERT_TRUE(l.ok()) << l.error().message;
  const Report r = aggregate(*l, {Dim::kUser, Dim::kPool});
  // alice: interrupted and preempted alike; at the spot price 0.95: 2 GPU-h = 1.90.
  EXPECT_EQ(sum_row(r, {"alice", "spot-a"}, &Amounts::interrupted), 2000 * 3600);
  EXPECT_EQ(sum_row(r, {"alice", "spot-a"}, &Amounts::preempted), 2000 * 3600);
  EXPECT_EQ(sum_row(r, {"alice", "spot-a"}, &Amounts::interrupted_cost), 1900000);
  EXPECT_EQ(sum_row(r, {"alice", "spot-a"}, &Amounts::interruptions), 1);
  EXPECT_EQ(sum_row(r, {"alice", "default"}, &Amounts::interrupted), 0) << "the later attempt succeeded";
  // bob: the checkpoint path; 1860 s × 0.95 / 3600 = 0.490833.33 -> 490833.
  EXPECT_EQ(sum_row(r, {"bob", "spot-a"}, &Amounts::interrupted), 1000 * 1860);
  EXPECT_EQ(sum_row(r, {"bob", "spot-a"}, &Amounts::interrupted_cost), 490833);
  // carol: preempted only.
  EXPECT_EQ(sum_row(r, {"carol", "default"}, &Amounts::preempted), 1000 * 3600);
  EXPECT_EQ(sum_row(r, {"carol", "default"}, &Amounts::interrupted), 0);
  EXPECT_EQ(sum_row(r, {"carol", "default"}, &Amounts::interruptions), 0);
  // dave outlived the notice.
  EXPECT_EQ(sum_row(r, {"dave", "spot-a"}, &Amounts::interrupted), 0);
  EXPECT_EQ(sum_row(r, {"dave", "spot-a"}, &Amounts::interruptions), 0);
  // erin: each half at its own price (h: the model rate 2.49, s: 0.95); the notice counts in spot-a.
  EXPECT_EQ(sum_row(r, {"erin", "default"}, &Amounts::interrupted), 1000 * 1800);
  EXPECT_EQ(sum_row(r, {"erin", "default"}, &Amounts::lost), 1000 * 1800);
  EXPECT_EQ(sum_row(r, {"erin", "default"}, &Amounts::interrupted_cost), 1245000);
  EXPECT_EQ(sum_row(r, {"erin", "default"}, &Amounts::interruptions), 0);
  EXPECT_EQ(sum_row(r, {"erin", "spot-a"}, &Amounts::interrupted_cost), 475000);
  EXPECT_EQ(sum_row(r, {"erin", "spot-a"}, &Amounts::interruptions), 1);

  // Two teams kept apart.
  const Report teams = aggregate(*l, {Dim::kTeam});
  ASSERT_EQ(teams.rows.size(), 2u);
  const Amounts& prod = teams.rows[0].amounts;
  const Amounts& research = teams.rows[1].amounts;
  EXPECT_EQ(teams.rows[0].key, std::vector<std::string>{"prod"});
  EXPECT_EQ(prod.interrupted, 1000 * 1860);
  EXPECT_EQ(prod.preempted, 1000 * 1860 + 1000 * 3600);
  EXPECT_EQ(prod.interruptions, 1);
  EXPECT_EQ(prod.interrupted_cost, 490833);
  EXPECT_EQ(research.interrupted, 2000 * 3600 + 2 * 1000 * 1800);
  EXPECT_EQ(research.interrupted, research.preempted + research.lost) << "all research's preemptions were spot's";
  EXPECT_EQ(research.interruptions, 2);
  EXPECT_EQ(research.interrupted_cost, 1900000 + 1245000 + 475000);

  // The outputs: CSV/JSON rows, totals, cluster and the usage report per (model, pool).
  const Json j = chargeback_json(*l, teams);
  EXPECT_EQ(j["rows"][0]["x_InterruptedGpuHours"], "0.516667");
  EXPECT_EQ(j["rows"][0]["x_InterruptedCost"], "0.490833");
  EXPECT_EQ(j["rows"][0]["x_Interruptions"], "1");
  EXPECT_EQ(j["rows"][1]["x_InterruptedGpuHours"], "3.000000");
  EXPECT_EQ(j["rows"][1]["x_Interruptions"], "2");
  EXPECT_EQ(j["totals"]["interrupted_milli_gpu_seconds"], 1000 * 1860 + 2000 * 3600 + 2 * 1000 * 1800);
  EXPECT_EQ(j["totals"]["interrupted_cost"], "4.110833");
  EXPECT_EQ(j["totals"]["interrupted_cost_micro"], 4110833);
  EXPECT_EQ(j["totals"]["interruptions"], 3);
  EXPECT_EQ(j["cluster"]["interruptions"], 3);
  const std::string csv = chargeback_csv(*l, teams);
  EXPECT_NE(csv.find(",x_InterruptedGpuHours,x_InterruptedCost,x_Interruptions\r\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",none,3.000000,3.620000,2\r\n"), std::string::npos) << csv;
  const Json u = usage_json(*l);
  ASSERT_EQ(u["rows"].size(), 2u);
  EXPECT_EQ(u["rows"][1]["pool"], "spot-a");
  EXPECT_EQ(u["rows"][1]["interruptions"], "3");
  EXPECT_EQ(u["rows"][1]["interrupted_gpu_hours"], "3.016667");  // 2 + 0.516667 + 0.5 spot GPU-h
  EXPECT_EQ(u["rows"][0]["interrupted_gpu_hours"], "0.500000");   // erin's half on h
  EXPECT_EQ(u["totals"]["interruptions"], "3");

  // Read at T0 + 1830 (the log as it was then): bob is noticed but still checkpointing, so not counted yet.
  std::vector<EventRow> then;
  for (const EventRow& ev : log.events)
    if (ev.time <= T0 + 1830) then.push_back(ev);
  auto early = compute_ledger(then, log.jobs, *c, {T0, T1, T0 + 1830});
  ASSERT_TRUE(early.ok());
  const Report e = aggregate(*early, {Dim::kUser});
  EXPECT_EQ(sum_row(e, {"bob"}, &Amounts::allocated), 1000 * 1830);
  EXPECT_EQ(sum_row(e, {"bob"}, &Amounts::interrupted), 0);
  EXPECT_EQ(sum_row(e, {"bob"}, &Amounts::interruptions), 0);
  // A period that ends before a notice: the hours before it count, the notice in the period it came.
  auto before = compute_ledger(log.events, log.jobs, *c, {T0, T0 + 1830, 0});
  ASSERT_TRUE(before.ok());
  const Report b = aggregate(*before, {Dim::kUser});
  EXPECT_EQ(sum_row(b, {"alice"}, &Amounts::interrupted), 2000 * 1830);
  EXPECT_EQ(sum_row(b, {"alice"}, &Amounts::interruptions), 0);
  EXPECT_EQ(sum_row(b, {"bob"}, &Amounts::interruptions), 1);
}

TEST(Accounting, AttemptsAreClippedToThePeriodAndToNow) {
  Log log;
  log.jobs = {{1, {"vision", "alice", ""}}, {2, {"nlp", "bob", ""}}, {3, {"prod", "carol", ""}}};
  log.start(1, T0 - 1800, Json::array({Log::task("h-0", {0}, 1000)}));  // began before the period
  log.end(1, T0 + 1800, "succeeded");
  log.start(2, T1 - 600, Json::array({Log::task("h-0", {1}, 1000)}));   // still running after it
  log.end(2, T1 + 5000, "succeeded");
  log.start(3, T0 + 1000, Json::array({Log::task("a", {0, 1}, 1000)}));  // running, no end event
  auto l = compute_ledger(log.events, log.jobs, cluster(config::IdleShare::kNone), {T0, T1, 0});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->start, T0);
  EXPECT_EQ(l->end, T1);
  const Report r = aggregate(*l, {Dim::kUser});
  EXPECT_EQ(sum_row(r, {"alice"}, &Amounts::allocated), 1000 * 1800);
  EXPECT_EQ(sum_row(r, {"bob"}, &Amounts::allocated), 1000 * 600);
  EXPECT_EQ(sum_row(r, {"carol"}, &Amounts::allocated), 2000 * (86400 - 1000));
  // With now inside the period, the period ends at now and running attempts run until now.
  auto n = compute_ledger(log.events, log.jobs, cluster(config::IdleShare::kNone), {T0, T1, T0 + 4000});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->end, T0 + 4000);
  const Report rn = aggregate(*n, {Dim::kUser});
  EXPECT_EQ(sum_row(rn, {"carol"}, &Amounts::allocated), 2000 * 3000);
  ASSERT_EQ(rn.rows.size(), 2u) << "bob's attempt began after now";
  // The effective period starts no earlier than the log: nothing before the cluster existed.
  auto early = compute_ledger(log.events, log.jobs, cluster(), {T0 - 86400, T1, 0});
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(early->start, T0 - 1800);
  EXPECT_EQ(early->usage[0].capacity + early->usage[1].capacity, 20 * 1000 * (T1 - (T0 - 1800)));
  EXPECT_FALSE(compute_ledger(log.events, log.jobs, cluster(), {T1, T0, 0}).ok());
}

TEST(Accounting, PreemptedLostAndUtilisation) {
  Log log;
  log.jobs = {{1, {"vision", "alice", "p"}}};
  log.add(0, T0, "audit");
  const Json one = Json::array({Log::task("h-0", {0}, 1000)});
  log.start(1, T0, one);
  log.end(1, T0 + 3600, "preempted", 50.0);  // 1 GPU-h, half used
  log.start(1, T0 + 4000, one);
  log.end(1, T0 + 4000 + 7200, "lost");  // 2 GPU-h, not measured
  log.start(1, T0 + 20000, one);
  log.end(1, T0 + 20000 + 3600, "succeeded", 100.0 / 3.0);  // 33.33% -> 3333 basis points
  // An attempt the controller requeued at restart (no end event but "requeued") ends there.
  log.jobs[2] = {"prod", "alice", "q"};
  log.start(2, T0 + 30000, one);
  log.add(2, T0 + 30100, "requeued", Json{{"reason", "its placement no longer fits the configured cluster after restart"}});
  auto l = compute_ledger(log.events, log.jobs, cluster(config::IdleShare::kNone), {T0, T1, 0});
  ASSERT_TRUE(l.ok());
  const Report r = aggregate(*l, {Dim::kProject});
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].key, std::vector<std::string>{"q"});
  EXPECT_EQ(r.rows[1].amounts.allocated, 1000 * 100);
  const Amounts& a = r.rows[0].amounts;
  EXPECT_EQ(a.allocated, 1000 * (3600 + 7200 + 3600));
  EXPECT_EQ(a.preempted, 1000 * 3600);
  EXPECT_EQ(a.lost, 1000 * 7200);
  EXPECT_EQ(a.measured, 1000 * (3600 + 3600)) << "the lost attempt reported no utilisation";
  EXPECT_EQ(a.used, 1800000 + 1199880);  // 3600000 × 0.5 + 3600000 × 0.3333
  // The CSV row: idle-allocated = measured - used; unmeasured = allocated - measured.
  const std::string csv = chargeback_csv(*l, r);
  EXPECT_NE(csv.find(",4.000000,GPU-Hour,4.000000,GPU-Hour,,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",4.000000,0.833300,1.166700,2.000000,1.000000,2.000000,0.000000,"), std::string::npos) << csv;
}

// Day on the A100 node (4 GPUs): alice (research/vision) 1 GPU all day, bob (research/nlp) 1 GPU 12 h,
// carol (prod) 1 GPU 6 h. Unallocated A100 time: 4 × 24 - 24 - 12 - 6 = 54 GPU-hours.
Log a100_day() {
  Log log;
  log.jobs = {{1, {"vision", "alice", ""}}, {2, {"nlp", "bob", ""}}, {3, {"prod", "carol", ""}}};
  log.add(0, T0, "audit");
  log.start(1, T0, Json::array({Log::task("a", {0}, 1000)}));
  log.start(2, T0, Json::array({Log::task("a", {1}, 1000)}));
  log.start(3, T0, Json::array({Log::task("a", {2}, 1000)}));
  log.end(2, T0 + 43200, "succeeded");
  log.end(3, T0 + 21600, "succeeded");
  log.end(1, T1, "succeeded");
  return log;
}

TEST(Accounting, IdleShareProportional) {
  Log log = a100_day();
  auto l = compute_ledger(log.events, log.jobs, cluster(config::IdleShare::kProportional), {T0, T1, 0});
  ASSERT_TRUE(l.ok());
  const Report r = aggregate(*l, {Dim::kUser, Dim::kModel});
  // 194,400,000 ms shared 86.4 : 43.2 : 21.6; the largest remainder (carol's .571) gets the last unit.
  EXPECT_EQ(sum_row(r, {"alice", "A100-80GB"}, &Amounts::idle_share), 111085714);
  EXPECT_EQ(sum_row(r, {"bob", "A100-80GB"}, &Amounts::idle_share), 55542857);
  EXPECT_EQ(sum_row(r, {"carol", "A100-80GB"}, &Amounts::idle_share), 27771429);
  // Nobody used the H100s: their idle time is its own row, so that totals still reconcile.
  EXPECT_EQ(sum_row(r, {"(unallocated)", "H100-80GB-SXM"}, &Amounts::idle_share), 16LL * 1000 * 86400);
  // Cost includes the share: alice (24 + 30.857142..) GPU-h × 1.60.
  EXPECT_EQ(sum_row(r, {"alice", "A100-80GB"}, &Amounts::allocated_cost), 38400000);
  EXPECT_EQ(sum_row(r, {"alice", "A100-80GB"}, &Amounts::idle_share_cost), 49371428);  // 111085714 × 1.6 / 3600
}

TEST(Accounting, IdleShareEvenIsPerTeam) {
  Log log = a100_day();
  auto l = compute_ledger(log.events, log.jobs, cluster(config::IdleShare::kEven), {T0, T1, 0});
  ASSERT_TRUE(l.ok());
  const Report r = aggregate(*l, {Dim::kTeam, Dim::kUser, Dim::kModel});
  // Two teams use the A100s: 97.2M each; inside research in proportion to allocation (2:1).
  EXPECT_EQ(sum_row(r, {"prod", "carol", "A100-80GB"}, &Amounts::idle_share), 97200000);
  EXPECT_EQ(sum_row(r, {"research", "alice", "A100-80GB"}, &Amounts::idle_share), 64800000);
  EXPECT_EQ(sum_row(r, {"research", "bob", "A100-80GB"}, &Amounts::idle_share), 32400000);
}

TEST(Accounting, DownAndReservedTime) {
  Log log = a100_day();
  // The A100 node is NotReady for an hour; h-0 is cordoned for half a day, then drained and resumed.
  log.add(0, T0 + 3600, "node_not_ready", Json{{"node", "a"}});
  log.add(0, T0 + 7200, "node_ready", Json{{"node", "a"}});
  log.add(0, T0 + 1000, "node_cordon", Json{{"node", "h-0"}});
  log.add(0, T0 + 30000, "node_drain", Json{{"node", "h-0"}});
  log.add(0, T0 + 43200, "node_resume", Json{{"node", "h-0"}});
  std::stable_sort(log.events.begin(), log.events.end(), [](const EventRow& a, const EventRow& b) { return a.time < b.time; });
  auto l = compute_ledger(log.events, log.jobs, cluster(config::IdleShare::kProportional), {T0, T1, 0});
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->usage.size(), 2u);
  const ModelUsage& a100 = l->usage[0];
  const ModelUsage& h100 = l->usage[1];
  ASSERT_EQ(a100.model, "A100-80GB");
  ASSERT_EQ(h100.model, "H100-80GB-SXM");
  EXPECT_EQ(a100.gpus, 4);
  EXPECT_EQ(h100.gpus, 16);
  // While down, the node's unallocated GPU (one, of 4: three jobs ran then) counts as down.
  EXPECT_EQ(a100.down, 1000 * 3600);
  EXPECT_EQ(a100.allocated, 1000 * (86400 + 43200 + 21600));
  EXPECT_EQ(a100.capacity, a100.allocated + a100.idle + a100.reserved + a100.down);
  EXPECT_EQ(h100.reserved, 8LL * 1000 * (43200 - 1000));
  EXPECT_EQ(h100.down, 0);
  // Reconciliation: the idle-share pool is idle + reserved; down is nobody's.
  int64_t charged = 0;
  for (const auto& [c, a] : l->cells) charged += a.allocated + a.idle_share;
  EXPECT_EQ(charged, a100.capacity + h100.capacity - a100.down - h100.down);
  // The usage report in CSV.
  const std::string csv = usage_csv(*l);
  EXPECT_NE(csv.find("A100-80GB,default,4,96.000000,42.000000,53.000000,0.000000,1.000000,43.75,55.21,0.00,1.04,0.000000,0.000000,0\r\n"),
            std::string::npos) << csv;
  // A node that first shows up with node_ready was NotReady before it.
  Log late = a100_day();
  late.add(0, T0 + 600, "node_ready", Json{{"node", "h-1"}});
  std::stable_sort(late.events.begin(), late.events.end(), [](const EventRow& a, const EventRow& b) { return a.time < b.time; });
  auto ll = compute_ledger(late.events, late.jobs, cluster(), {T0, T1, 0});
  ASSERT_TRUE(ll.ok());
  EXPECT_EQ(ll->usage[1].down, 8LL * 1000 * 600);
}

TEST(Accounting, RoundingAndFormatting) {
  EXPECT_EQ(div_round_half_even(5, 2), 2);
  EXPECT_EQ(div_round_half_even(7, 2), 4);
  EXPECT_EQ(div_round_half_even(-5, 2), -2);
  EXPECT_EQ(div_round_half_even(25, 10), 2);
  EXPECT_EQ(div_round_half_even(35, 10), 4);
  EXPECT_EQ(div_round_half_even(36, 10), 4);
  EXPECT_EQ(format_gpu_hours(3600000), "1.000000");
  EXPECT_EQ(format_gpu_hours(9), "0.000002");   // 2.5 micro-GPU-hours -> 2 (half to even)
  EXPECT_EQ(format_gpu_hours(27), "0.000008");  // 7.5 -> 8
  EXPECT_EQ(format_gpu_hours(0), "0.000000");
  EXPECT_EQ(format_micro(2490000), "2.490000");
  EXPECT_EQ(format_micro(-1), "-0.000001");
  EXPECT_EQ(format_utc(T0), "2026-11-01T00:00:00Z");
  EXPECT_EQ(format_utc(*parse_utc_time("2024-02-29T23:59:59Z", "to")), "2024-02-29T23:59:59Z");
  EXPECT_EQ(month_start_utc(T0 + 17 * 86400 + 5), T0);
  EXPECT_EQ(parse_utc_time("2026-02-29", "from").error().message.rfind("from: \"2026-02-29\"", 0), 0u);
  EXPECT_FALSE(parse_utc_time("2026-11-1", "from").ok());
  EXPECT_FALSE(parse_utc_time("yesterday", "to").ok());
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  auto dims = parse_dims("team,user,model");
  ASSERT_TRUE(dims.ok());
  EXPECT_EQ(dims->size(), 3u);
  EXPECT_EQ(parse_dims("team,colour").error().message.rfind("by: unknown dimension \"colour\"", 0), 0u);
  EXPECT_FALSE(parse_dims("team,team").ok());
  EXPECT_FALSE(parse_dims("").ok());
}

// ---- a simulated month ----

struct SimGpu {
  int64_t free = 1000;
  bool mig = false;
};

// A month of random (seeded) attempts on the chargeback cluster, with node outages, cordons and
// drains, attempts that cross both edges of the month, and some still running at the end.
Log simulate_month(uint64_t seed, int64_t from, int64_t to, int64_t* expected_allocated) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
  const config::ClusterConfig cfg = cluster();
  std::vector<std::vector<SimGpu>> gpus;
  std::vector<std::string> names;
  for (const NodeSpec& n : cfg.nodes) {
    names.push_back(n.name);
    std::vector<SimGpu> g(size_t(n.gpu_count));
    for (int m : n.mig_gpus) g[size_t(m)].mig = true;
    gpus.push_back(g);
  }
  const std::vector<std::string> queues = {"vision", "nlp", "prod"};
  const std::vector<std::string> users = {"alice", "bob", "carol", "dan"};
  const std::vector<std::string> kinds = {"succeeded", "failed", "cancelled", "timed_out", "preempted", "lost"};
  struct Running {
    int64_t job, start;
    size_t node;
    std::vector<std::pair<int, int64_t>> held;  // gpu, milli
  };
  std::vector<Running> running;
  Log log;
  int64_t next_job = 1;
  *expected_allocated = 0;
  auto account = [&](const Running& r, int64_t end) {
    const int64_t s = std::max(r.start, from), e = std::min(end, to);
    int64_t milli = 0;
    for (const auto& [g, m] : r.held) milli += m;
    if (e > s) *expected_allocated += milli * (e - s);
  };
  for (int64_t t = from - 3 * 86400; t < to + 86400; t += 1 + pick(1800)) {
    const int64_t roll = pick(100);
    if (roll < 40 && !running.empty()) {  // an attempt ends
      const size_t i = size_t(pick(int64_t(running.size())));
      Running r = running[i];
      running.erase(running.begin() + int64_t(i));
      for (const auto& [g, m] : r.held) gpus[r.node][size_t(g)].free += m;
      const std::string kind = kinds[size_t(pick(int64_t(kinds.size())))];
      std::optional<double> util;
      if (pick(3) > 0) util = double(pick(10001)) / 100.0;
      log.end(r.job, t, kind, util);
      account(r, t);
    } else if (roll < 90) {  // an attempt starts where it fits
      const size_t node = size_t(pick(int64_t(names.size())));
      std::vector<SimGpu>& g = gpus[node];
      Running r{next_job, t, node, {}};
      Json placement;
      const int64_t shape = pick(3);
      if (shape == 0) {  // whole GPUs
        const int want = 1 + int(pick(4));
        std::vector<int> idx;
        for (size_t k = 0; k < g.size() && int(idx.size()) < want; ++k)
          if (!g[k].mig && g[k].free == 1000) idx.push_back(int(k));
        if (int(idx.size()) < want) continue;
        for (int k : idx) g[size_t(k)].free = 0, r.held.push_back({k, 1000});
        placement = Json::array({Log::task(names[node], idx, 1000)});
      } else if (shape == 1) {  // a fractional share
        const int64_t milli = 100 * (1 + pick(9));
        int k = -1;
        for (size_t x = 0; x < g.size() && k < 0; ++x)
          if (!g[x].mig && g[x].free >= milli) k = int(x);
        if (k < 0) continue;
        g[size_t(k)].free -= milli;
        r.held.push_back({k, milli});
        placement = Json::array({Log::task(names[node], {k}, milli)});
      } else {  // a MIG instance
        int k = -1;
        for (size_t x = 0; x < g.size() && k < 0; ++x)
          if (g[x].mig) k = int(x);
        const std::string model = cfg.nodes[node].gpu_model;
        const GpuModel& gm = **GpuCatalog::builtin().find(model);
        if (k < 0 || !gm.mig_capable()) continue;
        const std::string prof = pick(2) ? "1g" : "3g";
        const int64_t milli = mig_milli(gm, gm.find_profile(prof)->id);
        if (g[size_t(k)].free < milli) continue;
        g[size_t(k)].free -= milli;
        r.held.push_back({k, milli});
        placement = Json::array({Log::task(names[node], {k}, milli, Json{{"gpu", k}, {"profile", prof}, {"start", 0}})});
      }
      log.jobs[next_job] = JobInfo{queues[size_t(pick(3))], users[size_t(pick(4))], "proj-" + std::to_string(pick(3))};
      log.start(next_job, t, placement);
      running.push_back(r);
      ++next_job;
    } else {  // node events
      static const std::vector<std::string> node_kinds = {"node_not_ready", "node_ready", "node_cordon",
                                                          "node_drain", "node_drained", "node_resume"};
      log.add(0, t, node_kinds[size_t(pick(6))], Json{{"node", names[size_t(pick(int64_t(names.size())))]}});
    }
  }
  for (const Running& r : running) account(r, to);  // still running: counted until the end
  return log;
}

TEST(Accounting, ReconcilesOnASimulatedMonth) {
  const int64_t from = *parse_utc_time("2026-11-01", "from"), to = *parse_utc_time("2026-12-01", "to");
  for (uint64_t seed : {1u, 2u, 3u}) {
    int64_t expected_allocated = 0;
    Log log = simulate_month(seed, from, to, &expected_allocated);
    ASSERT_GT(log.jobs.size(), 500u);
    for (config::IdleShare rule : {config::IdleShare::kProportional, config::IdleShare::kEven, config::IdleShare::kNone}) {
      auto l = compute_ledger(log.events, log.jobs, cluster(rule), {from, to, 0});
      ASSERT_TRUE(l.ok()) << l.error().message;
      ASSERT_EQ(l->start, from);
      ASSERT_EQ(l->end, to);
      int64_t capacity = 0, down = 0, allocated = 0, idle = 0, reserved = 0;
      for (const ModelUsage& u : l->usage) {
        EXPECT_EQ(u.capacity, u.allocated + u.idle + u.reserved + u.down) << u.model;
        capacity += u.capacity, down += u.down, allocated += u.allocated, idle += u.idle, reserved += u.reserved;
      }
      // 20 GPUs for 30 days, independently of the ledger.
      EXPECT_EQ(capacity, 20LL * 1000 * 30 * 86400);
      EXPECT_EQ(allocated, expected_allocated);
      EXPECT_GT(down, 0);
      EXPECT_GT(reserved, 0);
      for (const std::vector<Dim>& by : {std::vector<Dim>{Dim::kTeam}, std::vector<Dim>{Dim::kProject, Dim::kUser},
                                         std::vector<Dim>{Dim::kTeam, Dim::kModel, Dim::kPool}}) {
        const Report r = aggregate(*l, by);
        int64_t charged = 0, alloc = 0, cost = 0;
        for (const Row& row : r.rows) {
          charged += row.amounts.allocated + row.amounts.idle_share;
          alloc += row.amounts.allocated;
          cost += row.amounts.cost();
        }
        EXPECT_EQ(alloc, expected_allocated);
        EXPECT_EQ(cost, r.totals.cost());
        if (rule == config::IdleShare::kNone)
          EXPECT_EQ(charged, capacity - down - idle - reserved) << "seed " << seed;
        else
          EXPECT_EQ(charged, capacity - down) << "seed " << seed << " rule " << config::idle_share_name(rule);
      }
      // Per GPU model too: each model's idle pool goes to that model's users.
      for (const ModelUsage& u : l->usage) {
        int64_t charged = 0;
        for (const auto& [c, a] : l->cells)
          if (c.model == u.model) charged += a.allocated + a.idle_share;
        EXPECT_EQ(charged, rule == config::IdleShare::kNone ? u.allocated : u.capacity - u.down) << u.model;
      }
    }
  }
}

// ---- golden file ----

// tests/server/data/chargeback_events.json (a fixed log: jobs, events, the period) -> the CSV in
// chargeback_expected.csv, byte for byte. After an intended change of the output, regenerate with
//   TESSERA_UPDATE_GOLDEN=1 build/release/tests/server_tests --gtest_filter='Accounting.GoldenCsv'
// and review the diff.
TEST(Accounting, GoldenCsv) {
  const Json f = Json::parse(slurp(kData + "chargeback_events.json"));
  std::vector<EventRow> events;
  for (const Json& e : f["events"])
    events.push_back(EventRow{e.at("seq").get<int64_t>(), e.at("job_id").get<int64_t>(), e.at("time").get<int64_t>(),
                              e.at("kind").get<std::string>(), e.at("actor").get<std::string>(), e.at("detail").dump()});
  std::map<int64_t, JobInfo> jobs;
  for (const Json& j : f["jobs"])
    jobs[j.at("id").get<int64_t>()] = JobInfo{j.at("queue").get<std::string>(), j.at("user").get<std::string>(),
                                              j.at("project").get<std::string>()};
  const int64_t from = *parse_utc_time(f.at("from").get<std::string>(), "from");
  const int64_t to = *parse_utc_time(f.at("to").get<std::string>(), "to");
  auto l = compute_ledger(events, jobs, cluster(), {from, to, 0});
  ASSERT_TRUE(l.ok()) << l.error().message;
  auto by = parse_dims(f.at("by").get<std::string>());
  ASSERT_TRUE(by.ok());
  const std::string got = chargeback_csv(*l, aggregate(*l, *by));
  const std::string path = kData + "chargeback_expected.csv";
  if (std::getenv("TESSERA_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << got;
    GTEST_SKIP() << "wrote " << path;
  }
  const std::string want = slurp(path);
  if (got == want) return;
  std::istringstream g(got), w(want);
  std::string gl, wl;
  for (int line = 1;; ++line) {
    const bool gok = bool(std::getline(g, gl)), wok = bool(std::getline(w, wl));
    if (!gok && !wok) break;
    if (gl != wl || gok != wok) {
      ADD_FAILURE() << path << " differs at line " << line << "\n  want: " << (wok ? wl : "(end)")
                    << "\n  got:  " << (gok ? gl : "(end)");
      break;
    }
  }
  FAIL() << "the CSV differs from " << path << " (see the first differing line above)";
}

}  // namespace
}  // namespace tessera::server::accounting
