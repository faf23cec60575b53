// End-to-end tests of the chargeback and usage reports: the real `tessera server` (--agentless, so
// submitted jobs run as soon as they are placed) on tests/server/data/chargeback_cluster.yaml, the
// routes' permissions (team lead: their queue subtree; member: their own rows; agent: refused), bad
// parameters, CSV and JSON, and the `tessera report` CLI.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <set>

#include "server/accounting.h"
#include "server_process.h"

namespace tessera::testing {
namespace {

class ReportE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    ASSERT_TRUE(server.start(&out)) << out;
    lead = server.token("lena", "team-lead", "nlp");
    alice = server.token("alice", "member", "vision");
    bob = server.token("bob", "member", "nlp");
    carol = server.token("carol", "member", "prod");
    viewer = server.token("vic", "viewer");
    agent = server.token("agent-1", "agent");
    ASSERT_FALSE(agent.empty());
    for (const auto& [tok, queue] : std::vector<std::pair<std::string, std::string>>{
             {alice, "vision"}, {bob, "nlp"}, {carol, "prod"}, {lead, "nlp"}}) {
      Json spec = job("work", queue, Json{{"gpus", 1}});
      spec["project"] = "proj-" + queue;
      auto r = server.post("/api/v1/jobs", tok, spec);
      ASSERT_EQ(r.status, 201) << r.raw;
      ids.push_back(r.body["id"].get<int64_t>());
    }
    ASSERT_TRUE(eventually([&] {
      for (int64_t id : ids) {
        auto r = server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token());
        if (r.status != 200 || r.body["state"] != "running") return false;
      }
      return true;
    }));
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // some GPU-seconds to charge
  }
  // Yesterday to tomorrow (UTC): a period that holds the whole test, even across midnight.
  static std::string day(int offset) {
    const time_t t = time(nullptr) + offset * 86400;
    char buf[16];
    struct tm tm {};
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    return buf;
  }
  std::string period() const { return "from=" + day(-1) + "&to=" + day(1); }
  Json rows(const std::string& token, const std::string& by = "team,queue,user,model") {
    auto r = server.get("/api/v1/reports/chargeback?" + period() + "&by=" + by, token);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }
  ServerProcess server{TESSERA_SOURCE_DIR "/tests/server/data/chargeback_cluster.yaml"};
  std::string lead, alice, bob, carol, viewer, agent;
  std::vector<int64_t> ids;
};

TEST_F(ReportE2E, AdminSeesEveryTeamAndTotalsReconcile) {
  const Json j = rows(server.admin_token());
  EXPECT_EQ(j["currency"], "USD");
  EXPECT_EQ(j["idle_share"], "proportional");
  EXPECT_EQ(j["by"], Json::array({"team", "queue", "user", "model"}));
  std::set<std::string> users;
  for (const Json& r : j["rows"]) users.insert(r["x_User"].get<std::string>());
  // A GPU model nobody used (the four 1-GPU jobs may all land on one model) has an (unallocated) row.
  users.erase("(unallocated)");
  EXPECT_EQ(users, (std::set<std::string>{"alice", "bob", "carol", "lena"}));
  // Everything the cluster had (less down time) is charged: allocated + idle share = capacity - down.
  const Json& c = j["cluster"];
  const int64_t charged = j["totals"]["allocated_milli_gpu_seconds"].get<int64_t>() +
                          j["totals"]["idle_share_milli_gpu_seconds"].get<int64_t>();
  EXPECT_EQ(charged, c["capacity_milli_gpu_seconds"].get<int64_t>() - c["down_milli_gpu_seconds"].get<int64_t>());
  EXPECT_GE(j["totals"]["allocated_milli_gpu_seconds"].get<int64_t>(), 4 * 1000 * 2);  // 4 GPUs, >= 2 s each
  EXPECT_EQ(c["gpus"], 20);
  // A viewer sees the same rows.
  EXPECT_EQ(rows(viewer)["rows"].size(), j["rows"].size());
}

