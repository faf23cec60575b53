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
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tessera::sched {

int64_t request_milli(const CycleState& cs, const Gang& g) {
  if (g.varied()) return g.total_gpu_milli();
  const TaskRequest& t = g.task;
  int64_t per_task = t.gpu_demand_milli();
  if (t.mig()) {
    per_task = 0;
    const GpuModel* m = first_model(cs, t);
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

Gang gang_of(const CycleState& cs, const Entry& e) {
  Gang g;
  gang_into(cs, e, g);
  return g;
}

void gang_into(const CycleState& cs, const Entry& e, Gang& g) {
  g = e.job->gang;
  g.id = e.job->id;
  g.queue = e.job->queue;
  g.priority = e.pc->value;
  apply_job_pool_rules(g, *e.job, cs.cfg.pool_rules, cs.now);
  if (g.topology.mode == TopologyMode::kPreferred && g.topology.level == "node" &&
      g.total_gpus() <= cs.max_node_gpus) {
    // Waiting since its submission or its last stop (a preempted job waits afresh).
    const Time since = std::max(e.job->submitted, e.job->last_preempted);
    if (cs.cfg.elastic_capacity || cs.now - since < cs.cfg.topology_wait) g.topology.mode = TopologyMode::kRequired;
  }
}

// Fills class facts; false (with a reason) when the job names an unknown queue or class.
bool validate(CycleState& cs, Entry& e) {
  const Job& j = *e.job;
  if (!j.queue.valid() || j.queue.value >= cs.tree.size()) {
    e.wait = WaitCategory::kInvalid;
    e.reason = "queue: job " + j.name + " names no known queue";
    return false;
  }
  if (!cs.tree.queue(j.queue).leaf()) {
    e.wait = WaitCategory::kInvalid;
    e.reason = "queue: " + cs.tree.queue(j.queue).name + " is not a leaf queue; submit to one of its children";
    return false;
  }
  for (const PriorityClass& pc : cs.cfg.priority_classes)
    if (pc.name == j.priority_class) e.pc = &pc;
  if (!e.pc) {
    std::string known;
    for (const PriorityClass& pc : cs.cfg.priority_classes) known += (known.empty() ? "" : ", ") + pc.name;
    e.wait = WaitCategory::kInvalid;
    e.reason = "priority_class: unknown class '" + j.priority_class + "' (known: " + known + ")";
    return false;
  }
  e.prio = int64_t(e.pc->value) * 16;
  int las = 0;
  while (las < int(cs.cfg.las_thresholds_gpu_s.size()) && las < INT16_MAX &&
         j.attained_gpu_s >= cs.cfg.las_thresholds_gpu_s[size_t(las)])
    ++las;
  e.las = int16_t(las);
  if (cs.cfg.order == JobOrder::kLeastAttained) e.prio += 15 - std::min(las, 15);  // fewer GPU-seconds first
  e.cls = request_class(cs, j.gang.task);
  if (!e.running) e.classes = &classes_for(cs, j.gang.task);
  e.milli = e.running && !j.placement.empty() ? placement_milli(j.placement) : request_milli(cs, j.gang);
  if (!e.running) e.asked = &asked_for(cs, e.cls, e.milli);
  if (e.running) {
    e.held = placement_amounts(cs, *cs.snap.cluster, j.placement);
    e.holding = settled(j.placement);
    if (j.state == JobState::kCheckpointing) {  // asked to stop: leaves within its save time or grace
      e.end = cs.now + std::min(j.checkpoint.save_cost, j.checkpoint.grace);
      if (j.evict_by >= 0) e.end = std::min(e.end, std::max(cs.now, j.evict_by));
    } else {
      const Time start = j.started >= 0 ? j.started : cs.now;
      e.end = start + assumed_runtime(j, cs.snap.runtimes, cs.cfg.default_runtime);
    }
    // A job past its estimate is assumed to end at any moment (the reservation is recomputed each cycle).
    e.end = std::max(e.end, cs.now);
  }
  return true;
}

const std::vector<std::string>& classes_for(CycleState& cs, const TaskRequest& t) {
  auto it = cs.classes_of.find(t.gpu_models);
  if (it == cs.classes_of.end()) it = cs.classes_of.emplace(t.gpu_models, request_classes(cs, t)).first;
  return it->second;
}

const ClassAmounts& asked_for(CycleState& cs, const std::string& cls, int64_t milli) {
  auto key = std::make_pair(cls, milli);
  auto it = cs.asked.find(key);
  if (it == cs.asked.end()) it = cs.asked.emplace(std::move(key), amounts_of(cls, milli)).first;
  return it->second;
}

void add_waiting_demand(ClassAmounts& demand, const GuaranteeJob& j, const std::string& cls) {
  for (const auto& [c, v] : j.amounts()) demand[c] += v;
  // A pending request that names no model (or models of several classes) may be placed in every
  // class it could use (as reclaim assumes, GuaranteeLedger::owed_classes): it is demand in each, so a
  // queue that reclaims for it is also ordered below its guarantee and gets the room it freed,
  // and queues without guarantees share an accounted class by their waiting demand too.
  if (cls == kAnyClass && j.milli > 0 && j.classes)
    for (const std::string& c : *j.classes) demand[c] += j.milli;
}

// The cycle as the sequence it is; each step is below or in its phase's file.
Decisions run_cycle(CycleState& cs) {
  collect_entries(cs);  // validate every job; the valid ones become entries
  // GPUs held for jobs being moved (defragment) while they checkpoint: nobody else takes them. If they
  // are no longer free (a failure), the job restarts wherever it fits.
  for (const Entry& e : cs.entries)
    if (e.running && e.job->state == JobState::kCheckpointing && !e.job->move_to.empty()) hold_idle(cs, e.job->move_to);
  compute_books(cs);        // loads, capacity, fair share; what waiting jobs could use now
  evict_expired(cs);        // phase two of preemption
  order_and_place(cs);      // order.cc, place.cc (preempt.cc, defragment.cc, backfill.cc)
  if (cs.cfg.gather_spread) gather_spread(cs);  // defragment.cc
  if (cs.cfg.dynamic_mig) plan_mig(cs);  // cycle_mig.cc
  explain_waits(cs);
  return std::move(cs.out);
}

// The packed facts of a running (or, in the reference run, any) entry that victim searches read;
// built where the entry is made, while its job is in cache. `index`: its place in cs.entries.
static RunningFacts facts_of(const CycleState& cs, const Entry& v, size_t index) {
  const Job& j = *v.job;
  RunningFacts f;
  f.entry = uint32_t(index);
  f.queue = j.queue.value;
  f.prio = v.prio;
  f.las = v.las;
  f.class_value = v.pc->value;
  f.started = j.started;
  f.attained_gpu_s = j.attained_gpu_s;
  f.id = j.id;
  if (v.running) f.cost = lost_work_cost(cs, v);
  bool any_only = true;
  for (const auto& [c, m] : v.held)
    if (m > 0) {
      f.flags |= RunningFacts::kHoldsGpu;
      any_only = any_only && c == kAnyClass;
    }
  if (any_only) f.flags |= RunningFacts::kAnyOnly;
  if (!v.holding.empty() &&
      std::all_of(v.holding.begin(), v.holding.end(), [&](const TaskPlacement& p) { return p.node == v.holding[0].node; })) {
    f.flags |= RunningFacts::kOneNode;
    f.node = v.holding[0].node.value;
    f.held_milli = placement_milli(v.holding);
  }
  if (v.running && j.state == JobState::kRunning && !j.placement.empty()) f.flags |= RunningFacts::kRunningPlaced;
  if (v.running && j.state == JobState::kCheckpointing) f.flags |= RunningFacts::kCheckpointing;
  if (v.pc->preemptible) f.flags |= RunningFacts::kPreemptible;
  if ((j.started >= 0 && cs.now - j.started < v.pc->min_runtime) ||
      (j.last_preempted >= 0 && cs.now - j.last_preempted < cs.cfg.preemption_protection))
    f.flags |= RunningFacts::kProtected;
  return f;
}

void collect_entries(CycleState& cs) {
  std::vector<const Job*> jobs;
  for (const Job& j : cs.snap.jobs)
    if (j.state == JobState::kPending || j.state == JobState::kRunning || j.state == JobState::kCheckpointing)
      jobs.push_back(&j);
  std::sort(jobs.begin(), jobs.end(), [](const Job* a, const Job* b) { return a->id < b->id; });
  // Only classes a queue sets a guarantee or limit on are accounted; the rest is all "any".
  cs.quota_classes.insert(kAnyClass);
  for (const Queue& q : cs.tree.queues()) {
    for (auto& [c, v] : q.guaranteed) cs.quota_classes.insert(c);
    for (auto& [c, v] : q.limit) cs.quota_classes.insert(c);
  }
  std::set<const GpuModel*> models;
  for (const Node& n : cs.snap.cluster->nodes())
    if (const GpuModel* m = n.gpu_model()) models.insert(m);
  for (const GpuModel* m : models)
    if (const std::string* c = accounted_class(cs, m)) cs.present_classes.insert(*c);
  cs.entries.reserve(jobs.size());
  // Users, dense, by first appearance (entries by id). The keys are copies: a view into the first
  // job of each user would send every lookup to a random job in memory.
  std::unordered_map<std::string, uint32_t> users;
  users.reserve(1024);
  Gang gang;        // a pending job's gang, reused
  std::string key;  // its shape key, reused
  key.reserve(96);
  for (const Job* j : jobs) {
    Entry e;
    e.job = j;
    e.id = j->id;
    e.queue = j->queue;
    e.mig = j->gang.task.mig();
    e.running = j->state != JobState::kPending;
    if (validate(cs, e)) {
      if (!e.running) {
        gang_into(cs, e, gang);
        shape_key_into(gang, key);
        auto it = cs.shape_ids.find(key);
        if (it == cs.shape_ids.end()) it = cs.shape_ids.emplace(key, uint32_t(cs.shape_ids.size())).first;
        e.shape = it->second;
      }
      e.user = users.try_emplace(j->user, uint32_t(users.size())).first->second;
      if (cs.reference || e.running) {
        cs.running.push_back(cs.entries.size());
        cs.running_facts.push_back(facts_of(cs, e, cs.entries.size()));
      }
      cs.entries.push_back(std::move(e));
    } else if (!e.running) {
      cs.invalid.push_back(std::move(e));
    }
  }
  cs.no_room.assign(cs.shape_ids.size(), std::nullopt);
  cs.users = users.size();
  cs.user_milli.assign(cs.users, 0);
}

void compute_books(CycleState& cs) {
  // Loads and capacity per class.
  std::vector<QueueLoad> load(cs.tree.size());
  for (size_t q = 0; q < load.size() && q < cs.snap.history.size(); ++q) load[q].decayed_usage = cs.snap.history[q].decayed_usage;
  for (const Entry& e : cs.entries) {
    QueueLoad& l = load[e.queue.value];
    if (e.running) {
      for (auto& [c, v] : amounts(e)) l.demand[c] += v, l.allocated[c] += v;
      cs.user_milli[e.user] += e.milli;
    } else {
      add_waiting_demand(l.demand, facts(e), e.cls);
    }
  }
  ClassAmounts capacity;  // healthy milli-GPU per accounted class
  ClassAmounts open;      // of it, what can be given out: less what is free on nodes taking no work
  for (const Node& n : cs.work.nodes())
    for (const Gpu& g : n.gpus) {
      if (g.health != GpuHealth::kHealthy || !g.model) continue;
      const int64_t given = n.schedulable ? 1000 : 1000 - g.free_milli();
      capacity[kAnyClass] += 1000;
      open[kAnyClass] += given;
      if (const std::string* c = accounted_class(cs, g.model)) capacity[*c] += 1000, open[*c] += given;
    }
  FairShare fair = FairShare::compute(cs.tree, capacity, load);
  cs.ledger.emplace(cs.tree, std::move(open), std::move(fair), cs.cfg.reclaim);
  if (cs.cfg.reclaim) {
    cs.leaving_milli.assign(cs.work.nodes().size(), 0);
    cs.checkpointing.clear();
    for (const Entry& e : cs.entries)
      if (e.running && e.job->state == JobState::kCheckpointing) {
        cs.checkpointing.push_back(size_t(&e - cs.entries.data()));
        for (const TaskPlacement& p : e.holding)
          for (const GpuGrant& g : p.gpus)
            if (g.kind == GrantKind::kWhole && p.node.value < cs.leaving_milli.size()) cs.leaving_milli[p.node.value] += 1000;
      }
    std::unordered_map<uint32_t, size_t> unfit_group;  // shape -> index in owed_unfit
    for (size_t i = 0; i < cs.entries.size(); ++i) {
      const Entry& e = cs.entries[i];
      if (e.running || e.milli <= 0) continue;
      // Only a leaf short of its guarantee can be owed anything: skip the fit check elsewhere.
      // A job its queue's limits hold back cannot start on free GPUs: nothing is owed to it (else
      // the GPUs stayed idle, lent to nobody, for as long as the queue stayed at its limit).
      if (!cs.ledger->short_of_guarantee(e.queue) || !fs(cs).within_limits(e.queue, amounts(e)).ok()) continue;
      int64_t room = -1;
      if (fits_free_now(cs, e, &room)) {
        GuaranteeJob f = facts(e);
        f.classes = usable_classes(cs, e);
        cs.ledger->add_usable(f);
        continue;
      }
      auto [g, fresh] = unfit_group.try_emplace(e.shape, cs.owed_unfit.size());
      if (fresh) cs.owed_unfit.push_back({room, {}});
      cs.owed_unfit[g->second].entries.push_back(i);
    }
  }

}

// Phase two of preemption: jobs asked to checkpoint whose grace has expired are evicted now.
void evict_expired(CycleState& cs) {
  for (const Entry& e : cs.entries) {
    const Job& j = *e.job;
    if (j.state != JobState::kCheckpointing || j.evict_by < 0 || cs.now < j.evict_by) continue;
    PreemptDecision d;
    d.victim = j.id;
    d.phase = PreemptPhase::kEvict;
    d.evict_by = cs.now;
    d.reason = "checkpoint grace expired" + (cs.now > j.evict_by ? " " + duration_text(cs.now - j.evict_by) + " ago" : std::string()) +
               " without the job leaving";
    cs.out.preempt.push_back(std::move(d));
  }
}

// Why every job waits, with positions among the jobs still pending after this cycle. The last phase:
// each reason moves into the output.
void explain_waits(CycleState& cs) {
  std::vector<int> per_queue(cs.tree.size(), 0);
  int overall = 0;
  cs.out.pending.reserve(cs.order.size() + cs.invalid.size());
  constexpr size_t kAhead = 8;  // entries fetched this far ahead (cs.order is in no memory order)
  for (size_t k = 0; k < cs.order.size(); ++k) {
    if (k + kAhead < cs.order.size()) {
      const char* ahead = reinterpret_cast<const char*>(&cs.entries[cs.order[k + kAhead]]);
      __builtin_prefetch(ahead);
      __builtin_prefetch(ahead + 64);  // id, reason, estimated_start
    }
    Entry& e = cs.entries[cs.order[k]];
    if (e.started) continue;
    PendingInfo p;
    p.job = e.id;
    if (e.reason_from_shape) {
      const std::string& shared = cs.no_room[e.shape]->reason;
      p.reason.reserve(shared.size() + e.reason.size());
      (p.reason = shared) += e.reason;
    } else {
      p.reason = std::move(e.reason);
    }
    p.category = e.wait;
    p.short_of_room = e.short_of_room;
    p.awaits_move = e.awaits_move;
    p.queue_position = ++per_queue[e.queue.value];
    p.overall_position = ++overall;
    if (cs.res.active && &cs.entries[cs.res.entry] == &e) {
      p.reserved = true;
      p.estimated_start = cs.res.start;
    } else if (e.estimated_start >= 0) {
      p.estimated_start = e.estimated_start;
    }
    cs.out.pending.push_back(std::move(p));
  }
  if (cs.res.active) cs.out.reservation = held_reservation(cs);
  for (Entry& e : cs.invalid) {  // not in any queue order: positions 0
    PendingInfo p;
    p.job = e.id;
    p.reason = std::move(e.reason);
    p.category = e.wait;
    cs.out.pending.push_back(std::move(p));
  }
}

}  // namespace tessera::sched
