// The controller, the simulator and the scenario runner apply the scheduler's decisions through one
// module (core/sched/apply.h), each with its own options (controller_apply_options,
// simulator_apply_options, scenario_apply_options) and its own moment for a job to leave. Fed the
// same decisions, they must reach the same cluster state (allocation per GPU, node CPU and memory)
// and the same job states after every cycle.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/sched/apply.h"
#include "core/sched/scheduler.h"
#include "server/controller.h"
#include "sim/schedule_sim.h"
#include "sim/sim_run.h"

namespace tessera {
namespace {

// One caller's copy of the cluster and the jobs, changed only as that caller changes them.
struct Caller {
  std::string name;
  ApplyOptions options;
  ClusterState cluster;
  std::vector<Job> jobs;
  bool own_takes_work = false;       // the controller passes its node_usable; the simulators rely on Node::schedulable
  std::set<NodeId> cordoned;         // take no new work (admin state, or a cluster event)
  std::map<GpuRef, Time> ready_at;   // MIG: reconfiguring until then
  std::map<uint32_t, Time> leaves;   // asked to checkpoint: leaves then (saved, or its grace is over)
  ApplyResult last;

  Job* find(JobId id) { return id.value < jobs.size() ? &jobs[id.value] : nullptr; }

  void cordon(NodeId n) {
    cordoned.insert(n);
    ASSERT_TRUE(cluster.set_schedulable(n, false).ok());
  }

  // What happens between cycles: MIG layouts become ready, jobs that saved their checkpoint leave.
  void advance(Time t) {
    for (auto it = ready_at.begin(); it != ready_at.end();) {
      if (it->second > t) {
        ++it;
        continue;
      }
      ASSERT_TRUE(cluster.set_health(it->first, GpuHealth::kHealthy).ok());
      it = ready_at.erase(it);
    }
    for (auto it = leaves.begin(); it != leaves.end();) {
      Job& j = jobs[it->first];
      if (it->second > t || j.state != JobState::kCheckpointing) {
        it = j.state == JobState::kCheckpointing ? std::next(it) : leaves.erase(it);
        continue;
      }
      VacateOptions saved;
      saved.checkpointed = true;
      EXPECT_TRUE(vacate(j, cluster, t, saved).released.ok());
      it = leaves.erase(it);
    }
  }

  // One cycle's decisions, as this caller applies them. A job to leave now leaves before the next
  // cycle: at once (kAtOnce), or as the scenario runner's step settles (kByCaller).
  void apply(const Decisions& d, Time t) {
    ApplyOptions o = options;
    if (own_takes_work) o.takes_work = [this](NodeId n) { return !cordoned.count(n); };
    last = apply_decisions(d, cluster, [this](JobId id) { return find(id); }, t, o);
    for (const PreemptedJob& p : last.preempted) {
      if (p.effect == PreemptEffect::kToLeave) {
        EXPECT_TRUE(vacate(jobs[p.job.value], cluster, t).released.ok());
      } else if (p.effect == PreemptEffect::kCheckpointRequested) {
        leaves[p.job.value] = std::min(t + jobs[p.job.value].checkpoint.save_cost, p.evict_by);
      }
    }
    for (const MigChange& m : last.reconfigured) ready_at[m.gpu] = m.ready_at;
  }

  void finish(uint32_t id) { EXPECT_TRUE(end_job(jobs[id], cluster, JobState::kSucceeded).released.ok()); }