TEST_F(ReportE2E, TeamLeadSeesTheirSubtreeAndMemberTheirOwnRows) {
  const Json l = rows(lead);
  ASSERT_FALSE(l["rows"].empty());
  std::set<std::string> users;
  for (const Json& r : l["rows"]) {
    EXPECT_EQ(r["x_Queue"], "nlp") << r.dump();
    users.insert(r["x_User"].get<std::string>());
  }
  EXPECT_EQ(users, (std::set<std::string>{"bob", "lena"}));
  EXPECT_FALSE(l.contains("cluster")) << "cluster-wide numbers are for admins and viewers";
  // Grouped by team only, the lead's row still holds only the nlp subtree's charges.
  const Json by_team = rows(lead, "team");
  ASSERT_EQ(by_team["rows"].size(), 1u);
  EXPECT_EQ(by_team["rows"][0]["x_Team"], "research");
  EXPECT_EQ(by_team["rows"][0]["x_Queue"], "") << "queue not grouped";
  const Json m = rows(alice);
  ASSERT_FALSE(m["rows"].empty());
  for (const Json& r : m["rows"]) EXPECT_EQ(r["x_User"], "alice") << r.dump();
  const Json b = rows(bob, "user");
  ASSERT_EQ(b["rows"].size(), 1u);
  EXPECT_EQ(b["rows"][0]["x_User"], "bob");
  EXPECT_EQ(b["rows"][0]["x_Project"], "") << "project not grouped";
  // Agent tokens may not read reports.
  EXPECT_EQ(server.get("/api/v1/reports/chargeback?" + period(), agent).status, 403);
  EXPECT_EQ(server.get("/api/v1/reports/usage?" + period(), agent).status, 403);
  EXPECT_EQ(server.get("/api/v1/reports/chargeback", "").status, 401);
}

TEST_F(ReportE2E, BadParametersNameTheParameter) {
  const std::string t = server.admin_token();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"from=2026-13-01", "from"}, {"to=tomorrow", "to"}, {"by=team,colour", "by"},
      {"format=xml", "format"},    {"from=2026-11-02&to=2026-11-01", "to"}};
  for (const auto& [q, field] : cases) {
    auto r = server.get("/api/v1/reports/chargeback?" + q, t);
    EXPECT_EQ(r.status, 400) << q << ": " << r.raw;
    EXPECT_EQ(r.body["error"]["field"], field) << q << ": " << r.raw;
  }
  EXPECT_EQ(server.get("/api/v1/reports/usage?format=xml", t).status, 400);
}

