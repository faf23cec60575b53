// End-to-end checks of `tessera plan buy-vs-rent` (src/cli/cmd_plan.cc): the reference's defaults
// reach the output, JSON matches the core math, bad flags are named with their fix, and --from-usage
// derives GPUs and utilisation from a sim run's JSON or the controller's usage report.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "run_binary.h"

namespace {

std::pair<int, std::string> run_plan(const std::string& args, bool merge_stderr = true) {
  return tessera::testing::run_tessera("plan buy-vs-rent " + args, merge_stderr);
}

TEST(PlanCli, DefaultsAreTheReferenceH100Node) {
  auto [code, out] = run_plan("--gpus 64 --utilisation 0.8");
  ASSERT_EQ(code, 0) << out;
  for (const char* s : {"$375,000", "reference §4.2", "$196/kW-month", "on-demand", "reserved-1y", "reserved-3y",
                        "spot", "13.9 mo", "16.1% of time lost"})
    EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
}

TEST(PlanCli, JsonAgreesWithTheReferenceModel) {
  // 8 GPUs at 100%: the reference's §4.2 node, $2.658 per GPU-hour; AWS p5 post-cut ($6.88) breaks even
  // after 375,000 / (40,179.20 - 5,106.56) = 10.69 months.
  auto [code, out] = run_plan("--gpus 8 --utilisation 1 --json", false);
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_NEAR(j["owned"]["per_gpu_hour_usd"]["total"].get<double>(), 2.658087, 1e-6);
  ASSERT_EQ(j["tiers"][0]["tier"], "on-demand");
  EXPECT_NEAR(j["tiers"][0]["break_even_months"].get<double>(), 375000 / 35072.64, 1e-6);
}

TEST(PlanCli, BadFlagsNameTheFlagAndTheFix) {
  auto [code, out] = run_plan("--gpus 8 --utilisation 80");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--utilisation must be in (0, 1]"), std::string::npos) << out;
  std::tie(code, out) = run_plan("--gpus 8 --model A100-80GB");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--capex-per-gpu is required for A100-80GB"), std::string::npos) << out;
  std::tie(code, out) = run_plan("--gpus 8 --model H200-141GB --capex-per-gpu 50000 --power-kw 8");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("pass --prices FILE"), std::string::npos) << out;
}

// --- --from-usage: hand-written history files in a temp dir ---

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/plan_usage_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

// The controller's usage report (accounting::usage_json's shape), trimmed to what the planner reads
// plus a row: 16 GPUs over November (30 days = 720 h) with 6,912 GPU-hours allocated.
std::string usage_report(const std::string& allocated_ms = "24883200000", const std::string& end = "2026-12-01T00:00:00Z") {
  return R"({"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z",
  "charge_period_start": "2026-11-01T00:00:00Z", "charge_period_end": ")" + end + R"(",
  "columns": ["gpu_model", "gpus"], "rows": [{"gpu_model": "H100-80GB-SXM", "pool": "default", "gpus": "16"}],
  "totals": {"gpus": "16"},
  "cluster": {"gpus": 16, "capacity_milli_gpu_seconds": 41472000000, "allocated_milli_gpu_seconds": )" + allocated_ms + "}}";
}

// `tessera sim run --json` metrics (report.cc metrics_json), two policies over 72 h of makespan.
const char* kSimTwo = R"([
  {"policy": "tessera", "jobs": 10, "makespan_s": 259200, "allocation_pct": 75.0, "capacity_gpus": 64},
  {"policy": "k8s-default", "jobs": 10, "makespan_s": 259200, "allocation_pct": 40.0, "capacity_gpus": 64}])";

TEST(PlanCli, FromUsageReportDerivesGpusAndUtilisation) {
  const std::string f = write_file("report.json", usage_report());
  auto [code, out] = run_plan("--from-usage " + f + " --json", false);
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["gpus"], 16);
  EXPECT_EQ(j["servers"], 2);
  // 24,883,200,000 milli-GPU-s = 6,912 GPU-h; / (16 GPUs x 720 h) = 0.6.
  EXPECT_NEAR(j["utilisation"].get<double>(), 6912.0 / (16 * 720), 1e-12);
  EXPECT_NEAR(j["usage_history"]["gpu_hours"].get<double>(), 6912, 1e-9);
  EXPECT_NEAR(j["usage_history"]["period_hours"].get<double>(), 720, 1e-12);
  // The same plan as with the figures given by hand.
  auto [code2, by_hand] = run_plan("--gpus 16 --utilisation 0.6 --json", false);
  ASSERT_EQ(code2, 0) << by_hand;
  EXPECT_EQ(j["tiers"], nlohmann::json::parse(by_hand)["tiers"]);

  std::tie(code, out) = run_plan("--from-usage " + f);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("16 x H100-80GB-SXM at 60.0% utilisation"), std::string::npos) << out;
  EXPECT_NE(out.find("from usage history " + f + " (usage report 2026-11-01T00:00:00Z - 2026-12-01T00:00:00Z): "
                     "6,912 GPU-h over 30.0 days on 16 GPUs"),
            std::string::npos) << out;
  EXPECT_NE(out.find("the cluster's GPUs in usage history " + f), std::string::npos) << out;
}

