// `tessera bench cycle`: one full scheduling cycle at scale - a synthetic cluster (mixed H100/A100,
// spine/leaf), a queue tree (orgs -> teams) with guarantees and limits, jobs already running on about
// half the GPUs and a large pending backlog (1-GPU, shares, 8-GPU, 4x8-GPU gangs, mixed priority
// classes) - timed over several cycles. Single-threaded.
//
// Two figures: the full cycle (the same snapshot scheduled again each time, as a cold start or a
// cycle after a large change), and the cycle after a small change: from the state after a cycle was
// applied (core/sched/apply.h), `small_arrivals` new jobs arrive and `small_finishes` running jobs
// end, time passes `small_step` seconds, and the next cycle is timed and applied; `cycles` times.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace tessera::sim {

struct BenchCycleOptions {
  int nodes = 10000;
  int gpus_per_node = 8;
  int pending = 100000;
  int queues = 1000;   // leaf queues (teams), under queues/50 orgs
  int cycles = 5;
  int score_nodes = 64;
  uint64_t seed = 42;
  int small_arrivals = 100;   // per small change: new pending jobs
  int small_finishes = 100;   // per small change: running jobs that end
  int small_step = 10;        // per small change: seconds between cycles
};

struct BenchCycleResult {
  double cycle_ms_p50 = 0, cycle_ms_p99 = 0, cycle_ms_max = 0;
  double decisions_per_s = 0;  // (starts + preemptions + pending verdicts) per second of cycle time
  int64_t starts = 0, preemptions = 0, pending = 0;  // of the first cycle
  int64_t reserved = 0;           // first cycle: pending jobs holding a backfill reservation
  int64_t backfill_held = 0;      // first cycle: jobs kept waiting so as not to delay it
  int64_t running_before = 0;
  // The cycle after a small change (the state after the previous cycle was applied, plus
  // small_arrivals arrivals and small_finishes ends), over `cycles` such changes.
  double small_ms_p50 = 0, small_ms_p99 = 0, small_ms_max = 0;
  int64_t small_starts = 0, small_preemptions = 0;  // summed over the small-change cycles
  int64_t small_pending = 0;                        // after the last small-change cycle
  // Medians of the thread's CPU time per cycle (full, small change): on a shared machine the wall
  // times above include waits for a core; these do not.
  double cycle_cpu_ms_p50 = 0, small_cpu_ms_p50 = 0;
};

Result<BenchCycleResult> run_bench_cycle(const BenchCycleOptions& o, const std::function<void(int, int)>& progress = {});

}  // namespace tessera::sim
