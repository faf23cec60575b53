// Pools in the metrics, and reloading a config with pools: new pool prices apply to reports; a node moved to another
// pool, or a pool renamed, is refused (that needs a restart) and the old config stays.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server_process.h"

namespace tessera::testing {
namespace {

const char* kPools = R"(name: pools
levels: [leaf]
pools:
  - {name: base, kind: reserved, price: "1.90"}
  - {name: spot-a, kind: spot, price: "0.95", notice: 120}
nodes:
  - {name: r, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 64000, memory: 262144, path: [leaf-0], pool: base}
  - {name: s, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 64000, memory: 262144, path: [leaf-0], pool: spot-a}
queues:
  - {name: default}
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(PoolReload, PricesApplyAndPoolChangesAreRefused) {
  const std::string dir = make_temp_dir("tessera-pools");
  const std::string cfg = dir + "/cluster.yaml";
  { std::ofstream(cfg) << kPools; }
  ServerProcess server{cfg};
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  const std::string t = server.admin_token();
  auto spot_rate = [&] {
    auto r = server.get("/api/v1/reports/chargeback?by=pool", t);
    return r.body.contains("pool_rates") ? r.body["pool_rates"].value("spot-a", std::string()) : r.raw;
  };
  EXPECT_EQ(spot_rate(), "0.950000");
  // Metrics label GPUs with their node's pool (agentless server: every GPU is idle).
  const std::string metrics = server.get("/metrics", "").raw;
  EXPECT_NE(metrics.find("tessera_gpus{model=\"H100-80GB-SXM\",pool=\"spot-a\",state=\"idle\"} 8"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tessera_gpus{model=\"H100-80GB-SXM\",pool=\"base\",state=\"idle\"} 8"), std::string::npos);

  // A new spot price: applied.
  { std::ofstream(cfg) << replaced(kPools, "\"0.95\"", "\"0.80\""); }
  auto r = server.post("/api/v1/admin/reload", t, Json::object());
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(spot_rate(), "0.800000");

  // Node s moved to pool base: refused, the old config (and price) stays.
  { std::ofstream(cfg) << replaced(replaced(kPools, "\"0.95\"", "\"0.80\""), "pool: spot-a", "pool: base"); }
  r = server.post("/api/v1/admin/reload", t, Json::object());
  EXPECT_EQ(r.status, 409) << r.raw;
  EXPECT_NE(r.raw.find("pool"), std::string::npos) << "the refusal should say the node changed pool: " << r.raw;
  EXPECT_EQ(spot_rate(), "0.800000");

  // A pool renamed: refused too.
  { std::ofstream(cfg) << replaced(replaced(kPools, "name: spot-a", "name: spot-b"), "pool: spot-a", "pool: spot-b"); }
  r = server.post("/api/v1/admin/reload", t, Json::object());
  EXPECT_EQ(r.status, 409) << r.raw;
  EXPECT_NE(r.raw.find("restart"), std::string::npos) << r.raw;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
