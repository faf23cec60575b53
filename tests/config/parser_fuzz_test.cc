// A seeded random-mutation fuzz test of the user-facing parsers (job specs in JSON and YAML, the
// cluster configuration), bounded so it runs in CI in a few seconds: valid texts are mutated (bit
// flips, inserted/deleted/duplicated spans, spliced tokens) and parsed. Nothing may throw or crash;
// each result is either an error with a message or a value that survives the canonical round trip.
// Deterministic: a fixed seed and iteration count (the generator is std::mt19937_64, fully specified).
// The libFuzzer targets in fuzz/ explore further (docs/fuzzing.md).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "config/job_spec.h"

namespace tessera::config {
namespace {

const char* kJson = R"({"name": "bert", "queue": "team-a", "project": "nlp", "kind": "training", "tasks": 4,
 "min_tasks": 2, "resources": {"gpus": 8, "gpu_models": ["A100-80GB"], "cpu": 16, "memory": "64Gi"},
 "topology": {"mode": "required", "level": "leaf"},
 "checkpoint": {"interval": 1800, "signal": "SIGUSR1", "grace": 300, "dir": "/ckpt"},
 "expected_runtime": "2h", "max_runtime": 86400, "spot_tolerant": false,
 "command": ["python", "train.py"], "env": {"K": "V"}, "working_dir": "/work"})";

const char* kJsonShare = R"({"name": "s", "queue": "q", "command": ["x"],
 "resources": {"gpu_milli": 500, "gpu_memory": "10Gi", "cpu": "500m", "memory": 1024}})";

const char* kYaml = R"(name: bert
queue: team-a
kind: inference
tasks: 2
resources: {mig: 3g.40gb, cpu: 4, memory: 16Gi}
checkpoint: {interval: 30m, signal: SIGTERM}
command: [python, serve.py, "--port", "8080"]
env: {A: "1"}
)";

const char* kCluster = R"(name: c
levels: [spine, leaf]
nodes:
  - {name: a, count: 2, gpu_model: A100-80GB, gpus: 8, cpu: 64000, memory: 524288, path: [s0, l0]}
  - {name: h, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 64000, memory: 524288, path: [s0, l1], mig_gpus: [0]}
queues:
  - {name: org, guaranteed: {any: 16000}}
  - {name: infer, parent: org, guaranteed: {any: 8000}, weight: 2, priority_classes: [production-inference]}
config: {preset: tessera, backfill: true}
priority_classes: [{name: research, value: 100}, {name: production-inference, value: 1000, preemptible: false}]
policy: best-fit
gpu_models: [{name: X1, memory_mib: 1024}]
)";

const std::vector<std::string> kTokens = {"-1", "\"x\"", "{", "}", "[]", "[", "]", "1e309", "99999999999999999999",
                                          "null", "true", ":", ",", "\n", "  ", "'", "\"", "&a", "*a", "0", "1.5",
                                          "\"\"", "-", "!!str", "#", "\\u0000", "\xff", "18446744073709551616"};

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : size_t(rng_() % n); }

  std::string mutate(std::string s) {
    const int rounds = 1 + int(below(4));
    for (int r = 0; r < rounds; ++r) {
      const size_t pos = below(s.size() + 1);
      switch (below(6)) {
        case 0:  // flip a bit
          if (!s.empty()) s[below(s.size())] ^= char(1u << below(8));
          break;
        case 1:  // insert a random byte
          s.insert(pos, 1, char(below(256)));
          break;
        case 2: {  // delete a span
          const size_t len = 1 + below(8);
          if (pos < s.size()) s.erase(pos, len);
          break;
        }
        case 3: {  // duplicate a span
          if (s.empty()) break;
          const size_t from = below(s.size());
          const size_t len = 1 + below(std::min<size_t>(32, s.size() - from));
          s.insert(pos, s.substr(from, len));
          break;
        }
        case 4:  // splice a token
          s.insert(pos, kTokens[below(kTokens.size())]);
          break;
        default: {  // replace a span by a token
          if (pos < s.size()) s.erase(pos, 1 + below(6));
          s.insert(std::min(pos, s.size()), kTokens[below(kTokens.size())]);
          break;
        }
      }
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

// Checks one job spec result; returns true when it parsed.
bool check_job(const Result<JobSpec>& r, const std::string& input) {
  if (!r.ok()) {
    EXPECT_FALSE(r.error().message.empty()) << input;
    return false;
  }
  const nlohmann::json j = job_spec_to_json(*r);
  auto back = job_spec_from_json(j);
  EXPECT_TRUE(back.ok()) << "canonical form rejected: " << (back.ok() ? "" : back.error().message) << "\ninput: " << input;
  if (back.ok()) {
    EXPECT_TRUE(*back == *r) << "round trip changed the spec; input: " << input;
  }
  return true;
}

TEST(ParserFuzz, JobSpecsSurviveMutations) {
  Mutator m(0x7e55e7a);
  const std::vector<std::string> seeds = {kJson, kJsonShare, kYaml};
  int parsed = 0, errors = 0;
  constexpr int kIterations = 20000;
  for (int i = 0; i < kIterations; ++i) {
    const std::string input = m.mutate(seeds[size_t(i) % seeds.size()]);
    try {
      const bool ok_json = check_job(parse_job_spec_json(input), input);
      const bool ok_yaml = check_job(parse_job_spec_yaml(input), input);
      parsed += ok_json + ok_yaml;
      errors += !ok_json + !ok_yaml;
    } catch (const std::exception& e) {
      FAIL() << "exception escaped: " << e.what() << "\ninput: " << input;
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(parsed, 100) << "mutations should leave some specs valid";
  EXPECT_GT(errors, 100);
}

TEST(ParserFuzz, ClusterConfigsSurviveMutations) {
  Mutator m(0xc105);
  int parsed = 0;
  constexpr int kIterations = 5000;
  for (int i = 0; i < kIterations; ++i) {
    const std::string input = m.mutate(kCluster);
    try {
      auto r = parse_cluster_config_yaml(input);
      if (r.ok()) {
        ++parsed;
        ASSERT_NE(r->catalog, nullptr) << input;
        auto cluster = build_cluster_state(*r);
        EXPECT_TRUE(cluster.ok()) << "validated config does not build: " << cluster.error().message << "\n" << input;
      } else {
        EXPECT_FALSE(r.error().message.empty()) << input;
      }
    } catch (const std::exception& e) {
      FAIL() << "exception escaped: " << e.what() << "\ninput: " << input;
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(parsed, 50);
}

}  // namespace
}  // namespace tessera::config
