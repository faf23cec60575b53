// Does the simulator predict the live system? `tessera bench cluster --compare-sim`: after a live
// run (a real `tessera server` driven by hollow nodes), the identical job list (each job's spec as
// sent, its arrival at the server, its run time, the same cluster YAML and so the same queues and
// scheduler configuration) goes through the simulator's engine (sim/sim_run.h), and both sides are
// measured the same way: mean JCT (finish - arrival), p99 and mean wait (first start - arrival),
// makespan (last finish - first arrival), and how often two jobs start in the same order.
//
// Time: the simulator's clock counts milliseconds of the live run (the core's Time is whole units),
// so every duration of the scheduler's configuration (half-life, default runtime, graces, MIG costs,
// LAS thresholds, class min_runtime) is multiplied by 1000 to mean the same live seconds.
//
// What the live system adds, and the model of it (SimModel): the controller's cycle cadence (a cycle
// at least every second, event-driven cycles no closer than 20 ms: ControllerOptions' defaults), a
// submit latency (sent -> the server has it), a start latency (the decision reaching the nodes, a gang's tasks waiting for their master's port)
// and a finish latency (the exit reaching the controller), during both of which the job holds its
// GPUs. By default the latencies are the live run's own means, measured per job from the server's
// started/finished times and the hollow nodes' task ends; the simulator without them is reported
// beside it ("sim, no latency") to show what they account for.
//
// Thread-safety: plain functions; fetch_live_times uses the client from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::bench {

class RestClient;

// One job of the live run, as both sides get it.
struct LiveJob {
  int64_t id = 0;           // the server's id; the simulator takes jobs in this order (FIFO ties)
  std::string spec;         // the JSON spec as sent
  std::string user;         // the submitter the server recorded (learned runtimes are per user and name)
  double arrival_s = 0;     // sent, seconds after the workload's start
  double submitted_s = -1;  // the server's submitted_ms, seconds after the start (-1: not known)
  // The server's view: started_ms / finished_ms of its last attempt, seconds after the start; -1: never.
  double start_s = -1, finish_s = -1;
  double work_end_s = -1;   // its last task ended on its node (hollow nodes), -1: not seen
  int attempts = 0;
  std::string state;        // the server's final state
};

struct SimModel {
  double cycle_interval_ms = 1000;  // the controller's defaults (server/controller.h)
  double min_cycle_gap_ms = 20;
  double submit_latency_ms = -1;    // -1: the live run's mean (measured)
  double start_latency_ms = -1;     // -1: the live run's mean (measured)
  double finish_latency_ms = -1;    // -1: the live run's mean (measured)
};
Status validate_sim_model(const SimModel& m);

// The server's times and states of every job, by id.
struct ServerJobTimes {
  std::string user, state;
  int64_t submitted_ms = -1, started_ms = -1, finished_ms = -1;
  int attempts = 0;
};
Result<std::map<int64_t, ServerJobTimes>> fetch_live_times(RestClient& admin);

// One side's figures, over the jobs that finished there (seconds of the live run).
struct SideFigures {
  int64_t jobs = 0, finished = 0, started = 0;
  double jct_mean_s = 0, wait_mean_s = 0, wait_p99_s = 0, makespan_s = 0;
  int64_t cycles = -1;  // the simulator's (-1: not known)
};

// Pairs of jobs started at different times on both sides: how many in the same order. `contended`:
// pairs both waiting when the first of them started (on either side), i.e. the scheduler chose
// which went first; `all`: every pair.
struct OrderAgreement {
  int64_t pairs = 0, same = 0, tied = 0;  // tied: same start on one side only (one cycle), not counted
  double fraction() const { return pairs > 0 ? double(same) / double(pairs) : 1.0; }
};

struct SimCompare {
  SideFigures live, sim, sim_no_latency;
  SimModel model;                       // as used (latencies resolved)
  // Measured on the live run, per job: submit latency (sent -> the server's submitted_ms), start latency (decision applied -> its last task's work began,
  // i.e. that task's end minus the run time) and finish latency (last task ended -> the server
  // recorded the finish); submit lag: the send's delay past its due time (trace).
  double submit_latency_ms_mean = 0, submit_latency_ms_p99 = 0;
  double start_latency_ms_mean = 0, start_latency_ms_p99 = 0, finish_latency_ms_mean = 0, finish_latency_ms_p99 = 0;
  int64_t latency_samples = 0;
  double submit_lag_ms_p99 = 0;
  int64_t restarted = 0;                // jobs with more than one attempt (the simulator has none)
  OrderAgreement order_all, order_contended;
  // The simulator against itself with its start latency 1 ms longer: how much of the order follows
  // from timing alone (the floor that live against sim can be held to).
  OrderAgreement order_self_contended;
  // Each job's start on both sides, so that a difference in order can be traced job by job (in the
  // JSON only). Seconds after the workload's start; -1: never started.
  struct JobStarts {
    int64_t id = 0;
    std::string queue;
    int gpus = 0;
    double arrival_s = 0, live_start_s = -1, sim_start_s = -1;
  };
  std::vector<JobStarts> starts;
  // (sim - live) / live; 0 when both are 0.
  double jct_diff = 0, wait_p99_diff = 0, makespan_diff = 0;
  double worst_diff() const;
  nlohmann::json to_json() const;
  std::string table() const;
};

// Runs the simulator on `jobs` (the live run's, in id order; jobs the server never finished count
// as unfinished on the live side) on the cluster YAML the server was started with.
Result<SimCompare> compare_live_with_sim(const std::string& cluster_yaml, const std::vector<LiveJob>& jobs, const SimModel& model,
                                         double submit_lag_ms_p99 = 0);

// Relative difference (b - a) / a; 0 when both are 0, 1 when only a is 0.
double relative_diff(double a, double b);
// Order agreement of start times (s; NaN-free, -1 = never started: left out) given arrivals.
OrderAgreement start_order_agreement(const std::vector<double>& arrival, const std::vector<double>& start_a,
                                     const std::vector<double>& start_b, bool contended_only, double tie_s);

}  // namespace tessera::bench
