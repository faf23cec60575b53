// Every timed scheduling scenario in tests/scenarios/schedule must pass: expectations met and
// invariants intact after every event.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/schedule_sim.h"

namespace tessera::sim {
namespace {

std::vector<std::string> files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SCENARIOS) + "/schedule"))
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

class ScheduleScenarios : public ::testing::TestWithParam<std::string> {};

TEST_P(ScheduleScenarios, Passes) {
  std::ifstream in(GetParam());
  std::stringstream text;
  text << in.rdbuf();
  auto sc = parse_schedule_scenario(text.str());
  ASSERT_TRUE(sc.ok()) << GetParam() << ": " << sc.error().message;
  EXPECT_FALSE(sc->expect.empty());
  auto r = run_schedule_scenario(*sc);
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::string log;
  for (const auto& l : r->log) log += "  " + l + "\n";
  for (const auto& f : r->failures) ADD_FAILURE() << GetParam() << ": " << f << "\nevents:\n" << log;
}

INSTANTIATE_TEST_SUITE_P(All, ScheduleScenarios, ::testing::ValuesIn(files()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = std::filesystem::path(i.param).stem().string();
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(ScheduleScenarioParse, ErrorsNameTheField) {
  auto r = parse_schedule_scenario("nodes: [{name: n, gpus: eight}]\njobs: []\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "nodes[0].gpus: wrong type");
  r = parse_schedule_scenario("nodes: [{name: n}]\njobs: [{name: j, gpus: 1}]\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "jobs[0].duration: required");
  r = parse_schedule_scenario("nodes: [{name: n}]\njobs: [{name: j, duration: 5}]\nexpect: [{at: 1, running: k}]\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unknown job \"k\""), std::string::npos);
  r = parse_schedule_scenario("nodes: [{name: n}]\njobs: [{name: j, duration: 5, topology: \"leaf\"}]\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("jobs[0].topology"), std::string::npos);
  EXPECT_FALSE(parse_schedule_scenario("{").ok());
}

}  // namespace
}  // namespace tessera::sim
