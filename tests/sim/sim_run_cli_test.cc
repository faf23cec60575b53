// `tessera sim run` with the live system's cadence and delays (--cycle-interval, --min-cycle-gap,
// --submit-latency, --start-latency, --finish-latency): they reach the simulator and change what it
// measures in the direction they must, and bad values are refused naming the flag.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tessera::sim {
namespace {

using tessera::testing::run_tessera;

// One day of the synthetic mixed workload on its matching 64-GPU cluster, with `extra` flags; the
// metrics of the one policy.
nlohmann::json metrics(const std::string& extra) {
  const std::string json = "/tmp/tessera-simrun-cli-" + std::to_string(getpid()) + ".json";
  const auto [rc, out] = run_tessera(std::string("sim run --cluster ") + TESSERA_SOURCE_DIR +
                                     "/examples/cluster-mixed-64.yaml --workload synthetic:seed=1,days=1,gpus=64"
                                     " --policy tessera --horizon 86400 --json " + json + " " + extra);
  EXPECT_EQ(rc, 0) << out;
  std::ifstream f(json);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  std::remove(json.c_str());
  if (!j.is_array() || j.empty()) {
    ADD_FAILURE() << "no metrics for: " << extra << "\n" << out;
    return nlohmann::json::object();
  }
  return j[0];
}

TEST(SimRunCli, LatenciesHoldGpusAndCadenceSetsTheCycles) {
  const nlohmann::json base = metrics("");
  const nlohmann::json late = metrics("--start-latency 600 --finish-latency 60 --submit-latency 5");
  const nlohmann::json sparse = metrics("--min-cycle-gap 60 --cycle-interval 600");
  ASSERT_TRUE(base.contains("jct_mean_s") && late.contains("jct_mean_s") && sparse.contains("cycles"));
  // Every started job holds its GPUs 10 minutes before its work begins: jobs take longer and wait more.
  EXPECT_GT(late["jct_mean_s"].get<double>(), base["jct_mean_s"].get<double>() + 300);
  EXPECT_GE(late["wait_p99_s"].get<double>(), base["wait_p99_s"].get<double>());
  // Cycles on events at most every minute and otherwise every 10 minutes: fewer cycles.
  EXPECT_LT(sparse["cycles"].get<int64_t>(), base["cycles"].get<int64_t>());
}

TEST(SimRunCli, BadCadenceOrLatencyNamesTheFlag) {
  const std::string cmd = std::string("sim run --cluster ") + TESSERA_SOURCE_DIR +
                          "/examples/cluster-mixed-64.yaml --workload synthetic:seed=1,days=1,gpus=64 --horizon 3600 ";
  for (const char* flag : {"--cycle-interval 0", "--min-cycle-gap -1", "--submit-latency -1", "--start-latency -5",
                           "--finish-latency -1", "--stall-limit -1"}) {
    const auto [rc, out] = run_tessera(cmd + flag);
    EXPECT_EQ(rc, 2) << flag << "\n" << out;
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    EXPECT_NE(out.find(name + ": must be"), std::string::npos) << flag << "\n" << out;
  }
}

// FIFO behind a MIG job (the baselines create no MIG instances) starts nothing on the mixed
// cluster: the run stops, stalled, says so, and reports when; Tessera starts every job.
TEST(SimRunCli, AStalledRunStopsAndSaysSo) {
  const std::string json = ::testing::TempDir() + "/stalled.json";
  const auto [rc, out] = run_tessera(std::string("sim run --cluster ") + TESSERA_SOURCE_DIR +
                                     "/examples/cluster-mixed-64.yaml --workload synthetic:seed=1,days=1,gpus=64 "
                                     "--policy fifo-gang,tessera --stall-limit 86400 --json " + json);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("fifo-gang: stopped stalled at"), std::string::npos) << out;
  EXPECT_EQ(out.find("tessera: stopped stalled"), std::string::npos) << out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_GE(j[0]["stalled_at_s"].get<int64_t>(), 86400);
  EXPECT_GT(j[0]["unstarted"].get<int64_t>(), 0);
  EXPECT_EQ(j[1]["stalled_at_s"].get<int64_t>(), -1);
  EXPECT_EQ(j[1]["unstarted"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace tessera::sim
