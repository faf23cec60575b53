// The order around the job-order policy (core/sched/job_order.h): the cycle asks the policy of
// cfg_.order for the next pending job and tries it, reporting each start back, and applies the rules
// every order shares where the policy opts in (OrderRules): a held backfill reservation's holder keeps
// its place, jobs that defer to owed queues are tried at their tier's end; strict order stops at the
// first job that does not start (every order).
#include "core/sched/cycle.h"

#include "core/sched/job_order.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::sched {

OrderJob order_job(const CycleState& cs, size_t i) {
  const Entry& e = cs.entries[i];
  OrderJob j;
  j.id = e.id;
  j.queue = e.queue;
  j.user = e.user;
  j.submitted = e.job->submitted;
  j.prio = e.prio;
  j.class_value = e.pc->value;
  j.las = e.las;
  j.milli = e.milli;
  return j;
}

// Everything but the jobs; after start_moved (its starts count as running).
OrderInput order_input(const CycleState& cs, size_t users) {
  OrderInput in;
  in.tree = &cs.tree;
  in.fair_share = &fs(cs);
  in.user_usage = cs.user_milli;
  in.user_usage.resize(users, 0);
  in.queue_usage.assign(cs.tree.size(), {});
  for (const Entry& e : cs.entries) {
    if (!e.running && !e.started) continue;
    OrderUsage& u = in.queue_usage[e.job->queue.value];
    u.gpu_milli += e.milli;
    for (const TaskPlacement& p : e.running ? e.holding : cs.out.start[size_t(e.start_index)].placement)
      u.cpu += p.cpu.v, u.memory += p.memory.v;
  }
  in.capacity.gpu_milli = std::max<int64_t>(1, int64_t(cs.work.total_gpus()) * 1000);
  for (const Node& n : cs.work.nodes()) in.capacity.cpu += n.cpu_capacity.v, in.capacity.memory += n.memory_capacity.v;
  in.decayed_usage.assign(cs.tree.size(), 0);
  for (size_t q = 0; q < cs.tree.size() && q < cs.snap.history.size(); ++q) in.decayed_usage[q] = cs.snap.history[q].decayed_usage;
  in.now = cs.now;
  in.in_queue_las = cs.cfg.in_queue_las;
  in.multifactor = cs.cfg.multifactor;
  for (const PriorityClass& pc : cs.cfg.priority_classes) in.top_class_value = std::max(in.top_class_value, pc.value);
  return in;
}

void order_and_place(CycleState& cs) {
  start_moved(cs);
  const JobOrderPolicy& policy = job_order_policy(cs.cfg.order);
  const OrderRules rules = policy.rules();
  // A reservation made in an earlier cycle holds: its holder goes before every job of its tier, of
  // its class or below, that was not ahead of it when it was made; at its tier's end at the latest.
  const std::optional<size_t> holder = rules.holds_reservation ? reservation_holder(cs) : std::nullopt;
  OrderInput in = order_input(cs, cs.users);
  std::vector<size_t> entry_of;  // per OrderInput::jobs: its index in cs.entries
  for (size_t i = 0; i < cs.entries.size(); ++i)
    if (!cs.entries[i].running && !cs.entries[i].started && !cs.entries[i].awaits_move && i != holder) {
      in.jobs.push_back(order_job(cs, i));
      entry_of.push_back(i);
    }
  const std::unique_ptr<JobOrderCursor> cursor = policy.begin(std::move(in));
  bool holder_due = holder.has_value();
  const int64_t holder_tier = holder ? policy.tier_of(order_job(cs, *holder)) : 0;
  const int holder_value = holder ? cs.entries[*holder].pc->value : 0;
  auto place = [&](size_t i) {  // tries entry i and reports a start to the order
    place_in_order(cs, i);
    const Entry& e = cs.entries[i];
    if (!e.started) return;
    OrderUsage took;
    const std::vector<TaskPlacement>& pl = cs.out.start[size_t(e.start_index)].placement;
    took.gpu_milli = placement_milli(pl);
    for (const TaskPlacement& p : pl) took.cpu += p.cpu.v, took.memory += p.memory.v;
    cursor->started(order_job(cs, i), took);
  };
  auto place_holder = [&] {
    holder_due = false;
    place(*holder);
  };
  auto place_in_tier = [&](size_t i, int64_t tier) {
    if (holder_due && tier == holder_tier && cs.entries[i].pc->value <= holder_value && !was_ahead_of_holder(cs, i))
      place_holder();
    place(i);
  };
  std::vector<size_t> deferred;  // defers_to_owed, in the order they came
  while (const std::optional<int64_t> tier = cursor->next_tier()) {
    if (holder_due && *tier < holder_tier) place_holder();  // no other job in its tier
    // A borrower's reservation does not hold against queues owed their guarantee: it goes first
    // among the jobs that wait for the owed (a guarantee comes before a borrower's reservation).
    const bool holder_defers = holder_due && *tier == holder_tier && rules.defers_to_owed &&
                               cs.ledger->defers_to_owed(facts(cs.entries[*holder]));
    if (holder_defers) holder_due = false;
    while (const std::optional<size_t> k = cursor->next()) {
      // The entries are visited in no memory order: ask for the likely next one's first line now,
      // so that it is on its way while this one is tried.
      if (const std::optional<size_t> ahead = cursor->likely_next()) __builtin_prefetch(&cs.entries[entry_of[*ahead]]);
      const size_t i = entry_of[*k];
      if (rules.defers_to_owed && cs.ledger->defers_to_owed(facts(cs.entries[i]))) deferred.push_back(i);
      else place_in_tier(i, *tier);
    }
    if (holder_defers) place(*holder);
    for (size_t i : deferred) place_in_tier(i, *tier);
    deferred.clear();
    if (holder_due && *tier == holder_tier) place_holder();
  }
  if (holder_due) place_holder();
}

