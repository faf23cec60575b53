// Per-job records of `tessera sim run` (--jobs-csv): when each job arrived, first started and
// finished, how often it was preempted, and why it waited: the seconds it spent pending under each
// wait category the scheduler gave it (PendingInfo::category, counted from one cycle to the next),
// while it held the backfill reservation, and while its start would have taken its team past its
// guarantee (it would borrow). For finding which jobs set a run's makespan and why they started late.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/sched/scheduler.h"

namespace tessera::sim {

inline constexpr size_t kWaitCategories = 9;  // WaitCategory's values

struct SimJobRecord {
  std::string name, team;
  Time arrival = 0;
  int64_t gpus_milli = 0;          // what the gang asks for, in milli-GPU
  Duration work = 0;               // run time when placed well
  Time first_start = -1, finish = -1;  // -1: never
  int preemptions = 0;
  // Of which by the reason's kind: reclaim (its team borrowed), least attained service (its own
  // team's job), priority, defragmenting move.
  int reclaimed = 0, by_las = 0, by_priority = 0, moved = 0;
  double run_s = 0;                // time holding GPUs (running, restarting, checkpointing)
  double spread_run_s = 0;         // of which placed over several nodes (slowed)
  int64_t spread_slowdown_milli = 1000;  // its slowdown when spread (1000: none)
  double queued_s = 0;             // all its waits (queueing delay)
  std::array<double, kWaitCategories> wait_s{};  // of which pending with each category
  double reserved_s = 0;           // of which holding the backfill reservation
  double borrowing_wait_s = 0;     // of which its start would have taken its team past its guarantee
  std::string reason_before_start; // its reason in the cycle before its first start
};

// What the simulator tells it each cycle; it keeps the per-job wait state.
class JobWaitLog {
 public:
  explicit JobWaitLog(size_t jobs) : jobs_(jobs) {}
  // Before a cycle at t: the time since the previous cycle goes to each waiting job's category then.
  void attribute(Time t);
  // A job started at t for the first time: it keeps the reason it last waited with.
  void first_started(uint32_t job);
  // After a cycle at t: the pending jobs, and whether a job's start would borrow.
  void observe(Time t, std::vector<PendingInfo>&& pending, const std::function<bool(uint32_t)>& borrowing);
  // Copies a job's wait figures into r.
  void fill(uint32_t job, SimJobRecord& r) const;

 private:
  struct State {
    bool waiting = false, reserved = false, borrowing = false;
    uint8_t category = 0;
    int32_t pending_index = -1;  // in last_ (the previous cycle's pending list)
    std::array<double, kWaitCategories> wait_s{};
    double reserved_s = 0, borrowing_s = 0;
    std::string reason_before_start;
  };
  std::vector<State> jobs_;
  std::vector<PendingInfo> last_;
  Time last_t_ = 0;
};

// CSV, one row per arrived job and policy, header first: policy, job, team, arrival_s, gpus,
// work_s, first_start_s, finish_s (empty: never), preemptions, reclaimed, by_las, by_priority,
// moved, run_s, spread_run_s, spread_slowdown, queued_s, wait_<category>_s for each
// category, reserved_s, borrowing_wait_s, reason_before_start. Times in seconds from the workload's
// start.
struct SimReport;
void write_jobs_csv(std::ostream& out, const std::vector<SimReport>& reports);

}  // namespace tessera::sim
