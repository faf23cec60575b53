// The cycle's frame: each job's facts (validate), the gang it asks for now, and run(): books,
// evictions due, order and place, MIG, and why every job still waits.
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

int64_t Cycle::request_milli(const Gang& g) const {
  const TaskRequest& t = g.task;
  int64_t per_task = t.gpu_demand_milli();
  if (t.mig()) {
    per_task = 0;
    const GpuModel* m = first_model(t);
    const MigProfile* p = m ? m->find_profile(t.mig_profile) : nullptr;
    if (p) {
      per_task = mig_milli(*m, p->id);
    } else {  // no model named: "Ng" of the usual 7 compute slices
      int n = 0;
      for (char ch : t.mig_profile) {
        if (!std::isdigit(static_cast<unsigned char>(ch))) break;
        n = n * 10 + (ch - '0');
      }
      per_task = int64_t(std::min(n, 7)) * 1000 / 7;
    }
  }
  return per_task * std::max(g.tasks, 0);
}

Gang Cycle::gang_of(const Entry& e) const {
  Gang g = e.job->gang;
  g.id = e.job->id;
  g.queue = e.job->queue;
  g.priority = e.pc->value;
  apply_job_pool_rules(g, *e.job, cfg_.pool_rules, now_);
  if (g.topology.mode == TopologyMode::kPreferred && g.topology.level == "node" &&
      int64_t(g.tasks) * g.task.gpu_count <= max_node_gpus_) {
    // Waiting since its submission or its last stop (a preempted job waits afresh).
    const Time since = std::max(e.job->submitted, e.job->last_preempted);
    if (cfg_.elastic_capacity || now_ - since < cfg_.topology_wait) g.topology.mode = TopologyMode::kRequired;
  }
  return g;
}

// Fills class facts; false (with a reason) when the job names an unknown queue or class.
bool Cycle::validate(Entry& e) {
  const Job& j = *e.job;
  if (!j.queue.valid() || j.queue.value >= tree_.size()) {
    e.wait = WaitCategory::kInvalid;
    e.reason = "queue: job " + j.name + " names no known queue";
    return false;
  }
  if (!tree_.queue(j.queue).leaf()) {
    e.wait = WaitCategory::kInvalid;
    e.reason = "queue: " + tree_.queue(j.queue).name + " is not a leaf queue; submit to one of its children";
    return false;
  }
  for (const PriorityClass& pc : cfg_.priority_classes)
    if (pc.name == j.priority_class) e.pc = &pc;
  if (!e.pc) {
    std::string known;
    for (const PriorityClass& pc : cfg_.priority_classes) known += (known.empty() ? "" : ", ") + pc.name;
    e.wait = WaitCategory::kInvalid;
    e.reason = "priority_class: unknown class '" + j.priority_class + "' (known: " + known + ")";
    return false;
  }
  e.prio = int64_t(e.pc->value) * 16;
  while (e.las < int(cfg_.las_thresholds_gpu_s.size()) && j.attained_gpu_s >= cfg_.las_thresholds_gpu_s[size_t(e.las)])
    ++e.las;
  if (cfg_.order == JobOrder::kLeastAttained) e.prio += 15 - std::min(e.las, 15);  // fewer GPU-seconds first
  e.cls = request_class(j.gang.task);
  if (!e.running) e.classes = request_classes(j.gang.task);
  e.milli = e.running && !j.placement.empty() ? placement_milli(j.placement) : request_milli(j.gang);
  if (e.running) {
    e.held = placement_amounts(*snap_.cluster, j.placement);
    e.holding = settled(j.placement);
    if (j.state == JobState::kCheckpointing) {  // asked to stop: leaves within its save time or grace
      e.end = now_ + std::min(j.checkpoint.save_cost, j.checkpoint.grace);
      if (j.evict_by >= 0) e.end = std::min(e.end, std::max(now_, j.evict_by));
    } else {
      const Time start = j.started >= 0 ? j.started : now_;
      e.end = start + assumed_runtime(j, snap_.runtimes, cfg_.default_runtime);
    }
    // A job past its estimate is assumed to end at any moment (the reservation is recomputed each cycle).
    e.end = std::max(e.end, now_);
  }
  return true;
}

