// Every timed scheduling scenario in tests/scenarios/schedule must pass: expectations met and
// invariants intact after every event.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenario_test_util.h"
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


TEST(ScheduleScenarioParse, ConfigAndClassErrorsNameTheFieldAndTheChoices) {
  const std::string base = "nodes: [{name: n, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}]\n";
  auto err = [&](const std::string& extra) {
    auto r = parse_schedule_scenario(base + extra);
    return r.ok() ? std::string("(parsed)") : r.error().message;
  };
  EXPECT_EQ(err("config: {order: xyz}\njobs: []\n"),
            "config.order: unknown \"xyz\"; expected one of fair-share, fifo, multifactor, least-attained, drf");
  EXPECT_NE(err("config: {preset: nope}\njobs: []\n").find("config.preset: unknown \"nope\"; expected one of tessera, fifo-gang"),
            std::string::npos);
  EXPECT_NE(err("config: {backfil: true}\njobs: []\n").find("config.backfil: unknown field"), std::string::npos);
  EXPECT_NE(err("config: {mig: {cost: 3}}\njobs: []\n").find("config.mig.cost: unknown field"), std::string::npos);
  EXPECT_EQ(err("config: {reclaim_grace: -1}\njobs: []\n"), "config.reclaim_grace: must be >= 0, got -1");
  EXPECT_EQ(err("config: {usage_half_life: 0}\njobs: []\n"), "config.usage_half_life: must be > 0 seconds");
  EXPECT_EQ(err("config: {strict_order: maybe}\njobs: []\n"), "config.strict_order: wrong type");
  EXPECT_EQ(err("config: {max_moves_per_cycle: -2}\njobs: []\n"), "config.max_moves_per_cycle: must be >= 0");
  EXPECT_EQ(err("config: {defragment: often}\njobs: []\n"), "config.defragment: wrong type");
  EXPECT_EQ(err("priority_classes: [{name: a, value: 1}, {name: a, value: 2}]\njobs: []\n"),
            "priority_classes[1].name: \"a\" used twice");
  EXPECT_EQ(err("priority_classes: [{name: a}]\njobs: []\n"), "priority_classes[0].value: required");
  // Custom classes replace the defaults: "research" (the default class of a job) is gone.
  EXPECT_EQ(err("priority_classes: [{name: gold, value: 10}, {name: tin, value: 1}]\njobs: [{name: j, duration: 5}]\n"),
            "jobs[0].class: unknown \"research\"; expected one of gold, tin");
  EXPECT_EQ(err("jobs: [{name: j, duration: 5, class: vip}]\n"),
            "jobs[0].class: unknown \"vip\"; expected one of production-inference, production-training, research, "
            "preemptible");
  EXPECT_EQ(err("usage: {nobody: 5}\njobs: []\n"), "usage.nobody: unknown queue");
  EXPECT_EQ(err("jobs: [{name: j, duration: 5, max_runtime: -3}]\n"), "jobs[0].max_runtime: must be >= 0, got -3");
  EXPECT_EQ(err("jobs: [{name: j, duration: 5}]\nexpect: [{at: 1, running: j, estimated_start: 5}]\n"),
            "expect[0].estimated_start: only with pending");
  EXPECT_EQ(err("jobs: [{name: j, duration: 5}]\nexpect: [{at: 1, preemptions: {j: x}}]\n"),
            "expect[0].preemptions.j: must be an integer");
  EXPECT_EQ(err("jobs: [{name: j, duration: 5}]\nexpect: [{at: 1, mig_gpus: -1}]\n"), "expect[0].mig_gpus: must be >= 0");
  // A preset, then fields over it; the top-level policy still picks the placement policy.
  auto r = parse_schedule_scenario(base + "config: {preset: fifo-gang, backfill: true}\npolicy: best-fit\njobs: []\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->config.order, JobOrder::kFifo);
  EXPECT_TRUE(r->config.strict_order);
  EXPECT_TRUE(r->config.backfill);
  EXPECT_EQ(r->config.policy, "best-fit");
  EXPECT_FALSE(r->config.defragment) << "the baselines' presets do not move jobs";
  r = parse_schedule_scenario(base + "config: {defragment: false, max_moves_per_cycle: 3}\njobs: []\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->config.defragment);
  EXPECT_EQ(r->config.max_moves_per_cycle, 3);
  EXPECT_TRUE(SchedulerConfig{}.defragment) << "on by default";
  EXPECT_EQ(err("config: {gather_spread: sometimes}\njobs: []\n"), "config.gather_spread: wrong type");
  r = parse_schedule_scenario(base + "config: {gather_spread: false}\njobs: []\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->config.gather_spread);
  EXPECT_TRUE(SchedulerConfig{}.gather_spread) << "on by default";
  EXPECT_EQ(err("config: {victims_least_attained: 1h}\njobs: []\n"), "config.victims_least_attained: wrong type");
  r = parse_schedule_scenario(base + "config: {victims_least_attained: true}\njobs: []\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->config.victims_least_attained);
  EXPECT_FALSE(SchedulerConfig{}.victims_least_attained) << "least lost work alone by default";
  EXPECT_EQ(err("config: {reservation_hold: always}\njobs: []\n"),
            "config.reservation_hold: unknown \"always\"; expected one of made, due, off");
  r = parse_schedule_scenario(base + "config: {reservation_hold: due}\njobs: []\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->config.reservation_hold, ReservationHold::kAtDue);
  EXPECT_EQ(err("config: {reservation_slip: -1}\njobs: []\n"), "config.reservation_slip: must be >= 0, got -1");
  r = parse_schedule_scenario(base + "config: {reservation_slip: 3600}\njobs: []\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->config.reservation_slip, 3600);
  EXPECT_EQ(SchedulerConfig{}.reservation_slip, 0) << "no bound by default";
  EXPECT_EQ(SchedulerConfig{}.reservation_hold, ReservationHold::kFromMade) << "holds from when it is made by default";
}

using tessera::sim::testing::any_contains;
using tessera::sim::testing::run_text;

TEST(ScheduleScenarioRun, GuaranteeInvariantFailsWhenReclaimCannotHappen) {
  // Reclaim is on but no preemption may happen in a cycle: the owner waits past the deadline.
  const std::string text = R"(
config: {max_preemptions_per_cycle: 0, reclaim_grace: 100}
nodes: [{name: n, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}]
queues:
  - {name: owner, guaranteed: {H100-80GB-SXM: 4000}}
  - {name: borrower}
jobs:
  - {name: b, at: 0, queue: borrower, gpus: 8, duration: 5000}
  - {name: o, at: 100, queue: owner, gpus: 4, duration: 100}
expect:
  - {at: 1000, running: [b]}
)";
  ScheduleRunResult r = run_text(text);
  ASSERT_TRUE(any_contains(r.failures, "guarantee not restored: queue owner has started nothing since t=100 (deadline t=261)"))
      << (r.failures.empty() ? "no failures" : r.failures.front());
  // With check_guarantees off the same run passes.
  r = run_text("check_guarantees: false\n" + text);
  EXPECT_TRUE(r.failures.empty()) << r.failures.front();
}

TEST(ScheduleScenarioRun, GuaranteeInvariantJudgesShapesWithThePlacementEngine) {
  // The owner's job fits its unused guarantee by quota arithmetic, and each task fits an empty node,
  // but two 8-GPU tasks need two 8-GPU nodes: even with the borrower's job gone the placement engine
  // cannot place it, so reclaim could not restore the guarantee and nothing is reported.
  const std::string shape = R"(
config: {max_preemptions_per_cycle: 0, reclaim_grace: 100}
nodes:
  - {name: big, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}
  - {name: small, gpu_model: H100-80GB-SXM, gpus: 4, cpu: 1000, memory: 1000}
queues:
  - {name: owner, guaranteed: {any: 16000}}
  - {name: borrower}
jobs:
  - {name: b, at: 0, queue: borrower, gpus: 8, duration: 5000}
)";
  const std::string until = "expect:\n  - {at: 1000, running: [b]}\n";
  ScheduleRunResult r = run_text(shape + "  - {name: o, at: 100, queue: owner, gpus: 8, tasks: 2, duration: 100}\n" + until);
  EXPECT_TRUE(r.failures.empty()) << r.failures.front();
  // One 8-GPU task does fit once the borrower's job is gone: the same run without reclaim is caught.
  r = run_text(shape + "  - {name: o, at: 100, queue: owner, gpus: 8, duration: 100}\n" + until);
  EXPECT_TRUE(any_contains(r.failures, "guarantee not restored: queue owner has started nothing since t=100 (deadline t=261)"))
      << (r.failures.empty() ? "no failures" : r.failures.front());
}

TEST(ScheduleScenarioRun, TimedOutIsNotFinished) {
  ScheduleRunResult r = run_text(R"(
nodes: [{name: n, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}]
jobs:
  - {name: j, at: 0, gpus: 8, duration: 500, max_runtime: 100}
expect:
  - {at: 100, finished: j}
  - {at: 100, timed_out: j}
)");
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0], "expect[0] (t=100): j timed out, it did not finish");
  EXPECT_TRUE(any_contains(r.log, "t=100 timed out j after its max_runtime of 100s"));
}

TEST(ScheduleScenarioRun, CheckpointNotFinishedByEvictByKeepsOnlyPeriodicWork) {
  // Reclaim grace 50 < save cost 100: evicted at t=1050 with the t=900 periodic checkpoint only.
  ScheduleRunResult r = run_text(R"(
config: {reclaim_grace: 50}
nodes: [{name: n, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}]
queues:
  - {name: owner, guaranteed: {H100-80GB-SXM: 8000}}
  - {name: borrower}
jobs:
  - {name: b, at: 0, queue: borrower, gpus: 8, duration: 5000, checkpoint: {interval: 300, save_cost: 100, restart_cost: 0}}
  - {name: o, at: 1000, queue: owner, gpus: 8, duration: 100}
expect:
  - {at: 1000, preempted: b}
  - {at: 1050, running: [o]}
)");
  EXPECT_TRUE(r.failures.empty()) << r.failures.front();
  EXPECT_TRUE(any_contains(r.log, "t=1050 preempted b left without a new checkpoint, resumes from 900s of work"));
}

}  // namespace
}  // namespace tessera::sim
