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

OrderJob Cycle::order_job(size_t i) const {
  const Entry& e = entries_[i];
  OrderJob j;
  j.id = e.job->id;
  j.queue = e.job->queue;
  j.user = e.user;
  j.submitted = e.job->submitted;
  j.prio = e.prio;
  j.class_value = e.pc->value;
  j.las = e.las;
  j.milli = e.milli;
  return j;
}

// Everything but the jobs; after start_moved (its starts count as running).
OrderInput Cycle::order_input(size_t users) const {
  OrderInput in;
  in.tree = &tree_;
  in.fair_share = &fs();
  in.user_usage.assign(users, 0);
  for (const Entry& e : entries_) in.user_usage[e.user] = get_or(user_milli_, e.job->user);
  in.queue_usage.assign(tree_.size(), {});
  for (const Entry& e : entries_) {
    if (!e.running && !e.started) continue;
    OrderUsage& u = in.queue_usage[e.job->queue.value];
    u.gpu_milli += e.milli;
    for (const TaskPlacement& p : e.running ? e.holding : out_.start[size_t(e.start_index)].placement)
      u.cpu += p.cpu.v, u.memory += p.memory.v;
  }
  in.capacity.gpu_milli = std::max<int64_t>(1, int64_t(work_.total_gpus()) * 1000);
  for (const Node& n : work_.nodes()) in.capacity.cpu += n.cpu_capacity.v, in.capacity.memory += n.memory_capacity.v;
  in.decayed_usage.assign(tree_.size(), 0);
  for (size_t q = 0; q < tree_.size() && q < snap_.history.size(); ++q) in.decayed_usage[q] = snap_.history[q].decayed_usage;
  in.now = now_;
  in.in_queue_las = cfg_.in_queue_las;
  in.multifactor = cfg_.multifactor;
  for (const PriorityClass& pc : cfg_.priority_classes) in.top_class_value = std::max(in.top_class_value, pc.value);
  return in;
}

void Cycle::order_and_place() {
  std::map<std::string, uint32_t> users;
  for (Entry& e : entries_) e.user = users.emplace(e.job->user, uint32_t(users.size())).first->second;
  start_moved();
  const JobOrderPolicy& policy = job_order_policy(cfg_.order);
  const OrderRules rules = policy.rules();
  // A reservation made in an earlier cycle holds: its holder goes before every job of its tier, of
  // its class or below, that was not ahead of it when it was made; at its tier's end at the latest.
  const std::optional<size_t> holder = rules.holds_reservation ? reservation_holder() : std::nullopt;
  OrderInput in = order_input(users.size());
  std::vector<size_t> entry_of;  // per OrderInput::jobs: its index in entries_
  for (size_t i = 0; i < entries_.size(); ++i)
    if (!entries_[i].running && !entries_[i].started && i != holder) {
      in.jobs.push_back(order_job(i));
      entry_of.push_back(i);
    }
  const std::unique_ptr<JobOrderCursor> cursor = policy.begin(std::move(in));
  bool holder_due = holder.has_value();
  const int64_t holder_tier = holder ? policy.tier_of(order_job(*holder)) : 0;
  const int holder_value = holder ? entries_[*holder].pc->value : 0;
  auto place = [&](size_t i) {  // tries entry i and reports a start to the order
    place_in_order(i);
    const Entry& e = entries_[i];
    if (!e.started) return;
    OrderUsage took;
    const std::vector<TaskPlacement>& pl = out_.start[size_t(e.start_index)].placement;
    took.gpu_milli = placement_milli(pl);
    for (const TaskPlacement& p : pl) took.cpu += p.cpu.v, took.memory += p.memory.v;
    cursor->started(order_job(i), took);
  };
  auto place_holder = [&] {
    holder_due = false;
    place(*holder);
  };
  auto place_in_tier = [&](size_t i, int64_t tier) {
    if (holder_due && tier == holder_tier && entries_[i].pc->value <= holder_value && !was_ahead_of_holder(i))
      place_holder();
    place(i);
  };
  std::vector<size_t> deferred;  // defers_to_owed, in the order they came
  while (const std::optional<int64_t> tier = cursor->next_tier()) {
    if (holder_due && *tier < holder_tier) place_holder();  // no other job in its tier
    // A borrower's reservation does not hold against queues owed their guarantee: it goes first
    // among the jobs that wait for the owed (a guarantee comes before a borrower's reservation).
    const bool holder_defers = holder_due && *tier == holder_tier && rules.defers_to_owed &&
                               ledger_->defers_to_owed(facts(entries_[*holder]));
    if (holder_defers) holder_due = false;
    while (const std::optional<size_t> k = cursor->next()) {
      const size_t i = entry_of[*k];
      if (rules.defers_to_owed && ledger_->defers_to_owed(facts(entries_[i]))) deferred.push_back(i);
      else place_in_tier(i, *tier);
    }
    if (holder_defers) place(*holder);
    for (size_t i : deferred) place_in_tier(i, *tier);
    deferred.clear();
    if (holder_due && *tier == holder_tier) place_holder();
  }
  if (holder_due) place_holder();
}

std::optional<size_t> Cycle::reservation_holder() const {
  if (!cfg_.backfill || !snap_.reservation || cfg_.reservation_hold == ReservationHold::kOff) return std::nullopt;
  if (cfg_.reservation_hold == ReservationHold::kAtDue && snap_.reservation->start > now_) return std::nullopt;
  const HeldReservation& r = *snap_.reservation;
  if (cfg_.reservation_slip > 0 && now_ > (r.promised >= 0 ? r.promised : r.start) + cfg_.reservation_slip)
    return std::nullopt;  // lapsed: the room did not come as promised
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].job->id == snap_.reservation->job)
      return !entries_[i].running && !entries_[i].started ? std::optional<size_t>(i) : std::nullopt;
  return std::nullopt;
}

bool Cycle::was_ahead_of_holder(size_t i) const {
  const std::vector<JobId>& ahead = snap_.reservation->ahead;
  return std::binary_search(ahead.begin(), ahead.end(), entries_[i].job->id);
}

HeldReservation Cycle::held_reservation() const {
  HeldReservation r{entries_[res_.entry].job->id, res_.start, {}, res_.start};
  if (snap_.reservation && snap_.reservation->job == r.job)  // the same holder: its first promise stands
    r.promised = snap_.reservation->promised >= 0 ? snap_.reservation->promised : snap_.reservation->start;
  for (size_t i : order_) {
    if (i == res_.entry) break;
    if (!entries_[i].started) r.ahead.push_back(entries_[i].job->id);
  }
  std::sort(r.ahead.begin(), r.ahead.end());
  return r;
}

bool Cycle::place_in_order(size_t i) {
  Entry& e = entries_[i];
  order_.push_back(i);
  if (blocked_by_) {
    e.wait = WaitCategory::kOrder;
    e.reason = "waiting behind job " + blocked_by_->job->name + " (strict " + job_order_name(cfg_.order) + " order)";
    return false;
  }
  try_job(e);
  if (cfg_.strict_order && !e.started) blocked_by_ = &e;
  return !blocked_by_;
}

}  // namespace tessera::sched
