// The scenario format's strictness (unknown fields are errors) and its adversarial parts: timed
// cluster events (node down/up, cordon, drain, GPU health), placement expectations, bounds over a
// window, and a job's last checkpoint time (docs/scenarios.md). Each test asserts on the real run.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "scenario_test_util.h"
#include "sim/schedule_sim.h"

namespace tessera::sim {
namespace {

std::string parse_error(const std::string& text) {
  auto r = parse_schedule_scenario(text);
  return r.ok() ? std::string("(parsed)") : r.error().message;
}

using tessera::sim::testing::any_contains;
using tessera::sim::testing::run_text;

std::string all(const ScheduleRunResult& r) {
  std::string s;
  for (const std::string& f : r.failures) s += "  failure: " + f + "\n";
  for (const std::string& l : r.log) s += "  " + l + "\n";
  return s;
}

const std::string kNode = "nodes: [{name: n, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}]\n";

TEST(ScheduleScenarioStrict, UnknownFieldsNameTheKeyAndWhere) {
  EXPECT_EQ(parse_error(kNode + "jobs: [{name: a, duration: 5}, {name: b, duration: 5, expected_runtme: 9}]\n")
                .rfind("jobs[1].expected_runtme: unknown field; expected one of name, job_name, at,", 0),
            0u);
  EXPECT_EQ(parse_error(kNode + "jobs: [{name: a, duration: 5}]\nexpect: [{at: 1, pending: a, reasn: quota}]\n")
                .rfind("expect[0].reasn: unknown field; expected one of at, running, pending,", 0),
            0u);
  EXPECT_EQ(parse_error(kNode + "jobs: [{name: a, duration: 5}]\nexpcet: [{at: 1, running: a}]\n")
                .rfind("scenario.expcet: unknown field; expected one of name, levels, nodes,", 0),
            0u);
  EXPECT_EQ(parse_error(kNode + "jobs: [{name: a, duration: 5, checkpoint: {intervall: 300}}]\n"),
            "jobs[0].checkpoint.intervall: unknown field; expected one of interval, save_cost, restart_cost, grace, "
            "last_at");
  EXPECT_EQ(parse_error(kNode + "jobs: []\nevents: [{at: 5, node_dwn: n}]\n").rfind("events[0].node_dwn: unknown field", 0), 0u);
  EXPECT_EQ(parse_error(kNode + "jobs: []\nevents: [{at: 5, gpu_unhealthy: {node: n, index: 2}}]\n"),
            "events[0].gpu_unhealthy.index: unknown field; expected one of node, gpu");
  // The cluster file's sections the scenario runner does not use are unknown here, not silently ignored.
  EXPECT_EQ(parse_error(kNode + "jobs: []\nautoscaling: {enabled: true}\n").rfind("scenario.autoscaling: unknown field", 0), 0u);
  // A correct file still parses.
  EXPECT_EQ(parse_error(kNode + "jobs: [{name: a, duration: 5, checkpoint: {interval: 300, last_at: 10}}]\n"), "(parsed)");
}

TEST(ScheduleScenarioStrict, EventAndExpectationErrorsNameTheField) {
  const std::string job = "jobs: [{name: a, duration: 5}]\n";
  EXPECT_EQ(parse_error(kNode + job + "events: [{at: 5, node_down: m}]\n"),
            "events[0].node_down: unknown node \"m\"; nodes are n");
  EXPECT_EQ(parse_error(kNode + job + "events: [{at: 5, gpu_unhealthy: {node: n, gpu: 8}}]\n"),
            "events[0].gpu_unhealthy.gpu: node n has GPUs 0..7, not 8");
  EXPECT_EQ(parse_error(kNode + job + "events: [{at: 5, cordon: n, drain: n}]\n"),
            "events[0]: needs exactly one of node_down, node_up, cordon, uncordon, drain, gpu_unhealthy, gpu_healthy");
  EXPECT_EQ(parse_error(kNode + job + "events: [{node_up: n}]\n"), "events[0].at: required");
  EXPECT_EQ(parse_error(kNode + job + "expect: [{at: 5, placed: a}]\n"),
            "expect[0]: placed needs at least one of on_node, in_leaf, on_model, on_nodes, task_gpus");
  EXPECT_EQ(parse_error(kNode + job + "expect: [{at: 5, running: a, on_node: n}]\n"), "expect[0].on_node: only with placed");
  EXPECT_EQ(parse_error(kNode + job + "expect: [{at: 5, placed: a, in_leaf: l9}]\n"),
            "expect[0].in_leaf: \"l9\" is on no node's path");
  EXPECT_NE(parse_error(kNode + job + "expect: [{at: 5, placed: a, on_model: H200-NOPE}]\n").find("expect[0].on_model: "),
            std::string::npos);
  EXPECT_EQ(parse_error(kNode + job + "expect: [{at: 5, placed: a, on_nodes: 0}]\n"), "expect[0].on_nodes: must be >= 1");
  EXPECT_EQ(parse_error(kNode + job + "expect: [{at: 5, running: a, since: 1}]\n"),
            "expect[0].since: only with preemptions_at_most or mig_changes_at_most");
  EXPECT_EQ(parse_error(kNode + job + "expect: [{at: 5, preemptions_at_most: 1, since: 5}]\n"),
            "expect[0].since: must be before at (5)");
  EXPECT_EQ(parse_error(kNode + job + "expect: [{at: 5, mig_changes_at_most: -1}]\n"),
            "expect[0].mig_changes_at_most: must be >= 0");
  EXPECT_EQ(parse_error(kNode + "jobs: [{name: a, duration: 5, checkpoint: {last_at: -4}}]\n"),
            "jobs[0].checkpoint.last_at: must be >= 0, got -4");
  // An aliased model name is accepted and stored canonical.
  auto r = parse_schedule_scenario(kNode + job + "expect: [{at: 5, placed: a, on_model: H100-80GB-SXM, on_nodes: 1}]\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->expect[0].on_model, "H100-80GB-SXM");
}

// Nodes a and b (8 GPUs each). b is down from t=0, so j starts on a; at 2500 b comes up and a fails:
// j is lost, keeps the 2000 s it had checkpointed, restarts on b (paying its 100 s restart cost) and
// finishes at 2500 + 100 + 3000 = 5600 instead of 5000.
const std::string kTwoNodes = R"(
nodes:
  - {name: a, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}
  - {name: b, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 1000, memory: 1000}
)";

TEST(ScheduleScenarioEvents, NodeDownRequeuesTheJobWhichRestartsElsewhereFromItsCheckpoint) {
  const std::string jobs = R"(
jobs:
  - {name: j, at: 0, gpus: 8, duration: 5000, checkpoint: {interval: 1000, save_cost: 30, restart_cost: 100}}
)";
  ScheduleRunResult r = run_text(kTwoNodes + jobs + R"(
events:
  - {at: 0, node_down: b}
  - {at: 2500, node_up: b}
  - {at: 2500, node_down: a}
expect:
  - {at: 0, placed: j, on_node: a}
  - {at: 2500, placed: j, on_node: b}
  - {at: 5599, running: [j]}
  - {at: 5600, finished: j}
  - {at: 5600, preemptions: {j: 0}}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_EQ(r.lost, 1);
  EXPECT_TRUE(any_contains(r.log, "t=2500 lost j (node a down), resumes from 2000s of work")) << all(r);
  // Without the failure it finishes at 5000: the expectation at 5600 would not hold.
  r = run_text(kTwoNodes + jobs + "events: [{at: 0, node_down: b}]\nexpect: [{at: 5000, finished: j}, {at: 2500, placed: j, on_node: b}]\n");
  ASSERT_EQ(r.failures.size(), 1u) << all(r);
  EXPECT_EQ(r.failures[0], "expect[1] (t=2500): j has a task on node a");
  EXPECT_EQ(r.lost, 0);
}

TEST(ScheduleScenarioEvents, NodeDownWithNowhereElseLeavesTheJobPendingUntilTheNodeIsBack) {
  ScheduleRunResult r = run_text(kNode + R"(
jobs:
  - {name: j, at: 0, gpus: 8, duration: 1000}
events:
  - {at: 400, node_down: n}
  - {at: 900, node_up: n}
expect:
  - {at: 400, pending: j}
  - {at: 899, pending: j}
  - {at: 900, running: [j]}
  - {at: 2020, finished: j}
)");
  // It never checkpointed: all 400 s are lost; restart cost 120 (the default) after a loss.
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_TRUE(any_contains(r.log, "t=400 lost j (node n down), resumes from 0s of work")) << all(r);
}

TEST(ScheduleScenarioEvents, EventsApplyAfterTheCompletionsAtTheirTime) {
  // j's work ends at t=1000, when its node fails: it has finished, it is not lost.
  ScheduleRunResult r = run_text(kNode + R"(
jobs:
  - {name: j, at: 0, gpus: 8, duration: 1000}
events:
  - {at: 1000, node_down: n}
expect:
  - {at: 1000, finished: j}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_EQ(r.lost, 0);
  // One second earlier it is lost.
  r = run_text(kNode + R"(
jobs:
  - {name: j, at: 0, gpus: 8, duration: 1000}
events:
  - {at: 999, node_down: n}
expect:
  - {at: 1000, finished: j}
)");
  ASSERT_EQ(r.failures.size(), 1u) << all(r);
  EXPECT_EQ(r.failures[0], "expect[0] (t=1000): j has not finished");
  EXPECT_EQ(r.lost, 1);
}

TEST(ScheduleScenarioEvents, CordonKeepsNewJobsOffButRunningOnesRun) {
  // b is cordoned at 0, so r starts on a; at 5 a is cordoned and b uncordoned: x goes to b, r runs on
  // (cordoned) a until it finishes at 1000; y waits, also after a is free, until a is uncordoned.
  const std::string jobs = R"(
jobs:
  - {name: r, at: 0, gpus: 8, duration: 1000}
  - {name: x, at: 10, gpus: 8, duration: 5000}
  - {name: y, at: 20, gpus: 8, duration: 100}
)";
  const std::string expect = R"(
expect:
  - {at: 0, placed: r, on_node: a}
  - {at: 10, placed: x, on_node: b}
  - {at: 999, running: [r, x]}
  - {at: 1000, finished: r}
  - {at: 1000, pending: y}
  - {at: 1199, pending: y}
  - {at: 1200, placed: y, on_node: a}
)";
  ScheduleRunResult r = run_text(kTwoNodes + jobs + R"(
events:
  - {at: 0, cordon: b}
  - {at: 5, cordon: a}
  - {at: 5, uncordon: b}
  - {at: 1200, uncordon: a}
)" + expect);
  EXPECT_TRUE(r.failures.empty()) << all(r);
  // Without the cordon on a, y starts there as soon as r is done.
  r = run_text(kTwoNodes + jobs + R"(
events:
  - {at: 0, cordon: b}
  - {at: 5, uncordon: b}
)" + expect);
  EXPECT_EQ(r.failures.size(), 3u) << all(r);
  EXPECT_TRUE(any_contains(r.failures, "expect[4] (t=1000): y is running, not pending")) << all(r);
}

TEST(ScheduleScenarioEvents, DrainCheckpointsRunningJobsAndRequeuesThem) {
  // As `tessera drain`: r (checkpoint every 300 s, 60 s to save) is asked to checkpoint at 1000,
  // leaves at 1060 keeping the 1000 s of work it saved, restarts on b (restart cost 120) and finishes
  // at 1060 + 120 + 2000 = 3180. The draining node takes no new work (late waits). A drain is not a
  // preemption decision.
  ScheduleRunResult r = run_text(kTwoNodes + R"(
jobs:
  - {name: r, at: 0, gpus: 8, duration: 3000, checkpoint: {interval: 300, save_cost: 60, restart_cost: 120, grace: 300}}
  - {name: late, at: 1100, gpus: 8, duration: 100}
events:
  - {at: 0, cordon: b}
  - {at: 1000, uncordon: b}
  - {at: 1000, drain: a}
expect:
  - {at: 0, placed: r, on_node: a}
  - {at: 1059, placed: r, on_node: a}
  - {at: 1060, placed: r, on_node: b}
  - {at: 1100, pending: late}
  - {at: 3179, running: [r]}
  - {at: 3180, finished: r}
  - {at: 3180, preemptions: {r: 0}}
  - {at: 3180, preemptions_at_most: 0}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_TRUE(any_contains(r.log, "t=1060 drained r left after its checkpoint, resumes from 1000s of work")) << all(r);
  // A job that does not checkpoint leaves at once and loses its work.
  r = run_text(kTwoNodes + R"(
jobs:
  - {name: r, at: 0, gpus: 8, duration: 3000, checkpoint: {interval: 0, restart_cost: 120}}
events:
  - {at: 0, cordon: b}
  - {at: 1000, uncordon: b}
  - {at: 1000, drain: a}
expect:
  - {at: 1000, placed: r, on_node: b}
  - {at: 4120, finished: r}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_TRUE(any_contains(r.log, "t=1000 drained r left without a new checkpoint, resumes from 0s of work")) << all(r);
}

TEST(ScheduleScenarioEvents, UnhealthyGpuLosesItsJobAndIsNotCapacityUntilHealthy) {
  ScheduleRunResult r = run_text(kNode + R"(
jobs:
  - {name: big, at: 0, gpus: 8, duration: 1000, checkpoint: {interval: 100, restart_cost: 0}}
  - {name: one, at: 200, gpus: 1, duration: 100}
events:
  - {at: 150, gpu_unhealthy: {node: n, gpu: 3}}
  - {at: 600, gpu_healthy: {node: n, gpu: 3}}
expect:
  - {at: 150, pending: big}
  - {at: 599, pending: big}
  - {at: 200, running: [one]}
  - {at: 600, running: [big]}
  - {at: 1500, finished: big}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_TRUE(any_contains(r.log, "t=150 lost big (node n GPU 3 unhealthy), resumes from 100s of work")) << all(r);
  // A job on other GPUs of the node is not touched.
  r = run_text(kNode + R"(
jobs:
  - {name: small, at: 0, gpus: 2, duration: 1000}
events:
  - {at: 150, gpu_unhealthy: {node: n, gpu: 7}}
expect:
  - {at: 150, running: [small]}
  - {at: 1000, finished: small}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_EQ(r.lost, 0);
}

// Two leaves: H100 nodes h-0, h-1 on leaf-h; A100 nodes a-0, a-1 on leaf-a.
const std::string kLeaves = R"(
levels: [spine, leaf]
nodes:
  - {name: h, count: 2, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 128000, memory: 1048576, path: [s0, leaf-h]}
  - {name: a, count: 2, gpu_model: A100-80GB, gpus: 8, cpu: 128000, memory: 1048576, path: [s0, leaf-a]}
jobs:
  - {name: gang, at: 0, tasks: 2, gpus: 8, models: [H100-80GB-SXM], topology: "required:leaf", duration: 1000}
)";

TEST(ScheduleScenarioPlacement, PassesWhenThePlacementHasTheProperty) {
  ScheduleRunResult r = run_text(kLeaves + R"(
expect:
  - {at: 0, placed: gang, in_leaf: leaf-h, on_model: H100-80GB-SXM, on_nodes: 2, on_node: [h-0, h-1]}
  - {at: 0, placed: gang, in_leaf: s0}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
}

TEST(ScheduleScenarioPlacement, FailsNamingWhatDiffers) {
  ScheduleRunResult r = run_text(kLeaves + R"(
expect:
  - {at: 0, placed: gang, in_leaf: leaf-a}
  - {at: 0, placed: gang, on_model: A100-80GB}
  - {at: 0, placed: gang, on_nodes: 1}
  - {at: 0, placed: gang, on_node: a-0}
  - {at: 1000, placed: gang, on_nodes: 2}
)");
  ASSERT_EQ(r.failures.size(), 5u) << all(r);
  EXPECT_EQ(r.failures[0], "expect[0] (t=0): gang has a task on node h-0 (path s0/leaf-h), not in leaf-a");
  EXPECT_EQ(r.failures[1], "expect[1] (t=0): gang holds H100-80GB-SXM GPU 0 on node h-0, not A100-80GB");
  EXPECT_EQ(r.failures[2], "expect[2] (t=0): gang spans 2 nodes, not 1");
  EXPECT_EQ(r.failures[3], "expect[3] (t=0): gang has a task on node h-0");
  EXPECT_EQ(r.failures[4], "expect[4] (t=1000): gang has finished, it holds no GPUs");
}

// low (preemptible) holds the node; hi1 (inference) preempts it at 100, hi2 again at 2000: the only
// preemption decisions.
const std::string kTwoPreemptions = kNode + R"(
jobs:
  - {name: low, at: 0, class: preemptible, gpus: 8, duration: 100000}
  - {name: hi1, at: 100, class: production-inference, gpus: 8, duration: 1000}
  - {name: hi2, at: 2000, class: production-inference, gpus: 8, duration: 1000}
)";

TEST(ScheduleScenarioBounds, PreemptionsAtMostCountsDecisionsInTheWindow) {
  ScheduleRunResult r = run_text(kTwoPreemptions + R"(
expect:
  - {at: 100, preempted: low}
  - {at: 2000, preempted: low}
  - {at: 3000, preemptions: {low: 2}}
  - {at: 3000, preemptions_at_most: 2}
  - {at: 3000, preemptions_at_most: 1, since: 100}
  - {at: 1999, preemptions_at_most: 0, since: 100}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_EQ(r.preemptions, 2);
  r = run_text(kTwoPreemptions + R"(
expect:
  - {at: 3000, preemptions_at_most: 1}
  - {at: 2000, preemptions_at_most: 0, since: 99}
)");
  ASSERT_EQ(r.failures.size(), 2u) << all(r);
  EXPECT_EQ(r.failures[0], "expect[1] (t=2000): 2 preemptions since t=99, more than 0");
  EXPECT_EQ(r.failures[1], "expect[0] (t=3000): 2 preemptions, more than 1");
}

TEST(ScheduleScenarioBounds, MigChangesAtMostCountsLayoutChanges) {
  // One inference job asks for a MIG slice at t=0: one GPU changes layout at 0, none after.
  const std::string base = R"(
config: {mig: {reconfigure_cost: 60, min_layout_age: 1000}}
nodes: [{name: a, gpu_model: A100-40GB, gpus: 2, cpu: 128000, memory: 1048576}]
jobs:
  - {name: inf, at: 0, class: production-inference, mig: "1g", duration: 200}
)";
  ScheduleRunResult r = run_text(base + R"(
expect:
  - {at: 0, mig_gpus: 1}
  - {at: 0, mig_changes_at_most: 1}
  - {at: 500, mig_changes_at_most: 0, since: 0}
)");
  EXPECT_TRUE(r.failures.empty()) << all(r);
  r = run_text(base + "expect: [{at: 500, mig_changes_at_most: 0}]\n");
  ASSERT_EQ(r.failures.size(), 1u) << all(r);
  EXPECT_EQ(r.failures[0], "expect[0] (t=500): 1 MIG layout changes, more than 0");
}

// Two jobs that do not checkpoint periodically; each saved once (last_at). The inference job at 7200
// needs 4 GPUs: the scheduler takes the one that loses least work, which follows last_at.
std::string last_at_scenario(Time a_last, Time b_last) {
  return R"(
nodes: [{name: n, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 128000, memory: 1048576}]
jobs:
  - {name: a, at: 0, class: preemptible, gpus: 4, duration: 100000, checkpoint: {last_at: )" + std::to_string(a_last) + R"(}}
  - {name: b, at: 0, class: preemptible, gpus: 4, duration: 100000, checkpoint: {last_at: )" + std::to_string(b_last) + R"(}}
  - {name: urgent, at: 7200, class: production-inference, gpus: 4, duration: 600}
expect:
  - {at: 7200, preempted: a}
  - {at: 7200, not_preempted: b}
)";
}

TEST(ScheduleScenarioCheckpoint, LastAtIsTheCheckpointTheSchedulerAndTheRunUse) {
  ScheduleRunResult r = run_text(last_at_scenario(7000, 1000));
  EXPECT_TRUE(r.failures.empty()) << all(r);
  EXPECT_TRUE(any_contains(r.log, "t=7200 preempted a left without a new checkpoint, resumes from 7000s of work")) << all(r);
  // Swapped: b checkpointed more recently, so b is the victim and the expectations fail.
  r = run_text(last_at_scenario(1000, 7000));
  ASSERT_EQ(r.failures.size(), 2u) << all(r);
  EXPECT_EQ(r.failures[0], "expect[0] (t=7200): a was not preempted");
  EXPECT_TRUE(any_contains(r.log, "t=7200 preempted b left without a new checkpoint, resumes from 7000s of work")) << all(r);
}


// Per-task requests that differ: `tasks` as a list of sizes, and `task_gpus` on a placed expectation.
TEST(ScheduleScenarioTasks, ListedTaskSizesParseStrictlyAndReachTheGang) {
  const std::string node2 = "nodes: [{name: n, count: 2, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 64000, memory: 65536}]\n";
  auto sc = parse_schedule_scenario(node2 + "jobs: [{name: a, duration: 5, gpus: 8, cpu: 1000, tasks: [{gpus: 0, cpu: 500}, {}, {gpus: 2}]}]\n");
  ASSERT_TRUE(sc.ok()) << sc.error().message;
  const Gang& g = sc->jobs[0].gang;
  EXPECT_EQ(g.tasks, 3);
  EXPECT_EQ(g.request(0).gpu_count, 0);
  EXPECT_EQ(g.request(0).cpu.v, 500);
  EXPECT_EQ(g.request(1).gpu_count, 8);
  EXPECT_EQ(g.request(1).cpu.v, 1000);
  EXPECT_EQ(g.request(2).gpu_count, 2);
  EXPECT_EQ(parse_error(node2 + "jobs: [{name: a, duration: 5, tasks: []}]\n"),
            "jobs[0].tasks: an empty list; give one entry per task");
  EXPECT_EQ(parse_error(node2 + "jobs: [{name: a, duration: 5, tasks: [{gpu: 1}]}]\n"),
            "jobs[0].tasks[0].gpu: unknown field; expected one of gpus, cpu, memory");
  EXPECT_EQ(parse_error(node2 + "jobs: [{name: a, duration: 5, tasks: [{gpus: 4294967297}]}]\n"),
            "jobs[0].tasks[0].gpus: must be in 0..16 (one node), got 4294967297");
  EXPECT_EQ(parse_error(node2 + "jobs: [{name: a, duration: 5, tasks: [3]}]\n"),
            "jobs[0].tasks[0]: expected a map with gpus, cpu, memory");
  EXPECT_NE(parse_error(node2 + "jobs: [{name: a, duration: 5, mig: 1g.10gb, tasks: [{}, {}]}]\n").find("whole GPUs or none"),
            std::string::npos);
  EXPECT_NE(parse_error(node2 + "jobs: [{name: a, duration: 5, min_tasks: 1, tasks: [{gpus: 1}, {gpus: 2}]}]\n").find("min_tasks"),
            std::string::npos);
  const std::string job = "jobs: [{name: a, duration: 5, tasks: [{gpus: 1}, {gpus: 2}]}]\n";
  EXPECT_EQ(parse_error(node2 + job + "expect: [{at: 0, placed: a, task_gpus: []}]\n"),
            "expect[0].task_gpus: give the GPUs of every task, in task order");
  EXPECT_EQ(parse_error(node2 + job + "expect: [{at: 0, placed: a, task_gpus: [1, 17]}]\n"),
            "expect[0].task_gpus: each must be in 0..16, got 17");
  EXPECT_EQ(parse_error(node2 + job + "expect: [{at: 0, running: a, task_gpus: [1, 2]}]\n"), "expect[0].task_gpus: only with placed");
}

TEST(ScheduleScenarioTasks, TaskGpusExpectationChecksEachTaskInOrder) {
  const std::string text =
      "nodes: [{name: n, count: 2, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 64000, memory: 65536}]\n"
      "jobs: [{name: a, duration: 50, tasks: [{gpus: 1}, {gpus: 8}]}]\n";
  ScheduleRunResult ok = run_text(text + "expect: [{at: 0, placed: a, task_gpus: [1, 8], on_nodes: 2}]\n");
  EXPECT_TRUE(ok.failures.empty()) << all(ok);
  ScheduleRunResult bad = run_text(text + "expect: [{at: 0, placed: a, task_gpus: [8, 1]}]\n");
  EXPECT_TRUE(any_contains(bad.failures, "its tasks hold [1, 8] GPUs")) << all(bad);
}

}  // namespace
}  // namespace tessera::sim
