// Internal to run_schedule_scenario (schedule_sim.h): the state of one scenario run and the steps of
// its event loop. schedule_sim_run.cc drives the loop and applies decisions and cluster events;
// schedule_sim_checks.cc checks the invariants and the expectations (docs/scenarios.md). Not a
// public API. Single-threaded.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster.h"
#include "core/sched/queues.h"
#include "core/sched/runtime_history.h"
#include "core/sched/scheduler.h"
#include "sim/schedule_sim.h"

namespace tessera::sim::detail {

// Why a running job stops early.
enum class StopCause : uint8_t { kPreempted, kDrained };
// A node's administrative state (as the controller's: ready, cordoned, draining).
enum class NodeAdmin : uint8_t { kReady, kCordoned, kDraining };

struct LiveJob {
  Job job;
  bool arrived = false, finished = false, timed_out = false;
  Duration run_from = 0;      // work safe (checkpointed) when the current run started
  Time run_start = -1;        // when the current run got its GPUs (started = this + restart cost)
  Time stop_at = -1;          // asked to stop: leaves the GPUs at this time
  Time ckpt_at = -1;          // kCheckpointing: when the requested checkpoint began
  StopCause stop_cause = StopCause::kPreempted;
  Time preempt_decided = -1;  // when a preemption of it was last decided
  int preempted = 0;          // times a running job was asked to stop (by the scheduler)
  int lost = 0;               // runs lost to a node going down or a GPU going unhealthy
  int runs = 0;               // runs started (the first one uses checkpoint.last_at)
  int64_t attained_milli_s = 0;  // milli-GPU-seconds of service in finished runs
};

class ScenarioRun {
 public:
  ScenarioRun(const ScheduleScenario& sc, ClusterState cluster, QueueTree tree, std::unique_ptr<Scheduler> sched)
      : sc_(sc), cfg_(sc.config), cluster_(std::move(cluster)), tree_(std::move(tree)), sched_(std::move(sched)) {}
  Result<ScheduleRunResult> run();

 private:
  // ---- schedule_sim_run.cc ----
  Status init();
  void account_usage(Time t);
  void mig_ready(Time t);
  Status settle(Time t);  // completions, time-outs and exits due by t
  // The job stops holding its GPUs at t (preempted, drained, or lost) and keeps its checkpointed work.
  Status stop_run(LiveJob& l, Time t, bool lost, const std::string& why);
  void apply_events(Time t);
  void apply_event(const ClusterEvent& e, Time t);
  void lose_jobs(Time t, NodeId node, int gpu, const std::string& why);  // gpu -1: the whole node
  void cancel_moves(NodeId node, Time t, const std::string& why);
  void refresh_gpu(GpuRef g);
  void refresh_node(NodeId n);
  Snapshot snapshot(Time t);
  // Applies the cycle's decisions (core/sched/apply.h, scenario_apply_options) and what follows
  // from them here: when jobs leave, counts, the log, the invariants on decisions.
  Status apply(const Decisions& d, Time t);
  // The last completed checkpoint of l's current run at or before `until` (periodic, or the first
  // run's checkpoint.last_at), -1 if none since it started.
  Time last_checkpoint(const LiveJob& l, Time until) const;

  // ---- schedule_sim_checks.cc ----
  void check_invariants(Time t);
  void check_guarantees(Time t);
  // With the jobs `gone` and every job already leaving released, the placement engine places l.
  bool fits_once_gone(const LiveJob& l, const std::vector<const LiveJob*>& gone, Time t);
  void check_expectations(const Decisions& d, Time t);
  std::string placement_failure(const Expectation& e, const LiveJob& l) const;

  bool holding(const LiveJob& l) const {
    return l.job.state == JobState::kRunning || l.job.state == JobState::kCheckpointing;
  }
  const SimJobSpec& spec(const LiveJob& l) const { return sc_.jobs[l.job.id.value]; }
  Time end_time(const LiveJob& l) const { return l.job.started + (spec(l).duration - l.run_from); }
  Time timeout_time(const LiveJob& l) const;
  void log(Time t, const std::string& what) { res_.log.push_back("t=" + std::to_string(t) + " " + what); }
  void fail(Time t, const std::string& what) { res_.failures.push_back("t=" + std::to_string(t) + ": " + what); }
  std::string gpu_text(GpuRef g) const;

  const ScheduleScenario& sc_;
  const SchedulerConfig& cfg_;
  ClusterState cluster_;
  QueueTree tree_;
  std::unique_ptr<Scheduler> sched_;
  ScheduleRunResult res_;

  std::vector<LiveJob> jobs_;
  std::map<std::string, size_t> by_name_;
  std::set<Time> times_;  // when the loop runs next
  Time horizon_ = 0;      // periodic cycles stop here (the last arrival, event or expectation)
  size_t next_event_ = 0;
  std::vector<double> usage_;  // per queue: decayed fair-share usage
  Time last_t_ = 0;            // usage is accounted up to here
  RuntimeHistory runtimes_;
  std::map<GpuRef, Time> mig_last_changed_;
  std::optional<HeldReservation> reservation_;  // the last cycle's, passed back to the next
  std::map<GpuRef, Time> reconfiguring_;  // GPU -> ready_at
  std::set<GpuRef> bad_gpus_;             // marked unhealthy by gpu_unhealthy
  std::vector<bool> down_;                // per node: node_down
  std::vector<NodeAdmin> admin_;          // per node: cordon / drain
  std::vector<Time> preemption_times_, mig_change_times_;  // one entry per decision applied
  std::map<std::pair<uint32_t, uint32_t>, Time> preempted_for_;  // (victim, for_job) -> when
  std::vector<Time> queue_last_start_;
  // Guarantee restoration (invariant 4): per (leaf queue, class), when the condition began.
  struct Watch {
    Time since = -1;
    bool reported = false;
  };
  std::map<std::pair<uint32_t, std::string>, Watch> watches_;
  std::unique_ptr<ScoringPolicy> oracle_policy_;  // the scenario's placement policy, for fits_once_gone
};

}  // namespace tessera::sim::detail
