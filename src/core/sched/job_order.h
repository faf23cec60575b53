// Job order as a policy: the sequence in which a scheduling cycle tries its pending jobs, one
// implementation per JobOrder (fair share, FIFO, multifactor, least attained service, DRF), chosen
// through a registry (job_order_policy), as Mesos' sorters and KAI's actions are separate units.
//
// A policy sees each pending job's ordering facts (OrderJob), never the cycle's working state, and
// yields the jobs through a cursor, one at a time, in tiers (descending keys; an order without tiers
// has one, kOneTier): fair share picks the least-served queue again after every start and DRF the
// lowest dominant share, so the cycle reports each start (JobOrderCursor::started) before it asks
// for the next job. The cycle finishes a tier (what it put off to the tier's end) before it asks for
// the next tier, whose first pick may depend on those starts.
//
// The rules around the order are the cycle's (core/sched/order.cc), written once for every policy:
// a held backfill reservation's holder is tried before the first job of its tier, of its class or
// below, that was not ahead of it when it was made (else at its tier's end); a job whose start would
// borrow where other queues are owed room is tried at its tier's end; strict order stops at the
// first job that does not start. A policy states which of the first two apply to it (OrderRules).
//
// Invariants: every order is total and ends in the job id, so the same input gives the same
// sequence; each input job is yielded exactly once. Ownership: a cursor owns its OrderInput; the
// tree and fair share it points to must outlive it. Policies are immutable and shared
// (thread-safe); a cursor is thread-compatible (one per cycle).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "core/ids.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"

namespace tessera {

// One pending job as an order sees it.
struct OrderJob {
  JobId id;
  QueueId queue;         // its leaf queue
  uint32_t user = 0;     // dense user index (OrderInput::user_usage)
  Time submitted = 0;
  int64_t prio = 0;      // the cycle's rank: class value x16, plus the attained-service level bonus
                         // (15 - level) under kLeastAttained; fair share's tiers, LAS's key
  int class_value = 0;   // its priority class's value
  int las = 0;           // attained-service level: 0 below the first threshold, then 1, 2, ...
  int64_t milli = 0;     // GPUs it asks for, in milli-GPU
};

// Resources in integer units: milli-GPU, milli-CPU, MiB.
struct OrderUsage {
  int64_t gpu_milli = 0;
  int64_t cpu = 0;
  int64_t memory = 0;
};

// What an order may read besides the jobs; the cycle fills what every policy needs.
struct OrderInput {
  std::vector<OrderJob> jobs;             // the pending jobs to order, in any order (ids unique)
  const QueueTree* tree = nullptr;
  // Live: the cycle adds every start to it before it asks for the next job (fair share's queue pick).
  const FairShare* fair_share = nullptr;
  std::vector<int64_t> user_usage;        // per OrderJob::user: milli-GPU its running jobs hold now
  // Per queue (by QueueId): what its running jobs hold (GPUs: held milli) and what started this
  // cycle before the order began (GPUs: asked milli). DRF's dominant shares.
  std::vector<OrderUsage> queue_usage;
  // The cluster: milli-GPU (at least 1), milli-CPU + 1 and MiB + 1 (no division by zero).
  OrderUsage capacity{1, 1, 1};
  std::vector<double> decayed_usage;      // per queue: historical usage (multifactor; missing = 0)
  Time now = 0;
  bool in_queue_las = false;              // fair share: inside a queue, lower attained-service level first
  MultifactorWeights multifactor;
  int top_class_value = 1;                // the highest priority class value, at least 1 (multifactor)
};

// The cycle's rules that a policy opts into (see the header comment).
struct OrderRules {
  bool holds_reservation = false;  // the held reservation's holder is left out of OrderInput::jobs
                                   // and placed by the cycle
  bool defers_to_owed = false;     // borrowing starts that others are owed room for go to the tier's end
};

// The tier key of an order without tiers.
inline constexpr int64_t kOneTier = std::numeric_limits<int64_t>::min();

// The sequence of one cycle. Call next_tier(), then next() until it gives nullopt, then next_tier()
// again, until next_tier() gives nullopt; report every start in between.
class JobOrderCursor {
 public:
  virtual ~JobOrderCursor() = default;
  // Moves to the next tier and returns its key (keys descend), or nullopt when no tier is left.
  virtual std::optional<int64_t> next_tier() = 0;
  // The current tier's next job to try (an index into OrderInput::jobs), or nullopt when the tier
  // has no job left.
  virtual std::optional<size_t> next() = 0;
  // The job next() will likely return, or nullopt when unknown: only a hint (the caller may fetch
  // its data early); next() decides. Changes nothing.
  virtual std::optional<size_t> likely_next() const { return std::nullopt; }
  // `job` started and took `took` (it may be one the cycle placed itself, not from the input).
  virtual void started(const OrderJob& job, const OrderUsage& took) {
    (void)job;
    (void)took;
  }
};

class JobOrderPolicy {
 public:
  virtual ~JobOrderPolicy() = default;
  virtual JobOrder kind() const = 0;
  virtual OrderRules rules() const = 0;
  // The tier a job belongs to (kOneTier for an order without tiers).
  virtual int64_t tier_of(const OrderJob& job) const = 0;
  virtual std::unique_ptr<JobOrderCursor> begin(OrderInput input) const = 0;
};

// The registry: the policy of each JobOrder (every value has one; shared, immutable).
const JobOrderPolicy& job_order_policy(JobOrder order);

}  // namespace tessera
