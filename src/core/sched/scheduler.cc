// The scheduler's entry points: named configurations (presets), Scheduler::create's checks, and
// Scheduler::cycle, which runs one cycle over a CycleState (core/sched/cycle.h; the rules are stated there).
#include "core/sched/scheduler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/sched/cycle.h"

namespace tessera {

const char* wait_category_name(WaitCategory c) {
  switch (c) {
    case WaitCategory::kOther: return "other";
    case WaitCategory::kInvalid: return "invalid";
    case WaitCategory::kOrder: return "order";
    case WaitCategory::kReservation: return "reservation";
    case WaitCategory::kQuota: return "quota";
    case WaitCategory::kPreempting: return "preempting";
    case WaitCategory::kMigReconfiguring: return "mig_reconfiguring";
    case WaitCategory::kTopology: return "topology";
    case WaitCategory::kCapacity: return "capacity";
  }
  return "other";
}

const char* job_order_name(JobOrder o) {
  switch (o) {
    case JobOrder::kFairShare: return "fair-share";
    case JobOrder::kFifo: return "FIFO";
    case JobOrder::kMultifactor: return "multifactor";
    case JobOrder::kLeastAttained: return "least-attained-service";
    case JobOrder::kDrf: return "DRF";
  }
  return "?";
}

const char* reservation_hold_name(ReservationHold h) {
  switch (h) {
    case ReservationHold::kFromMade: return "made";
    case ReservationHold::kAtDue: return "due";
    case ReservationHold::kOff: return "off";
  }
  return "?";
}

std::vector<std::string> scheduler_preset_names() { return {"tessera", "fifo-gang", "slurm", "tiresias", "drf"}; }

Result<SchedulerConfig> scheduler_preset(const std::string& name) {
  SchedulerConfig c;
  if (name == "tessera") return c;
  c.dynamic_mig = false;  // the baselines keep MIG layouts as they are
  c.reclaim = false;
  c.backfill = false;
  c.preemption = false;
  c.defragment = false;
  c.gather_spread = false;
  if (name == "fifo-gang") {
    c.order = JobOrder::kFifo;
    c.strict_order = true;
    c.policy = "first-fit";
  } else if (name == "slurm") {
    c.order = JobOrder::kMultifactor;
    c.backfill = true;
    c.policy = "best-fit";
  } else if (name == "tiresias") {
    c.order = JobOrder::kLeastAttained;
    c.preemption = true;
    c.policy = "gpu-packing";
    for (PriorityClass& pc : c.priority_classes) {  // LAS preempts by attained service alone
      pc.min_runtime = 0;
      pc.preemptible = pc.can_preempt = true;
    }
    c.preemption_protection = 0;
  } else if (name == "drf") {
    c.order = JobOrder::kDrf;
    c.policy = "dotprod";
  } else {
    std::string known;
    for (const std::string& n : scheduler_preset_names()) known += (known.empty() ? "" : ", ") + n;
    return invalid_argument("scheduler: unknown policy '" + name + "' (known: " + known + ")");
  }
  return c;
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(SchedulerConfig config) {
  auto policy = make_policy(config.policy);
  if (!policy.ok()) return invalid_argument("policy: " + policy.error().message);
  std::map<std::string, int> seen;
  for (const PriorityClass& pc : config.priority_classes) {
    if (pc.name.empty()) return invalid_argument("priority_classes: a class has an empty name");
    if (seen.count(pc.name)) return invalid_argument("priority_classes: duplicate class " + pc.name);
    if (pc.min_runtime < 0) return invalid_argument("priority_classes: " + pc.name + ": min_runtime < 0");
    seen[pc.name] = 1;
  }
  if (config.max_preemptions_per_cycle < 0) return invalid_argument("max_preemptions_per_cycle must be >= 0");
  if (config.preemption_protection < 0) return invalid_argument("preemption_protection must be >= 0");
  if (config.max_moves_per_cycle < 0) return invalid_argument("max_moves_per_cycle must be >= 0");
  std::unique_ptr<Scheduler> s(new Scheduler(std::move(config)));
  s->policy_ = std::move(policy.value());
  return s;
}

Decisions Scheduler::cycle(const Snapshot& snapshot, Time now) const { return run(snapshot, now, false); }

Decisions Scheduler::cycle_reference(const Snapshot& snapshot, Time now) const { return run(snapshot, now, true); }

Decisions Scheduler::run(const Snapshot& snapshot, Time now, bool reference) const {
  if (!snapshot.cluster || !snapshot.queues) {
    Decisions d;
    for (const Job& j : snapshot.jobs)
      if (j.state == JobState::kPending) d.pending.push_back({j.id, "snapshot: no cluster or queue tree given", WaitCategory::kOther, 0, 0, {}, false});
    return d;
  }
  // Nothing waits, no eviction is due and no gang to gather runs spread: nothing to decide (and no
  // working copy to build).
  const bool idle = std::none_of(snapshot.jobs.begin(), snapshot.jobs.end(), [&](const Job& j) {
    return j.state == JobState::kPending || (j.state == JobState::kCheckpointing && j.evict_by >= 0 && j.evict_by <= now) ||
           (config_.gather_spread && j.state == JobState::kRunning && sched::runs_spread_wanting_one_node(j));
  });
  if (idle) return {};
  sched::CycleState cs(config_, *policy_, snapshot, now, reference);
  return sched::run_cycle(cs);
}

}  // namespace tessera