TEST(PlanCli, FromUsageSimRunPicksThePolicyAndGpusOverride) {
  const std::string f = write_file("sim.json", kSimTwo);
  auto [code, out] = run_plan("--from-usage " + f);
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("holds 2 policies (tessera, k8s-default); pick one with --policy NAME"), std::string::npos) << out;
  std::tie(code, out) = run_plan("--from-usage " + f + " --policy fifo");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--policy fifo: not in " + f + " (it has: tessera, k8s-default)"), std::string::npos) << out;

  std::tie(code, out) = run_plan("--from-usage " + f + " --policy k8s-default --json", false);
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["gpus"], 64);
  EXPECT_NEAR(j["utilisation"].get<double>(), 0.40, 1e-12);
  // tessera: 75% of 64 GPUs over 72 h = 3,456 GPU-h; on 96 GPUs (--gpus) that is 3,456 / (96 x 72) = 50%.
  std::tie(code, out) = run_plan("--from-usage " + f + " --policy tessera --gpus 96 --json", false);
  ASSERT_EQ(code, 0) << out;
  j = nlohmann::json::parse(out);
  EXPECT_EQ(j["gpus"], 96);
  EXPECT_NEAR(j["usage_history"]["gpu_hours"].get<double>(), 3456, 1e-9);
  EXPECT_NEAR(j["utilisation"].get<double>(), 3456.0 / (96 * 72), 1e-12);
  std::tie(code, out) = run_plan("--from-usage " + f + " --policy tessera --gpus 96");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("3,456 GPU-h over 3.0 days on 64 GPUs, divided by 96 GPUs (--gpus)"), std::string::npos) << out;
  EXPECT_NE(out.find("--gpus (overrides the 64 GPUs of " + f + ")"), std::string::npos) << out;
  // Fewer GPUs than the history used: refused.
  std::tie(code, out) = run_plan("--from-usage " + f + " --policy tessera --gpus 32");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("exceeds 32 GPUs"), std::string::npos) << out;
}

TEST(PlanCli, FromUsageSimRunWithoutCapacityNeedsGpus) {
  const std::string f = write_file("sim-old.json", R"([{"policy": "tessera", "makespan_s": 7200, "allocation_pct": 50}])");
  auto [code, out] = run_plan("--from-usage " + f);
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find(f + " (policy tessera): missing key \"capacity_gpus\""), std::string::npos) << out;
  EXPECT_NE(out.find("--gpus"), std::string::npos) << out;
  std::tie(code, out) = run_plan("--from-usage " + f + " --gpus 8 --json", false);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NEAR(nlohmann::json::parse(out)["utilisation"].get<double>(), 0.5, 1e-12);
}

TEST(PlanCli, FromUsageRejectsBadFilesNamingFileAndKey) {
  struct Case {
    std::string name, text, expect;
  };
  const std::vector<Case> cases = {
      {"notjson.json", "month,gpu_hours\n2026-11,100\n", "not valid JSON"},
      {"neither.json", R"({"jobs": 3})", "neither the JSON of `tessera sim run --json`"},
      {"empty.json", "[]", "an empty array"},
      {"nopolicy.json", R"([{"makespan_s": 10}])", "element 0 has no \"policy\" string"},
      {"noalloc.json", R"([{"policy": "tessera", "makespan_s": 3600, "capacity_gpus": 8}])",
       "(policy tessera): missing key \"allocation_pct\""},
      {"badalloc.json", R"([{"policy": "tessera", "makespan_s": 3600, "allocation_pct": "80", "capacity_gpus": 8}])",
       "\"allocation_pct\" must be a number, got \"80\""},
      {"over.json", R"([{"policy": "tessera", "makespan_s": 3600, "allocation_pct": 180, "capacity_gpus": 8}])",
       "\"allocation_pct\" must be in [0, 100], got 180"},
      {"nomakespan.json", R"([{"policy": "tessera", "makespan_s": 0, "allocation_pct": 50, "capacity_gpus": 8}])",
       "\"makespan_s\" must be > 0"},
      {"idle.json", R"([{"policy": "tessera", "makespan_s": 3600, "allocation_pct": 0, "capacity_gpus": 8}])",
       "no GPU-hours used over the period"},
      {"nocluster.json", R"({"charge_period_start": "2026-11-01T00:00:00Z", "cluster": 3})",
       "\"cluster\" must be an object"},
      {"noallocated.json",
       R"({"charge_period_start": "2026-11-01T00:00:00Z", "charge_period_end": "2026-12-01T00:00:00Z", "cluster": {"gpus": 16}})",
       "(cluster): missing key \"allocated_milli_gpu_seconds\""},
      {"noend.json", R"({"charge_period_start": "2026-11-01T00:00:00Z", "cluster": {"gpus": 16, "allocated_milli_gpu_seconds": 5}})",
       "missing key \"charge_period_end\""},
      {"badend.json", usage_report("5", "December"), "charge_period_end: \"December\" is not a UTC date"},
      {"emptyperiod.json", usage_report("5", "2026-11-01T00:00:00Z"), "the charge period is empty"},
  };
  for (const Case& c : cases) {
    const std::string f = write_file(c.name, c.text);
    auto [code, out] = run_plan("--from-usage " + f);
    EXPECT_EQ(code, 2) << c.name << "\n" << out;
    EXPECT_NE(out.find("--from-usage " + f), std::string::npos) << c.name << ": the file is named\n" << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << c.name << ": " << c.expect << "\n" << out;
  }
  auto [code, out] = run_plan("--from-usage /nonexistent/usage.json");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--from-usage /nonexistent/usage.json: cannot read the file"), std::string::npos) << out;
  // Flags that contradict the history.
  const std::string f = write_file("report2.json", usage_report());
  std::tie(code, out) = run_plan("--from-usage " + f + " --utilisation 0.8");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--utilisation and --from-usage both set the utilisation"), std::string::npos) << out;
  std::tie(code, out) = run_plan("--from-usage " + f + " --policy tessera");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("is a usage report"), std::string::npos) << out;
  std::tie(code, out) = run_plan("--utilisation 0.8");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--gpus N is required"), std::string::npos) << out;
}

}  // namespace
