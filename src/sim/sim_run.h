// The time-driven simulator behind `tessera sim run`: replays a Workload through a scheduling policy
// (the core Scheduler with a preset, or the k8s-default baseline) on a cluster, event by event
// (arrivals, completions, checkpoint-and-exit, node failures and repairs, MIG layouts becoming ready),
// running a cycle after every batch of events and periodically while work waits. Measures what
// docs/simulator.md defines: allocation, effective utilisation, JCT, waits, fairness, guarantees,
// preemptions, lost work, fragmentation. Deterministic for a given seed. Single-threaded.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/autoscale.h"
#include "core/cluster.h"
#include "core/sched/apply.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"
#include "core/status.h"
#include "sim/job_log.h"
#include "sim/workload.h"

namespace tessera::sim {

// What a simulation runs on: the cluster (nothing allocated), its queues and the scheduler's
// configuration (priority classes, half-life, grace, MIG costs); the policy preset is applied on top.
struct SimCluster {
  ClusterState cluster;
  std::vector<QueueSpec> queues;
  SchedulerConfig config;
  std::shared_ptr<const GpuCatalog> catalog = {};  // what `cluster` points into when not the built-ins
  // Off: every node is up from the start. On: nodes of on-demand and spot pools are slots the
  // autoscaler brings up (min_nodes at the start) through the simulated provider (sim/sim_provider.h).
  AutoscaleConfig autoscaling = {};
};

struct SimRunOptions {
  std::string policy = "tessera";  // a scheduler preset name or "k8s-default"
  uint64_t seed = 1;
  Duration cycle_interval = 300;   // while work waits, a cycle at least this often
  Duration min_cycle_gap = 10;     // event-driven cycles at most this often
  // How a live controller and its agents delay a run (docs/performance.md, "The simulator predicts
  // the live system"): a job reaches the scheduler submit_latency after it arrives (the submission's
  // round trip; its waits count from its arrival); a started job holds its GPUs for start_latency
  // before its work begins (the decision reaching its nodes, a gang's tasks learning their master's
  // port) and for finish_latency after its work ends (the exit reaching the controller). 0 = none.
  Duration submit_latency = 0;
  Duration start_latency = 0;
  Duration finish_latency = 0;
  Duration node_mtbf = 0;          // mean time between failures per node (exponential); 0 = none
  Duration node_repair = 4 * 3600; // a failed node comes back after this
  Duration sample_interval = 0;    // timeline samples; 0 = about 400 over the run
  Time horizon = 0;                // stop at this time (0 = when every job has finished)
  // Stop, stalled, once every job has arrived, none runs, and none has started or finished for this
  // long: the policy will not start the jobs left (its cycles only repeat). Longer than a node's
  // repair, a node's provisioning and the priority age's saturation (SchedulerConfig::max_age), which
  // could still let a job start. Waits and allocation count to the stop. 0 = never stop so.
  Duration stall_limit = 7 * 86400;
  std::function<void(int64_t done, int64_t total)> progress;  // finished jobs
};

// One timeline sample (for reports).
struct SimSample {
  Time t = 0;
  double allocation_pct = 0, effective_pct = 0;
  int64_t pending = 0, running = 0;
  std::vector<double> team_gpus;  // GPUs held per team (SimReport::teams order)
};

struct SimMetrics {
  std::string policy;
  int64_t jobs = 0, finished = 0, unfinished = 0;
  double jct_mean_s = 0, jct_p50_s = 0, jct_p99_s = 0;
  // Queueing delay: all the time a job spent waiting, before its first start and after every stop
  // (preemption, failure, spot reclaim), up to its finish or the end of the run (Tiresias's
  // pending time; JCT = queueing delay + time running).
  double wait_mean_s = 0, wait_p99_s = 0;
  // Arrival to first start; a job not started by the end counts the time it has waited so far.
  double first_start_mean_s = 0, first_start_p99_s = 0;
  int64_t unstarted = 0;           // arrived jobs that never started
  Time stalled_at = -1;            // the run stopped stalled at this time (SimRunOptions::stall_limit); -1: it did not
  double makespan_s = 0;
  double allocation_pct = 0;       // time-average allocated / healthy capacity
  double effective_util_pct = 0;   // time-average useful work / capacity
  double jain_fairness = 0;        // time-average Jain index over teams with demand (share vs entitlement)
  double below_guarantee_s = 0;    // team-seconds below guarantee with demand pending (summed over teams)
  double max_below_guarantee_s = 0;  // longest single stretch of one team below its guarantee with demand
  // Guarantee owed and not given: team-seconds (and the longest stretch of one team) during which a
  // waiting job of the team would fit within the team's unused guarantee.
  double guarantee_unmet_s = 0, max_guarantee_unmet_s = 0;
  int64_t preemptions = 0, failures = 0, mig_reconfigurations = 0;
  int64_t defrag_moves = 0;  // defragmenting moves (counted in preemptions too): checkpoint, restart elsewhere
  double lost_gpu_hours = 0;       // work lost to preemption and failures, in GPU-hours
  double jobs_per_hour = 0;        // finished jobs per hour of makespan
  double fragmentation_pct = 0;    // time-average free GPU capacity no pending request could use
  int64_t cycles = 0;
  double elapsed_s = 0;            // wall-clock time of the simulation (set by the caller)
  // Capacity pools and cost (docs/simulator.md "Pools, spot and cost").
  struct PoolCost {
    std::string pool, kind;
    double billed_gpu_hours = 0;   // paid for: owned/reserved the whole run, elastic while provisioned
    double used_gpu_hours = 0;     // allocated
    double cost = 0;               // billed * price
  };
  std::vector<PoolCost> pools;     // pools billed anything, in pool id order
  double cost = 0;                 // sum over pools, in the pools' price currency
  double billed_gpu_hours = 0;
  double used_gpu_hours_by_kind[kPoolKinds] = {0, 0, 0, 0};
  int64_t spot_reclaims = 0;       // spot nodes reclaimed (notices)
  int64_t job_interruptions = 0;   // running jobs hit by a notice
  double interruption_lost_gpu_hours = 0;  // part of lost_gpu_hours due to spot reclaims
  double inference_spot_gpu_hours = 0;     // inference on spot (the pool rules keep it 0)
  int64_t inference_spot_starts = 0;
  int64_t nodes_provisioned = 0, nodes_released = 0;  // autoscaling
  int64_t consolidations = 0, consolidation_moves = 0;  // elastic nodes emptied, jobs moved to do it
  // The same JCT and queueing-delay figures over jobs that are not inference services.
  int64_t batch_finished = 0;
  double batch_jct_mean_s = 0, batch_wait_p99_s = 0;
  int64_t capacity_gpus = 0;       // the cluster's GPUs (set by the caller; 0 = not known)
};

struct SimReport {
  SimMetrics metrics;
  std::vector<std::string> teams;
  std::vector<SimSample> timeline;
  std::vector<double> jct_s;       // finished jobs' JCTs, sorted (for CDFs)
  std::vector<SimJobRecord> jobs;  // every arrived job, in workload order (--jobs-csv)
};

Result<SimReport> run_simulation(const SimCluster& cluster, const Workload& workload, const SimRunOptions& options);

// The p-th percentile (0 < p <= 1) of ascending values by nearest rank, as SimMetrics' percentiles
// are taken; 0 for none.
inline double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, size_t(std::ceil(p * double(sorted.size())) - 1));
  return sorted[i];
}

// How the simulator applies the scheduler's decisions (core/sched/apply.h): a job that must leave
// leaves at once; a run counts as started when it gets its GPUs (work resumes after the restart
// cost) and as checkpointed then.
ApplyOptions simulator_apply_options();

// Policies `sim run` accepts: the scheduler presets plus "k8s-default".
std::vector<std::string> sim_policy_names();

}  // namespace tessera::sim
