#include "sim/bench_place.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace tessera::sim {
namespace {

// Without and with the policy prepared (--profile: the stream's shapes and the node kinds).
TEST(BenchPlace, SmallRunPlacesEveryKindAndKeepsInvariants) {
  for (bool profile : {false, true}) {
    BenchPlaceOptions o;
    o.nodes = 256;
    o.requests = 4000;
    o.profile = profile;
    auto r = run_bench_place(o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->gpus, 256 * 8);
    for (const char* kind : {"share", "mig", "gpu1", "gpu2", "gpu4", "gang8", "gang4x8"}) {
      ASSERT_TRUE(r->by_kind.count(kind)) << kind << " profile " << profile;
      EXPECT_GT(r->by_kind.at(kind).placed, 0) << kind << " profile " << profile;
      EXPECT_LE(r->by_kind.at(kind).p50_us, r->by_kind.at(kind).p99_us) << kind;
    }
    // Departures hold the cluster near 75% of its GPUs.
    EXPECT_GT(r->final_gpu_allocated_pct, 60.0) << "profile " << profile;
    EXPECT_LE(r->final_gpu_allocated_pct, 80.0) << "profile " << profile;
    EXPECT_GT(r->placements_per_s, 0.0);
  }
}

TEST(BenchPlace, BadOptionsNameTheFlag) {
  BenchPlaceOptions o;
  o.gpus_per_node = 20;
  auto r = run_bench_place(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--gpus-per-node"), std::string::npos);
  o = BenchPlaceOptions{};
  o.policy = "nope";
  r = run_bench_place(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--policy"), std::string::npos);
}

std::string run(const std::string& cmd, int* status) {
  std::array<char, 4096> buf;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  while (p && fgets(buf.data(), buf.size(), p)) out += buf.data();
  *status = p ? pclose(p) : -1;
  return out;
}

TEST(BenchPlace, CliWritesJsonWithTheDocumentedKeys) {
  int status = 0;
  const std::string out =
      run(std::string(TESSERA_BINARY) + " bench place --nodes 64 --requests 1000 --json - 2>/dev/null", &status);
  ASSERT_EQ(status, 0) << out;
  auto j = nlohmann::json::parse(out);
  for (const char* key : {"placements_per_s", "gang8_p50_us", "gang8_p99_us", "nodes", "gpus"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["gpus"], 64 * 8);
  run(std::string(TESSERA_BINARY) + " bench place --gpus-per-node 0 2>&1", &status);
  EXPECT_NE(status, 0);
}

}  // namespace
}  // namespace tessera::sim