  // Everything the callers must agree on, as text (a mismatch shows where).
  std::string state() const {
    std::string s;
    for (const Node& n : cluster.nodes()) {
      s += n.name + " cpu=" + std::to_string(n.cpu_used.v) + " mem=" + std::to_string(n.memory_used.v) +
           (n.schedulable ? "" : " unschedulable") + "\n";
      for (const Gpu& g : n.gpus) {
        s += "  gpu" + std::to_string(g.index) + " health=" + std::to_string(int(g.health)) +
             (g.whole_held ? " whole" : "") + " shared=" + std::to_string(g.shared_milli.v) + "/" +
             std::to_string(g.share_count);
        if (g.mig_enabled) {
          s += " mig:";
          for (const MigInstance& m : g.mig.instances())
            s += " " + std::to_string(m.profile_id) + "@" + std::to_string(m.start) + (m.in_use ? "*" : "");
        }
        s += "\n";
      }
    }
    for (const Job& j : jobs) {
      s += "job " + std::to_string(j.id.value) + " " + job_state_name(j.state) + " evict_by=" + std::to_string(j.evict_by) +
           " preemptions=" + std::to_string(j.preemptions) + " last_preempted=" + std::to_string(j.last_preempted) +
           " milli=" + std::to_string(milli_held(j.placement)) + " on:";
      for (const TaskPlacement& p : j.placement) {
        s += " n" + std::to_string(p.node.value) + "[";
        for (const GpuGrant& g : p.gpus) s += std::to_string(g.gpu) + (g.mig_create ? "+" : "") + ",";
        s += "]";
      }
      s += " move_to:";
      for (const TaskPlacement& p : j.move_to) s += " n" + std::to_string(p.node.value);
      s += "\n";
    }
    return s;
  }
};

class ApplyCallersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<std::pair<std::string, ApplyOptions>> how = {{"controller", server::controller_apply_options()},
                                                                    {"simulator", sim::simulator_apply_options()},
                                                                    {"scenario runner", sim::scenario_apply_options()}};
    callers.resize(how.size());
    for (size_t i = 0; i < how.size(); ++i) callers[i].name = how[i].first, callers[i].options = how[i].second;
    callers[0].own_takes_work = true;
    for (Caller& c : callers)
      for (int i = 0; i < 2; ++i) {
        NodeSpec n;
        n.name = "n" + std::to_string(i);
        n.cpu = MilliCpu(64000);
        n.memory = MiB(512 * 1024);
        n.gpu_model = "H100-80GB-SXM";
        n.gpu_count = 8;
        ASSERT_TRUE(c.cluster.add_node(n).ok());
      }
  }
  // Adds a job to every caller.
  void add_job(const std::string& cls, int gpus, Duration checkpoint_interval, Time submitted, std::string mig = "") {
    Job j;
    j.id = JobId(uint32_t(callers[0].jobs.size()));
    j.name = "job-" + std::to_string(j.id.value);
    j.user = "u";
    j.queue = QueueId(0);
    j.priority_class = cls;
    j.gang.id = j.id;
    j.gang.tasks = 1;
    j.gang.task.cpu = MilliCpu(1000);
    j.gang.task.memory = MiB(1024);
    j.gang.task.gpu_count = mig.empty() ? gpus : 0;
    j.gang.task.mig_profile = mig;
    j.submitted = submitted;
    j.checkpoint.interval = checkpoint_interval;
    j.checkpoint.save_cost = 60;
    j.checkpoint.grace = 300;
    for (Caller& c : callers) c.jobs.push_back(j);
  }
  // The callers agree; returns the controller's state.
  std::string agreed(const std::string& when) {
    const std::string want = callers[0].state();
    for (const Caller& c : callers) {
      EXPECT_TRUE(c.cluster.check_invariants().ok()) << c.name << " " << when;
      EXPECT_EQ(c.state(), want) << c.name << " differs from the controller " << when;
    }
    return want;
  }
  void apply_all(const Decisions& d, Time t) {
    for (Caller& c : callers) c.apply(d, t);
  }
  static TaskPlacement whole_on(uint32_t node, std::vector<uint16_t> gpus) {
    TaskPlacement p;
    p.node = NodeId(node);
    p.cpu = MilliCpu(1000);
    p.memory = MiB(1024);
    p.task_class = int(gpus.size());
    for (uint16_t g : gpus) p.gpus.push_back(GpuGrant{g, GrantKind::kWhole, MilliGpu(1000), MiB(0), -1, 0, false, 0});
    return p;
  }

  std::vector<Caller> callers;
};