std::optional<size_t> reservation_holder(const CycleState& cs) {
  if (!cs.cfg.backfill || !cs.snap.reservation || cs.cfg.reservation_hold == ReservationHold::kOff) return std::nullopt;
  if (cs.cfg.reservation_hold == ReservationHold::kAtDue && cs.snap.reservation->start > cs.now) return std::nullopt;
  const HeldReservation& r = *cs.snap.reservation;
  if (cs.cfg.reservation_slip > 0 && cs.now > (r.promised >= 0 ? r.promised : r.start) + cs.cfg.reservation_slip)
    return std::nullopt;  // lapsed: the room did not come as promised
  // Entries are by id.
  const auto it = std::lower_bound(cs.entries.begin(), cs.entries.end(), cs.snap.reservation->job,
                                   [](const Entry& e, JobId id) { return e.job->id < id; });
  if (it == cs.entries.end() || it->job->id != cs.snap.reservation->job) return std::nullopt;
  return !it->running && !it->started && !it->awaits_move ? std::optional<size_t>(size_t(it - cs.entries.begin()))
                                                          : std::nullopt;
}

bool was_ahead_of_holder(const CycleState& cs, size_t i) {
  const std::vector<JobId>& ahead = cs.snap.reservation->ahead;
  return std::binary_search(ahead.begin(), ahead.end(), cs.entries[i].job->id);
}

HeldReservation held_reservation(const CycleState& cs) {
  HeldReservation r{cs.entries[cs.res.entry].job->id, cs.res.start, {}, cs.res.start};
  if (cs.snap.reservation && cs.snap.reservation->job == r.job)  // the same holder: its first promise stands
    r.promised = cs.snap.reservation->promised >= 0 ? cs.snap.reservation->promised : cs.snap.reservation->start;
  for (size_t i : cs.order) {
    if (i == cs.res.entry) break;
    if (!cs.entries[i].started) r.ahead.push_back(cs.entries[i].job->id);
  }
  std::sort(r.ahead.begin(), r.ahead.end());
  return r;
}

bool place_in_order(CycleState& cs, size_t i) {
  Entry& e = cs.entries[i];
  cs.order.push_back(i);
  if (cs.blocked_by) {
    e.wait = WaitCategory::kOrder;
    e.reason = "waiting behind job " + cs.blocked_by->job->name + " (strict " + job_order_name(cs.cfg.order) + " order)";
    return false;
  }
  try_job(cs, e);
  if (cs.cfg.strict_order && !e.started) cs.blocked_by = &e;
  return !cs.blocked_by;
}

}  // namespace tessera::sched
