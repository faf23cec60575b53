// Job order: priority tiers, then the queue tree by fair share (or a baseline's flat order),
// each job tried in turn; strict order stops at the first that does not start.
#include "core/sched/cycle.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::sched {

// Repeatedly: the best leaf queue (walking down by FairShare::before), its best job, try it.
void Cycle::order_and_place() {
  // Priority tiers first (urgent work is served at once, whatever its queue's share), then inside a
  // tier the queue tree by fair share, then the queue's best job.
  std::map<std::string, uint32_t> users;
  for (Entry& e : entries_) e.user = users.emplace(e.job->user, uint32_t(users.size())).first->second;
  user_usage_.assign(users.size(), 0);
  for (const Entry& e : entries_) user_usage_[e.user] = get_or(user_milli_, e.job->user);
  start_moved();
  if (cfg_.order != JobOrder::kFairShare) return order_flat();
  std::vector<int64_t> tiers;
  for (const Entry& e : entries_)
    if (!e.running && !e.started) tiers.push_back(e.prio);
  std::sort(tiers.begin(), tiers.end(), std::greater<>());
  tiers.erase(std::unique(tiers.begin(), tiers.end()), tiers.end());
  auto job_before = [&](size_t a, size_t b) {
    const Entry& x = entries_[a];
    const Entry& y = entries_[b];
    if (x.prio != y.prio) return x.prio > y.prio;
    if (cfg_.in_queue_las && x.las != y.las) return x.las < y.las;
    const int64_t ux = user_usage_[x.user], uy = user_usage_[y.user];
    if (ux != uy) return ux < uy;
    if (x.job->submitted != y.job->submitted) return x.job->submitted < y.job->submitted;
    return x.job->id < y.job->id;
  };
  const std::optional<size_t> holder = reservation_holder();
  for (int64_t tier : tiers) {
    // A reservation made in an earlier cycle holds: its holder goes first in its tier, after only the
    // jobs that were ahead of it when it was made.
    bool holder_due = holder && entries_[*holder].prio == tier;
    // A borrower's reservation does not hold against queues owed their guarantee: it goes first
    // among the jobs that wait for the owed (a guarantee comes before a borrower's reservation).
    const bool holder_defers = holder_due && defers_to_owed(entries_[*holder]);
    if (holder_defers) holder_due = false;
    auto place = [&](size_t i) {
      if (holder_due && !was_ahead_of_holder(i)) holder_due = false, place_in_order(*holder);
      place_in_order(i);
    };
    std::vector<std::vector<size_t>> cand(tree_.size());
    std::vector<int> remaining(tree_.size(), 0);
    size_t total = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].running || entries_[i].started || entries_[i].prio != tier || i == holder) continue;
      cand[entries_[i].job->queue.value].push_back(i);
      for (QueueId q : tree_.path_to_root(entries_[i].job->queue)) ++remaining[q.value];
      ++total;
    }
    std::vector<size_t> deferred;  // defers_to_owed, in the order they came
    for (; total > 0; --total) {
      const std::vector<QueueId>* level = &tree_.top_level();
      QueueId pick;
      for (;;) {
        QueueId best;
        for (QueueId q : *level)
          if (remaining[q.value] > 0 && (!best.valid() || fs_->before(q, best))) best = q;
        pick = best;
        if (tree_.queue(best).leaf()) break;
        level = &tree_.queue(best).children;
      }
      auto& c = cand[pick.value];
      auto it = std::min_element(c.begin(), c.end(), job_before);
      const size_t i = *it;
      c.erase(it);
      for (QueueId q : tree_.path_to_root(pick)) --remaining[q.value];
      if (defers_to_owed(entries_[i])) deferred.push_back(i);
      else place(i);
    }
    if (holder_defers) place_in_order(*holder);
    for (size_t i : deferred) place(i);
    if (holder_due) place_in_order(*holder);
  }
}