TEST_F(ReportE2E, CsvUsageAndTheCli) {
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  auto csv = server.get("/api/v1/reports/chargeback?" + period() + "&format=csv&by=team,user", server.admin_token());
  ASSERT_EQ(csv.status, 200);
  EXPECT_EQ(csv.raw.rfind("BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,", 0), 0u) << csv.raw;
  EXPECT_NE(csv.raw.find(",GPU-Hour,"), std::string::npos);
  auto usage = server.get("/api/v1/reports/usage?" + period(), viewer);
  ASSERT_EQ(usage.status, 200) << usage.raw;
  ASSERT_EQ(usage.body["rows"].size(), 2u);
  EXPECT_EQ(usage.body["rows"][0]["gpu_model"], "A100-80GB");
  EXPECT_EQ(usage.body["rows"][1]["gpu_model"], "H100-80GB-SXM");
  EXPECT_EQ(usage.body["totals"]["gpus"], "20");

  // The CLI: CSV to a file, byte for byte what the server answered for the same query.
  const std::string out = make_temp_dir("tessera-report-out") + "/cb.csv";
  auto c = run_cli({"report", "chargeback", "--server", url, "--token", server.admin_token(), "--from", day(-1),
                    "--to", day(1), "--by", "team,user", "--format", "csv", "--output", out});
  ASSERT_EQ(c.status, 0) << c.err;
  const std::string file = read_file(out);
  EXPECT_EQ(file.substr(0, file.find('\n')), csv.raw.substr(0, csv.raw.find('\n')));
  EXPECT_NE(file.find(",alice,"), std::string::npos) << file;
  std::filesystem::remove_all(std::filesystem::path(out).parent_path());
  auto table = run_cli({"report", "chargeback", "--server", url, "--token", bob, "--from", day(-1), "--to", day(1)});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("TEAM"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("TOTAL"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("research"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("prod"), std::string::npos) << "bob sees only his rows\n" << table.out;
  auto u = run_cli({"report", "usage", "--server", url, "--token", viewer, "--format", "table"});
  ASSERT_EQ(u.status, 0) << u.err;
  EXPECT_NE(u.out.find("H100-80GB-SXM"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("(all)"), std::string::npos) << u.out;
  auto bad = run_cli({"report", "chargeback", "--server", url, "--token", bob, "--from", "11/01/2026"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("from"), std::string::npos) << bad.err;
  auto bad_fmt = run_cli({"report", "usage", "--server", url, "--format", "xml"});
  EXPECT_EQ(bad_fmt.status, 2) << bad_fmt.err;
}

// The usage report as `tessera report usage --format json` writes it feeds `tessera plan buy-vs-rent
// --from-usage`: GPUs and utilisation = allocated GPU-hours / (GPUs x hours in the charge period).
TEST_F(ReportE2E, UsageReportFeedsBuyVsRent) {
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const std::string dir = make_temp_dir("tessera-report-plan");
  const std::string file = dir + "/usage.json";
  auto u = run_cli({"report", "usage", "--server", url, "--token", viewer, "--from", day(-1), "--to", day(1),
                    "--format", "json", "--output", file});
  ASSERT_EQ(u.status, 0) << u.err;
  const Json report = Json::parse(read_file(file));
  auto start = server::accounting::parse_utc_time(report["charge_period_start"].get<std::string>(), "start");
  auto end = server::accounting::parse_utc_time(report["charge_period_end"].get<std::string>(), "end");
  ASSERT_TRUE(start.ok() && end.ok());
  ASSERT_GT(*end, *start);
  const double gpu_hours = report["cluster"]["allocated_milli_gpu_seconds"].get<double>() / 1000 / 3600;
  const double expected = gpu_hours / (20 * double(*end - *start) / 3600);
  ASSERT_GT(expected, 0);

  auto plan = run_cli({"plan", "buy-vs-rent", "--from-usage", file, "--json"});
  ASSERT_EQ(plan.status, 0) << plan.err;
  const Json j = Json::parse(plan.out);
  EXPECT_EQ(j["gpus"], 20) << "the cluster's GPUs";
  EXPECT_NEAR(j["utilisation"].get<double>(), expected, 1e-12);
  EXPECT_NEAR(j["usage_history"]["gpu_hours"].get<double>(), gpu_hours, 1e-12);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// A reload (SIGHUP) applies new chargeback rates to reports from then on.
TEST(ReportReload, NewRatesApplyAfterSighup) {
  const std::string dir = make_temp_dir("tessera-rates");
  const std::string cfg = dir + "/cluster.yaml";
  std::string text = read_file(TESSERA_SOURCE_DIR "/tests/server/data/chargeback_cluster.yaml");
  { std::ofstream(cfg) << text; }
  ServerProcess server{cfg};
  ASSERT_TRUE(server.start());
  auto price = [&] {
    auto r = server.get("/api/v1/reports/chargeback?by=model", server.admin_token());
    return r.body.contains("rates") ? r.body["rates"].value("H100-80GB-SXM", std::string()) : r.raw;
  };
  EXPECT_EQ(price(), "2.490000");
  const auto at = text.find("\"2.49\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 6, "\"3.10\"");
  { std::ofstream(cfg) << text; }
  server.kill(SIGHUP);
  EXPECT_TRUE([&] {
    for (int i = 0; i < 50; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(100)))
      if (price() == "3.100000") return true;
    return false;
  }()) << price();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// A spot interruption through the routes: the interrupted attempt's hours, cost at the pool's price
// (spot_cluster.yaml: spot-a at 0.95, no model rates) and the count, in the chargeback and usage JSON.
TEST(ReportSpot, InterruptedHoursAndCountInTheRoutes) {
  ServerProcess server(TESSERA_SOURCE_DIR "/tests/server/data/spot_cluster.yaml");
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  const std::string admin = server.admin_token();
  // checkpoint.grace 600 > the 10 s notice: requeued at once (a preemption by the provider).
  auto sub = server.post("/api/v1/jobs", admin,
                         Json{{"name", "t"}, {"queue", "default"}, {"resources", {{"gpus", 8}}}, {"command", {"sleep", "60"}},
                              {"spot", "preferred"}, {"checkpoint", {{"interval", 3600}, {"grace", 600}}}});
  ASSERT_EQ(sub.status, 201) << sub.raw;
  const std::string id = std::to_string(sub.body["id"].get<int64_t>());
  std::string node;
  ASSERT_TRUE(eventually([&] {
    auto j = server.get("/api/v1/jobs/" + id, admin).body;
    if (j.value("state", "") != "running") return false;
    node = j["placement"][0]["node"];
    return true;
  }));
  ASSERT_EQ(node.rfind("spot-", 0), 0u) << node;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // some GPU-seconds to lose
  auto n = server.post("/api/v1/nodes/" + node + "/interruption", admin, Json{{"notice_s", 10}});
  ASSERT_EQ(n.status, 200) << n.raw;

  const time_t t0 = time(nullptr) - 86400, t1 = t0 + 2 * 86400;  // yesterday to tomorrow (UTC)
  char from[16], to[16];
  struct tm tm {};
  gmtime_r(&t0, &tm);
  strftime(from, sizeof from, "%Y-%m-%d", &tm);
  gmtime_r(&t1, &tm);
  strftime(to, sizeof to, "%Y-%m-%d", &tm);
  const std::string period = std::string("from=") + from + "&to=" + to;
  auto r = server.get("/api/v1/reports/chargeback?" + period + "&by=team,pool", admin);
  ASSERT_EQ(r.status, 200) << r.raw;
  const Json& tot = r.body["totals"];
  EXPECT_EQ(tot["interruptions"], 1) << tot.dump();
  const int64_t ms = tot["interrupted_milli_gpu_seconds"].get<int64_t>();
  EXPECT_GE(ms, 8 * 1000 * 1) << "8 GPUs for at least a second";
  EXPECT_EQ(tot["interrupted_gpu_hours"], tot["preempted_gpu_hours"]) << "the only preemption was the interruption";
  EXPECT_EQ(tot["interrupted_cost_micro"], server::accounting::div_round_half_even(__int128(ms) * 950000, 3600000));
  bool seen = false;
  for (const Json& row : r.body["rows"])
    if (row["x_Pool"] == "spot-a" && row["x_Team"] == "default") {
      seen = true;
      EXPECT_EQ(row["x_Interruptions"], "1") << row.dump();
      EXPECT_EQ(row["x_InterruptedGpuHours"], tot["interrupted_gpu_hours"]) << row.dump();
      EXPECT_EQ(row["x_InterruptedCost"], tot["interrupted_cost"]) << row.dump();
    }
  EXPECT_TRUE(seen) << r.raw;
  EXPECT_EQ(r.body["cluster"]["interruptions"], 1);
  auto u = server.get("/api/v1/reports/usage?" + period, admin);
  ASSERT_EQ(u.status, 200) << u.raw;
  EXPECT_EQ(u.body["totals"]["interruptions"], "1") << u.raw;
  EXPECT_EQ(u.body["totals"]["interrupted_gpu_hours"], tot["interrupted_gpu_hours"]) << u.raw;
  const CliResult table = run_cli({"report", "chargeback", "--server", "http://127.0.0.1:" + std::to_string(server.port()),
                                   "--token", admin, "--from", from, "--to", to, "--by", "team,pool"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("INTERRUPTIONS"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// Issue 22: a fresh cluster (no job has run, no chargeback rates) says why its reports are empty and
// why costs are 0, naming the config key, in the API's notes and through `tessera report`. The server
// started with --agentless says at start that nothing runs its jobs, and so does each job it places.
TEST(ReportFresh, EmptyReportsAndZeroCostsSayWhy) {
  ServerProcess server(TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml");  // no chargeback: section
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  EXPECT_NE(out.find("--agentless: no agent runs tasks on this server (placement only)"), std::string::npos) << out;
  const std::string admin = server.admin_token();
  auto has = [](const Json& notes, const std::string& part) {
    for (const Json& n : notes)
      if (n.is_string() && n.get<std::string>().find(part) != std::string::npos) return true;
    return false;
  };
  const Json cb = server.get("/api/v1/reports/chargeback", admin).body;
  EXPECT_TRUE(has(cb.value("notes", Json()), "No usage yet in this period")) << cb.dump(2);
  EXPECT_TRUE(has(cb.value("notes", Json()), "Costs are 0 because no GPU rates are configured. Set chargeback.rates"))
      << cb.dump(2);
  const Json usage = server.get("/api/v1/reports/usage", admin).body;
  EXPECT_TRUE(has(usage.value("notes", Json()), "No usage yet in this period")) << usage.dump(2);
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const CliResult r = run_cli({"report", "chargeback", "--server", url, "--token", admin});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("note: No usage yet in this period"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chargeback.rates"), std::string::npos) << r.err;
  const CliResult u = run_cli({"report", "usage", "--server", url, "--token", admin});
  ASSERT_EQ(u.status, 0) << u.out << u.err;
  EXPECT_NE(u.err.find("note: No usage yet in this period"), std::string::npos) << u.err;
  // A job this agentless server places says that nothing runs it (API reason, `tessera jobs show`).
  auto sub = server.post("/api/v1/jobs", admin, Json{{"name", "demo"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                                     {"command", {"sleep", "60"}}});
  ASSERT_EQ(sub.status, 201) << sub.raw;
  const std::string id = std::to_string(sub.body["id"].get<int64_t>());
  ASSERT_TRUE(eventually([&] { return server.get("/api/v1/jobs/" + id, admin).body.value("state", "") == "running"; }));
  const std::string why = "no agent runs tasks on this server (--agentless: placement only)";
  EXPECT_NE(server.get("/api/v1/jobs/" + id, admin).body.value("reason", "").find(why), std::string::npos);
  const CliResult show = run_cli({"jobs", "show", id, "--server", url, "--token", admin});
  ASSERT_EQ(show.status, 0) << show.out << show.err;
  EXPECT_NE(show.out.find(why), std::string::npos) << show.out;
}

}  // namespace
}  // namespace tessera::testing