// The real scheduler decides each cycle (from the controller's copy); every caller applies it.
TEST_F(ApplyCallersTest, SameStateAfterEveryCycleOfTheScheduler) {
  auto tree = QueueTree::build({{"a", "", {}, {}, 1}});
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  SchedulerConfig cfg;
  auto sched = Scheduler::create(cfg);
  ASSERT_TRUE(sched.ok());
  add_job("preemptible", 8, 600, 0);          // 0: checkpoints: asked to, leaves when saved, restarts later
  add_job("preemptible", 4, 600, 0);          // 1
  add_job("preemptible", 3, 0, 0);            // 2: does not checkpoint: evicted at once
  add_job("research", 0, 0, 0, "1g.10gb");    // 3: a MIG slice on the one idle GPU: a layout change first
  add_job("production-training", 8, 0, 120);  // 4: preempts job 0
  add_job("research", 2, 0, 300);             // 5: preempts job 2
  std::map<PreemptEffect, int> effects;
  int starts = 0, mig = 0;
  for (Time t = 0; t <= 1800; t += 60) {
    for (Caller& c : callers) c.advance(t);
    if (t == 900)  // job 4 is done
      for (Caller& c : callers)
        if (c.jobs[4].state == JobState::kRunning) c.finish(4);
    agreed("before the cycle at t=" + std::to_string(t));
    Snapshot snap;
    snap.cluster = &callers[0].cluster;
    snap.queues = &*tree;
    for (const Job& j : callers[0].jobs)
      if (j.submitted <= t && (j.state == JobState::kPending || j.state == JobState::kRunning || j.state == JobState::kCheckpointing))
        snap.jobs.push_back(j);
    const Decisions d = (*sched)->cycle(snap, t);
    apply_all(d, t);
    agreed("after the cycle at t=" + std::to_string(t));
    for (const PreemptedJob& p : callers[0].last.preempted) ++effects[p.effect];
    starts += int(callers[0].last.started.size());
    mig += int(callers[0].last.reconfigured.size());
    EXPECT_TRUE(callers[0].last.refused.empty()) << "t=" << t;
  }
  // The run went through every kind of change.
  EXPECT_GE(effects[PreemptEffect::kCheckpointRequested], 1);
  EXPECT_GE(effects[PreemptEffect::kLeft], 1);
  EXPECT_GE(mig, 1);
  EXPECT_GE(starts, 6);
  EXPECT_EQ(callers[0].jobs[4].state, JobState::kSucceeded);
  EXPECT_EQ(callers[0].jobs[3].state, JobState::kRunning);
  EXPECT_GE(callers[0].jobs[0].preemptions, 1);
}

// Moves, refusals and what the scheduler never asks but a caller may meet (a node cordoned since the
// snapshot, resources taken since), decided by hand.
TEST_F(ApplyCallersTest, SameStateForMovesAndRefusals) {
  add_job("preemptible", 2, 600, 0);  // 0: moved from n0 to n1
  add_job("research", 2, 0, 0);       // 1: its start no longer applies
  add_job("research", 2, 0, 0);       // 2: its start is on a node cordoned since
  add_job("research", 2, 600, 0);     // 3: moved, but does not restart there: the move is given up
  Decisions d1;
  d1.start = {{JobId(0), {whole_on(0, {0, 1})}}, {JobId(3), {whole_on(0, {2, 3})}}, {JobId(1), {whole_on(0, {1, 4})}}};
  apply_all(d1, 0);
  agreed("after the starts");
  EXPECT_EQ(callers[2].last.refused.size(), 1u);
  for (Caller& c : callers) c.cordon(NodeId(0));
  Decisions d2;
  d2.start = {{JobId(2), {whole_on(0, {5, 6})}}};
  for (const auto& [v, dest] : std::vector<std::pair<uint32_t, TaskPlacement>>{{0, whole_on(1, {6, 7})}, {3, whole_on(1, {4, 5})}}) {
    PreemptDecision p;
    p.victim = JobId(v);
    p.phase = PreemptPhase::kRequestCheckpoint;
    p.evict_by = 60 + 300;
    p.reason = "move";
    p.move_to = {dest};
    d2.preempt.push_back(p);
  }
  apply_all(d2, 60);
  agreed("after the moves were asked");
  for (const Caller& c : callers) {
    ASSERT_EQ(c.last.refused.size(), 1u) << c.name;
    EXPECT_EQ(c.last.refused[0].reason, Refusal::kNodeTakesNoWork) << c.name;
  }
  for (Caller& c : callers) c.advance(120);  // both saved and left; they keep their moves
  agreed("after they left");
  Decisions d3;
  d3.start = {{JobId(0), callers[0].jobs[0].move_to}};
  d3.pending.push_back(PendingInfo{JobId(3), "no room", WaitCategory::kCapacity, 1, 1, {}, false, false});
  d3.preempt.push_back(PreemptDecision{JobId(1), JobId(), PreemptPhase::kEvict, "gone", 120, {}});  // never started
  apply_all(d3, 120);
  agreed("after the moved job restarted");
  for (const Caller& c : callers) {
    ASSERT_EQ(c.last.started.size(), 1u) << c.name;
    EXPECT_FALSE(c.last.started[0].off_move) << c.name;
    EXPECT_EQ(c.last.moves_dropped, std::vector<JobId>{JobId(3)}) << c.name;
    ASSERT_EQ(c.last.refused.size(), 1u) << c.name;
    EXPECT_EQ(c.last.refused[0].reason, Refusal::kNotPlaced) << c.name;
    EXPECT_TRUE(c.jobs[3].move_to.empty()) << c.name;
    EXPECT_EQ(c.jobs[0].state, JobState::kRunning) << c.name;
    EXPECT_EQ(c.jobs[0].placement.front().node, NodeId(1)) << c.name;
  }
}

}  // namespace
}  // namespace tessera