std::optional<size_t> Cycle::reservation_holder() const {
  if (!cfg_.backfill || !snap_.reservation || cfg_.reservation_hold == ReservationHold::kOff) return std::nullopt;
  if (cfg_.reservation_hold == ReservationHold::kAtDue && snap_.reservation->start > now_) return std::nullopt;
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
  HeldReservation r{entries_[res_.entry].job->id, res_.start, {}};
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

// Baseline orders: one global order (FIFO, multifactor, least attained service), or DRF's dynamic
// pick of the leaf queue with the lowest dominant share.
void Cycle::order_flat() {
  std::vector<size_t> pend;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (!entries_[i].running && !entries_[i].started) pend.push_back(i);
  const double cap_any = std::max<double>(1, double(work_.total_gpus()) * 1000);
  if (cfg_.order == JobOrder::kDrf) {
    // Dominant share per leaf queue over GPU, CPU and memory of what runs (and starts this cycle).
    int64_t cap_cpu = 1, cap_mem = 1;
    for (const Node& n : work_.nodes()) cap_cpu += n.cpu_capacity.v, cap_mem += n.memory_capacity.v;
    std::vector<int64_t> gpu(tree_.size()), cpu(tree_.size()), mem(tree_.size());
    auto add = [&](const Entry& e, const std::vector<TaskPlacement>& pl) {
      const size_t q = e.job->queue.value;
      gpu[q] += e.milli;
      for (const TaskPlacement& p : pl) cpu[q] += p.cpu.v, mem[q] += p.memory.v;
    };
    for (const Entry& e : entries_)
      if (e.running) add(e, e.holding);
      else if (e.started) add(e, out_.start[size_t(e.start_index)].placement);
    auto share = [&](size_t q) {
      return std::max({double(gpu[q]) / cap_any, double(cpu[q]) / double(cap_cpu), double(mem[q]) / double(cap_mem)});
    };
    std::vector<std::vector<size_t>> by_queue(tree_.size());
    std::sort(pend.begin(), pend.end(), [&](size_t a, size_t b) {
      const Job& x = *entries_[a].job;
      const Job& y = *entries_[b].job;
      return x.submitted != y.submitted ? x.submitted > y.submitted : x.id > y.id;  // oldest last
    });
    for (size_t i : pend) by_queue[entries_[i].job->queue.value].push_back(i);
    for (size_t left = pend.size(); left > 0; --left) {
      size_t best = tree_.size();
      for (size_t q = 0; q < tree_.size(); ++q)
        if (!by_queue[q].empty() && (best == tree_.size() || share(q) < share(best))) best = q;
      const size_t i = by_queue[best].back();
      by_queue[best].pop_back();
      if (!place_in_order(i)) continue;
      if (entries_[i].started) add(entries_[i], out_.start[size_t(entries_[i].start_index)].placement);
    }
    return;
  }
  std::vector<int64_t> key(entries_.size(), 0);  // higher first
  if (cfg_.order == JobOrder::kMultifactor) {
    // Slurm: age/max_age, 2^(-usage/shares) of the job's queue, GPUs asked / cluster GPUs, class / top class.
    int top = 1;
    for (const PriorityClass& pc : cfg_.priority_classes) top = std::max(top, pc.value);
    std::vector<double> fs_factor(tree_.size(), 1);
    for (const Queue& q : tree_.queues()) {
      if (!q.leaf()) continue;
      double shares = 1;
      for (QueueId a : tree_.path_to_root(q.id)) {
        int64_t sum = 0;
        for (QueueId sib : tree_.queue(a).parent.valid() ? tree_.queue(tree_.queue(a).parent).children : tree_.top_level())
          sum += tree_.queue(sib).weight;
        shares *= double(tree_.queue(a).weight) / double(std::max<int64_t>(1, sum));
      }
      const double hist = q.id.value < snap_.history.size() ? snap_.history[q.id.value].decayed_usage : 0;
      const double usage = double(fs_->allocated(q.id, kAnyClass)) / cap_any + hist;
      fs_factor[q.id.value] = std::exp2(-usage / shares);
    }
    const MultifactorWeights& w = cfg_.multifactor;
    for (size_t i : pend) {
      const Entry& e = entries_[i];
      const double age = double(std::clamp<Duration>(now_ - e.job->submitted, 0, w.max_age)) / double(std::max<Duration>(1, w.max_age));
      const double p = double(w.age) * age + double(w.fairshare) * fs_factor[e.job->queue.value] +
                       double(w.job_size) * std::min(1.0, double(e.milli) / cap_any) +
                       double(w.qos) * double(std::max(0, e.pc->value)) / double(top);
      key[i] = int64_t(std::llround(p * 1000));
    }
  } else if (cfg_.order == JobOrder::kLeastAttained) {
    for (size_t i : pend) key[i] = entries_[i].prio;
  }
  std::sort(pend.begin(), pend.end(), [&](size_t a, size_t b) {
    if (key[a] != key[b]) return key[a] > key[b];
    const Job& x = *entries_[a].job;
    const Job& y = *entries_[b].job;
    return x.submitted != y.submitted ? x.submitted < y.submitted : x.id < y.id;
  });
  // A reservation made in an earlier cycle holds: its holder goes before every job of its class or
  // below that was not ahead of it when it was made.
  if (const std::optional<size_t> holder = reservation_holder()) {
    const int value = entries_[*holder].pc->value;
    pend.erase(std::find(pend.begin(), pend.end(), *holder));
    auto at = std::find_if(pend.begin(), pend.end(),
                           [&](size_t i) { return entries_[i].pc->value <= value && !was_ahead_of_holder(i); });
    pend.insert(at, *holder);
  }
  for (size_t i : pend) place_in_order(i);
}

}  // namespace tessera::sched