Decisions Cycle::run() {
  std::vector<const Job*> jobs;
  for (const Job& j : snap_.jobs)
    if (j.state == JobState::kPending || j.state == JobState::kRunning || j.state == JobState::kCheckpointing)
      jobs.push_back(&j);
  std::sort(jobs.begin(), jobs.end(), [](const Job* a, const Job* b) { return a->id < b->id; });
  // Only classes a queue sets a guarantee or limit on are accounted; the rest is all "any".
  quota_classes_.insert(kAnyClass);
  for (const Queue& q : tree_.queues()) {
    for (auto& [c, v] : q.guaranteed) quota_classes_.insert(c);
    for (auto& [c, v] : q.limit) quota_classes_.insert(c);
  }
  for (const Job* j : jobs) {
    Entry e;
    e.job = j;
    e.running = j->state != JobState::kPending;
    if (validate(e)) {
      entries_.push_back(std::move(e));
    } else if (!e.running) {
      invalid_.push_back(std::move(e));
    }
  }

  // GPUs held for jobs being moved (defragment) while they checkpoint: nobody else takes them. If they
  // are no longer free (a failure), the job restarts wherever it fits.
  for (const Entry& e : entries_)
    if (e.running && e.job->state == JobState::kCheckpointing && !e.job->move_to.empty()) hold_idle(e.job->move_to);

  // Loads and capacity per class.
  std::vector<QueueLoad> load(tree_.size());
  for (size_t q = 0; q < load.size() && q < snap_.history.size(); ++q) load[q].decayed_usage = snap_.history[q].decayed_usage;
  for (const Entry& e : entries_) {
    QueueLoad& l = load[e.job->queue.value];
    for (auto& [c, v] : amounts(e)) {
      l.demand[c] += v;
      if (e.running) l.allocated[c] += v;
    }
    // A pending request that names no model (or models of several classes) may be placed in every
    // class it could use (as reclaim assumes, below_guarantee_after): it is demand in each, so a
    // queue that reclaims for it is also ordered below its guarantee and gets the room it freed,
    // and queues without guarantees share an accounted class by their waiting demand too.
    if (!e.running && e.cls == kAnyClass && e.milli > 0)
      for (const std::string& c : e.classes) l.demand[c] += e.milli;
    if (e.running) user_milli_[e.job->user] += e.milli;
  }
  for (const Node& n : work_.nodes())
    for (const Gpu& g : n.gpus) {
      if (g.health != GpuHealth::kHealthy || !g.model) continue;
      capacity_[kAnyClass] += 1000;
      if (const std::string* c = accounted_class(g.model)) capacity_[*c] += 1000;
    }
  fs_.emplace(FairShare::compute(tree_, capacity_, load));
  if (cfg_.reclaim) {
    usable_pending_.assign(tree_.size(), {});
    leaving_milli_.assign(work_.nodes().size(), 0);
    for (const Entry& e : entries_)
      if (e.running && e.job->state == JobState::kCheckpointing)
        for (const TaskPlacement& p : e.holding)
          for (const GpuGrant& g : p.gpus)
            if (g.kind == GrantKind::kWhole && p.node.value < leaving_milli_.size()) leaving_milli_[p.node.value] += 1000;
    for (const Entry& e : entries_) {
      if (e.running || e.milli <= 0) continue;
      // Only a leaf short of its guarantee can be owed anything: skip the fit check elsewhere.
      const Queue& q = tree_.queue(e.job->queue);
      bool short_of_guarantee = false;
      for (auto& [c, g] : q.guaranteed)
        short_of_guarantee = short_of_guarantee || fs_->allocated(q.id, c) < std::min(g, fs_->demand(q.id, c));
      // A job its queue's limits hold back cannot start on free GPUs: nothing is owed to it (else
      // the GPUs stayed idle, lent to nobody, for as long as the queue stayed at its limit).
      if (!short_of_guarantee || !fs_->within_limits(q.id, amounts(e)).ok() || !fits_free_now(e)) continue;
      ClassAmounts& u = usable_pending_[e.job->queue.value];
      for (auto& [c, v] : amounts(e)) u[c] += v;
      if (e.cls == kAnyClass)
        for (const std::string& c : path_guaranteed(e.job->queue))
          if (could_use(e, c)) u[c] += e.milli;
    }
  }

  // Phase two of preemption: jobs asked to checkpoint whose grace has expired are evicted now.
  for (const Entry& e : entries_) {
    const Job& j = *e.job;
    if (j.state != JobState::kCheckpointing || j.evict_by < 0 || now_ < j.evict_by) continue;
    PreemptDecision d;
    d.victim = j.id;
    d.phase = PreemptPhase::kEvict;
    d.evict_by = now_;
    d.reason = "checkpoint grace expired at t=" + std::to_string(j.evict_by) + " without the job leaving";
    out_.preempt.push_back(std::move(d));
  }
  order_and_place();
  if (cfg_.gather_spread) gather_spread();
  if (cfg_.dynamic_mig) plan_mig();

  // Why every job waits, with positions among the jobs still pending after this cycle.
  std::vector<int> per_queue(tree_.size(), 0);
  int overall = 0;
  for (size_t i : order_) {
    const Entry& e = entries_[i];
    if (e.started) continue;
    PendingInfo p;
    p.job = e.job->id;
    p.reason = e.reason;
    p.category = e.wait;
    p.short_of_room = e.short_of_room;
    p.queue_position = ++per_queue[e.job->queue.value];
    p.overall_position = ++overall;
    if (res_.active && &entries_[res_.entry] == &e) {
      p.reserved = true;
      p.estimated_start = res_.start;
    } else if (e.estimated_start >= 0) {
      p.estimated_start = e.estimated_start;
    }
    out_.pending.push_back(std::move(p));
  }
  if (res_.active) out_.reservation = held_reservation();
  for (const Entry& e : invalid_) {  // not in any queue order: positions 0
    PendingInfo p;
    p.job = e.job->id;
    p.reason = e.reason;
    p.category = e.wait;
    out_.pending.push_back(std::move(p));
  }
  return std::move(out_);
}

}  // namespace tessera::sched
