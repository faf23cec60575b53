// Conformance: every scenario in tests/scenarios under every policy of the registry. Each step's
// outcome must match, hard constraints (same domain, node count) must hold, and the cluster's
// invariants are checked after every step.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/placement/engine.h"
#include "core/placement/policy.h"
#include "sim/scenario.h"

namespace tessera::sim {
namespace {

std::vector<std::string> scenario_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(TESSERA_SCENARIOS))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

class Conformance : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Conformance, ScenarioHoldsUnderPolicy) {
  const auto& [file, policy_name] = GetParam();
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto sc = parse_scenario(text.str());
  ASSERT_TRUE(sc.ok()) << file << ": " << sc.error().message;
  auto cluster = build_cluster(*sc);
  ASSERT_TRUE(cluster.ok()) << file << ": " << cluster.error().message;
  auto policy = make_policy(policy_name);
  ASSERT_TRUE(policy.ok());
  EngineOptions opts;
  opts.seed = 42;
  PlacementEngine engine(**policy, opts);
  std::map<std::string, std::vector<TaskPlacement>> live;
  for (size_t i = 0; i < sc->steps.size(); ++i) {
    const ScenarioStep& st = sc->steps[i];
    const std::string where = sc->name + " step " + std::to_string(i) + " (" + st.id + st.release + ") under " + policy_name;
    if (!st.release.empty()) {
      ASSERT_TRUE(live.count(st.release)) << where << ": nothing placed under that id";
      for (auto& p : live[st.release]) ASSERT_TRUE(cluster->release(p).ok()) << where;
      live.erase(st.release);
    } else {
      PlacementResult r = engine.place_and_commit(*cluster, *st.gang);
      ASSERT_EQ(outcome_name(r.outcome), std::string(outcome_name(*st.expect))) << where << ": " << r.reason;
      if (!st.reason_contains.empty()) {
        EXPECT_NE(r.reason.find(st.reason_contains), std::string::npos) << where << ": " << r.reason;
      }
      if (r.outcome == Outcome::kPlaced) {
        EXPECT_GE(int(r.tasks.size()), st.gang->required_tasks()) << where;
        std::set<uint32_t> nodes, domains;
        for (auto& t : r.tasks) nodes.insert(t.node.value);
        if (st.max_nodes > 0) {
          EXPECT_LE(int(nodes.size()), st.max_nodes) << where;
        }
        if (!st.same_level.empty()) {
          auto li = cluster->network().level_index(st.same_level);
          ASSERT_TRUE(li.ok()) << where;
          for (uint32_t n : nodes)
            domains.insert(*li == cluster->network().count() ? n : cluster->node(NodeId(n)).path[*li]);
          EXPECT_EQ(domains.size(), 1u) << where << ": tasks span " << domains.size() << " " << st.same_level << "s";
        }
        if (!st.id.empty()) live[st.id] = r.tasks;
      } else {
        EXPECT_FALSE(r.reason.empty()) << where;
      }
    }
    Status inv = cluster->check_invariants();
    ASSERT_TRUE(inv.ok()) << where << ": " << inv.message();
  }
}

std::string param_name(const ::testing::TestParamInfo<Conformance::ParamType>& info) {
  std::string s = std::filesystem::path(std::get<0>(info.param)).stem().string() + "_" + std::get<1>(info.param);
  for (char& c : s)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, Conformance,
                         ::testing::Combine(::testing::ValuesIn(scenario_files()), ::testing::ValuesIn(policy_names())),
                         param_name);

TEST(ScenarioParse, ErrorsNameTheField) {
  auto r = parse_scenario(R"({"nodes": [{"name": "a", "gpus": "eight"}], "steps": []})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("scenario.nodes[0].gpus: must be an integer"), std::string::npos)
      << r.error().message;
  r = parse_scenario(R"({"nodes": [{"name": "a", "cpu": 1000}], "steps": [{"gang": {"tasks": 0}, "expect": "placed"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("scenario.steps[0].gang: gang.tasks"), std::string::npos) << r.error().message;
  r = parse_scenario(R"({"nodes": [{"name": "a"}], "steps": [{"gang": {}, "expect": "maybe"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("expect"), std::string::npos);
  EXPECT_FALSE(parse_scenario("not json").ok());
}

}  // namespace
}  // namespace tessera::sim
