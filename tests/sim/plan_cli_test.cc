// End-to-end checks of `tessera plan buy-vs-rent` (src/cli/cmd_plan.cc): the reference's defaults
// reach the output, JSON matches the core math, and bad flags are named with their fix.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
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

}  // namespace
