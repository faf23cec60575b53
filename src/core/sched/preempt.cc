// Preemption: victims for a job that finds no room (priority, reclaim, least attained service),
// cheapest lost work first, only when the engine confirms the job then fits.
#include "core/sched/cycle.h"
#include "core/sched/job_order.h"
#include "core/sched/scratch.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::sched {

int64_t lost_work_cost(const CycleState& cs, const Entry& v) {
  const Job& j = *v.job;
  const Time since = std::max(j.started, j.checkpoint.last);
  return v.milli * (std::max<int64_t>(0, cs.now - since) + j.checkpoint.save_cost + j.checkpoint.restart_cost);
}

// marked_leaving, ascending and without repeats.
static std::vector<size_t> leaving_marked(const CycleState& cs) {
  std::vector<size_t> out = cs.marked_leaving;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void preempt(CycleState& cs, Entry& v, const Entry& e, bool by_priority, std::string reason) {
  v.victim = true;
  const size_t vi = size_t(&v - cs.entries.data());
  if (auto it = std::lower_bound(cs.running.begin(), cs.running.end(), vi); it != cs.running.end() && *it == vi)
    cs.running_facts[size_t(it - cs.running.begin())].flags |= RunningFacts::kVictim;
  cs.marked_leaving.push_back(vi);
  PreemptDecision d;
  d.victim = v.job->id;
  d.for_job = e.job->id;
  d.phase = v.job->checkpoint.interval > 0 ? PreemptPhase::kRequestCheckpoint : PreemptPhase::kEvict;
  const Duration grace = by_priority ? v.job->checkpoint.grace : std::min(v.job->checkpoint.grace, cs.cfg.reclaim_grace);
  d.evict_by = d.phase == PreemptPhase::kEvict ? cs.now : cs.now + std::max<Duration>(0, grace);
  d.reason = std::move(reason);
  cs.out.preempt.push_back(std::move(d));
}

VictimSearch try_preempt(CycleState& cs, Entry& e, const Gang& gang, bool off_reservation) {
  VictimSearch none;
  const int budget = cs.cfg.max_preemptions_per_cycle - cs.preemptions;
  if (budget <= 0 || e.milli <= 0) return none;
  // The reserved nodes blocked from the first look at the cluster until this returns.
  std::optional<ReservedBlocked> blocked;
  auto block = [&] {
    if (!blocked) blocked.emplace(cs, off_reservation);
  };
  VictimSearch mig;
  mig.outcome = VictimSearch::Outcome::kPreempting;
  if (gang.task.mig() && cs.cfg.dynamic_mig && (block(), reclaim_gpu_for_mig(cs, e, gang))) return mig;
  // Victims only become fewer within a cycle: a failed search stays failed for the same ask.
  std::string memo = shape_key(gang);
  for (int64_t n : {e.prio, int64_t(e.job->queue.value), int64_t(cs.cfg.in_queue_las ? e.las : 0)}) {
    memo += '|';
    append_int(memo, n);
  }
  if (off_reservation) memo += "|off";
  // An owner's MIG request that no instance frees in time takes a whole GPU for the planner.
  auto or_mig = [&] { return gang.task.mig() && (block(), reclaim_gpu_for_mig(cs, e, gang)) ? mig : none; };
  if (cs.no_victims.count(memo)) return or_mig();
  // Bounded work per cycle: after this many fruitless searches, later jobs wait for the next cycle
  // (the most deserving jobs, first in order, were searched).
  if (cs.failed_searches >= cs.cfg.max_victim_searches_per_cycle) return or_mig();
  block();
  VictimSearch found = find_victims(cs, e, gang, budget, off_reservation);
  if (found.outcome == VictimSearch::Outcome::kNone) {
    cs.no_victims.insert(memo);
    if (found.searched) ++cs.failed_searches;
    return or_mig();
  }
  return found;
}

bool reclaim_gpu_for_mig(CycleState& cs, Entry& e, const Gang& gang, bool by_priority_too) {
  if (!cs.cfg.dynamic_mig || cs.preemptions >= cs.cfg.max_preemptions_per_cycle) return false;
  // Its queue's guarantee (reclaim from borrowers), or its class (priority: urgent work is served at
  // once, MIG or not, from a lower class's whole GPU, by the rules of priority preemption).
  const GuaranteeJob claimant = facts(e);
  const std::vector<std::string> classes = cs.ledger->owed_classes(claimant);
  const bool may_reclaim = !classes.empty();
  const bool may_priority = by_priority_too && cs.cfg.preemption && e.pc->can_preempt;
  if (!may_reclaim && !may_priority) return false;
  const TaskRequest& t = gang.task;
  const std::string memo = std::to_string(e.job->queue.value) + "|" + t.mig_profile;
  if (cs.mig_reclaimed.count(memo)) return false;  // one GPU per queue and profile per cycle
  // GPUs that could offer the profile (model, pool, node size), by node.
  auto capable = [&](const Node& n) { return could_host(cs, n, t) && n.gpu_model()->find_profile(t.mig_profile); };
  // An idle whole GPU is the planner's to convert, and one on its way out will be: nothing to take.
  for (const Node& n : cs.work.nodes())
    if (capable(n))
      for (const Gpu& g : n.gpus)
        if (g.health == GpuHealth::kHealthy && !g.mig_enabled && g.idle()) return false;
  for (const Entry& v : cs.entries)
    if (v.running && v.job->state == JobState::kCheckpointing)
      for (const TaskPlacement& p : v.holding)
        if (capable(cs.work.node(p.node)))
          for (const GpuGrant& g : p.gpus)
            if (g.kind == GrantKind::kWhole) return false;
  // Nor one being repartitioned into slices of this profile (a MIG decision of an earlier cycle).
  for (const Node& n : cs.work.nodes())
    if (capable(n)) {
      const MigProfile* want = n.gpu_model()->find_profile(t.mig_profile);
      for (const Gpu& g : n.gpus)
        if (g.health == GpuHealth::kReconfiguring && g.mig_enabled)
          for (const MigInstance& i : g.mig.instances())
            if (!i.in_use && i.profile_id == want->id) return false;
    }
  // A GPU freed for slices earlier this cycle becomes a layout the planner packs with every pending
  // profile: a request its remaining compute holds waits for it (no second victim).
  for (auto& [node, left] : cs.mig_freed)
    if (left >= e.milli && capable(cs.work.node(node))) {
      left -= e.milli;
      e.wait = WaitCategory::kPreempting;
      e.reason = "waiting for a GPU preempted this cycle to checkpoint and exit; it then becomes MIG slices, " +
                 t.mig_profile + " among them";
      e.no_room = e.short_of_room = true;
      return true;
    }
  // The borrower's job holding a whole capable GPU: the lowest class, then the least lost work.
  const Entry* best = nullptr;
  int64_t best_cost = 0;
  bool best_inside = false;
  int best_class = 0;
  bool best_by_priority = false;
  for (const Entry& v : cs.entries) {
    const Job& vj = *v.job;
    if (!v.running || v.victim || v.claimed || vj.state != JobState::kRunning) continue;
    const bool by_reclaim = may_reclaim && vj.queue != e.job->queue && cs.ledger->reclaimable(facts(v), claimant, classes);
    const bool by_priority = may_priority && priority_victim(cs, v, e);
    if (!by_reclaim && !by_priority) continue;
    bool whole_capable = false;
    for (const TaskPlacement& p : v.holding)
      if (capable(cs.work.node(p.node)))
        for (const GpuGrant& g : p.gpus) whole_capable = whole_capable || g.kind == GrantKind::kWhole;
    if (!whole_capable) continue;
    const bool inside = !by_priority && cs.ledger->inside_own_guarantee(vj.queue, classes);
    const int64_t cost = lost_work_cost(cs, v);
    const int cls = v.pc->value;
    if (!best || std::tie(inside, cls, cost, vj.id) < std::tie(best_inside, best_class, best_cost, best->job->id))
      best = &v, best_cost = cost, best_inside = inside, best_class = cls, best_by_priority = !by_reclaim;
  }
  if (!best) return false;
  cs.mig_reclaimed.insert(memo);
  for (const TaskPlacement& p : best->holding)  // its first whole capable GPU, less this request
    if (capable(cs.work.node(p.node)) && std::any_of(p.gpus.begin(), p.gpus.end(),
                                                   [](const GpuGrant& g) { return g.kind == GrantKind::kWhole; })) {
      cs.mig_freed.emplace_back(p.node, std::max<int64_t>(0, 1000 - e.milli));
      break;
    }
  preempt(cs, cs.entries[size_t(best - cs.entries.data())], e, best_by_priority,
          best_by_priority ? "priority: " + e.pc->name + " job " + e.job->name + " needs a GPU for " + t.mig_profile +
                                 " MIG slices"
                           : "reclaim: queue " + cs.tree.queue(e.job->queue).name + " takes back its guarantee (a GPU for " +
                                 t.mig_profile + " MIG slices)");
  ++cs.preemptions;
  e.wait = WaitCategory::kPreempting;
  e.reason = "waiting for 1 preempted job to checkpoint and exit; its GPU then becomes " + t.mig_profile + " MIG slices";
  e.no_room = true;  // still demand for the MIG planner
  e.short_of_room = true;
  return true;
}

bool priority_victim(const CycleState& cs, const Entry& v, const Entry& e) {
  const Job& vj = *v.job;
  const bool protected_now = (vj.started >= 0 && cs.now - vj.started < v.pc->min_runtime) ||
                             (vj.last_preempted >= 0 && cs.now - vj.last_preempted < cs.cfg.preemption_protection);
  return !protected_now && v.pc->preemptible && v.prio < e.prio &&
         (vj.queue == e.job->queue || cs.ledger->borrows(facts(v)) || cs.cfg.order == JobOrder::kLeastAttained);
}

TrialFit trial_fit(CycleState& cs, const FairShare& fs, const Entry& e, const Gang& gang, const std::vector<NodeId>* within) {
  TrialFit t;
  PlacementResult r = within ? cs.trial.place_within(cs.work, gang, *within) : cs.trial.place(cs.work, gang);
  if (r.outcome != Outcome::kPlaced) return t;
  t.placed = true;
  const ClassAmounts got = placement_amounts(cs, cs.work, r.tasks);
  if (fs.within_limits(e.job->queue, got).ok() && cs.ledger->takes_owed(fs, e.job->queue, got).empty())
    t.fit = std::move(r.tasks);
  return t;
}

std::optional<std::vector<TaskPlacement>> fits_under(CycleState& cs, const FairShare& fs, const Entry& e, const Gang& gang,
                                                     const std::vector<NodeId>* within) {
  return trial_fit(cs, fs, e, gang, within).fit;
}

VictimSearch find_victims(CycleState& cs, Entry& e, const Gang& gang, int budget, bool off_reservation) {
  // With claims active, the search sees the victims chosen before gone and the waiting preemptors'
  // claims in their place; undone once it is over.
  ScratchEdits claimed(cs.work);
  bool claims_active = cs.claims_ok && !cs.claims.empty();
  std::vector<NodeId> freed;  // nodes with more room in this view than when the job found none
  if (claims_active) {
    for (size_t i : cs.reference ? cs.running : leaving_marked(cs))
      if (const Entry& v = cs.entries[i]; v.running && (v.victim || v.claimed) && !v.holding.empty()) {
        const bool ok = claimed.release(v.holding);
        assert(ok && "releasing a victim for a later preemptor failed");
        (void)ok;
        for (const TaskPlacement& p : v.holding) freed.push_back(p.node);
      }
    bool all = true;
    for (const std::vector<TaskPlacement>& c : cs.claims) all = all && claimed.apply(c);
    if (!all) {  // a job started since took part of a claim: give the idea up
      claimed.undo();
      claims_active = false;
      cs.claims_ok = false;
      cs.claims.clear();
      freed.clear();
    }
  }
  VictimSearch s = find_victims_inner(cs, e, gang, budget, claims_active, std::move(freed));
  std::optional<MovePlan> moves;
  if (s.outcome == VictimSearch::Outcome::kNone && cs.cfg.defragment && cs.cfg.reclaim)
    moves = find_moves(cs, e, gang, off_reservation);
  claimed.undo();
  if (moves) {
    commit_moves(cs, e, *moves);
    s.outcome = VictimSearch::Outcome::kPreempting;
    s.fit = std::move(moves->fit);
  }
  if (s.partial) {  // the fit assumed victims not preempted yet: no claim on it this cycle
    cs.claims_ok = false;
    cs.claims.clear();
  } else if (s.outcome != VictimSearch::Outcome::kNone && !s.fit.empty()) {
    bool whole = true;
    for (const TaskPlacement& p : s.fit)
      for (const GpuGrant& g : p.gpus) whole = whole && g.kind == GrantKind::kWhole;
    if (whole) {
      std::vector<TaskPlacement> claim = hold_free_part(cs, e, s.fit);
      if (!claim.empty()) cs.claims.push_back(std::move(claim));
    } else {
      cs.claims_ok = false;
      cs.claims.clear();
    }
  }
  return s;
}

// The GPUs of a waiting preemptor's fit that are free now are held for it for the rest of the cycle,
// so a job later in the order does not take them and leave its victims' exits to nobody; what the
// jobs leaving hold is returned as its claim, which later victim searches count.
std::vector<TaskPlacement> hold_free_part(CycleState& cs, const Entry& e, const std::vector<TaskPlacement>& fit) {
  std::vector<TaskPlacement> hold, claim;
  for (const TaskPlacement& p : fit) {
    TaskPlacement h{p.node, MilliCpu{0}, MiB{0}, p.task_class, {}};
    TaskPlacement c = p;
    c.gpus.clear();
    for (const GpuGrant& g : p.gpus) (cs.work.node(p.node).gpus[g.gpu].idle() ? h : c).gpus.push_back(g);
    if (c.gpus.empty()) std::swap(h.cpu, c.cpu), std::swap(h.memory, c.memory);  // all free now
    if (!h.gpus.empty()) hold.push_back(std::move(h));
    if (!c.gpus.empty()) claim.push_back(std::move(c));
  }
  if (hold.empty() || !cs.work.apply_all(hold).ok()) return fit;
  if (cs.held_for.empty()) cs.held_first = e.job->name;
  cs.held_milli += placement_milli(hold);
  cs.held_for.push_back({e.job->id, std::move(hold)});
  cs.held_text = gpus_text(cs.held_milli) + " held this cycle for " +
               (cs.held_for.size() == 1 ? "job " + cs.held_first
                                      : std::to_string(cs.held_for.size()) + " jobs (the first job " + cs.held_first + ")") +
               ", waiting for preempted jobs to leave";
  return claim;
}

bool takes_owed_room(CycleState& cs, const Entry& e, const std::vector<TaskPlacement>& fit) {
  std::vector<size_t> owed = owed_below_that_fit(cs, e);  // they fit the free GPUs as the cycle began
  // Those that did not fit then may fit in the room the victims free (as the next cycle sees it).
  if (cs.cfg.reclaim && e.pc->preemptible && cs.ledger->borrows_after(facts(e)))
    for (const CycleState::OwedUnfit& u : cs.owed_unfit)
      for (size_t i : u.entries) {
        const Entry& o = cs.entries[i];
        if (owed.size() >= 2 * kOwedBelowChecked) break;
        if (o.running || o.started || o.milli <= 0 || o.pc->value >= e.pc->value || o.job->queue == e.job->queue) continue;
        if (cs.ledger->owed(facts(o)) && std::find(owed.begin(), owed.end(), i) == owed.end()) owed.push_back(i);
      }
  if (owed.empty() || fit.empty()) return false;
  ScratchEdits start(cs.work);
  if (!start.apply(fit)) return false;
  for (size_t o : owed) {
    if (place_owed(cs, o).outcome == Outcome::kPlaced) continue;  // it still fits with the start
    start.undo();
    if (place_owed(cs, o).outcome == Outcome::kPlaced) return true;
    if (!start.apply(fit)) return false;
  }
  return false;
}

VictimSearch find_victims_inner(CycleState& cs, Entry& e, const Gang& gang, int budget, bool claims_active,
                                std::vector<NodeId> freed) {
  VictimSearch s;
  const GuaranteeJob claimant = facts(e);
  const std::vector<std::string> reclaim_classes = cs.ledger->owed_classes(claimant);
  const bool may_reclaim = !reclaim_classes.empty();
  // In-queue least attained service: a job of the queue that has attained a higher level gives way
  // to one of the same class that has attained less (Tiresias inside one team's share), but only
  // when the queue has no guarantee left to reclaim from borrowers instead.
  const bool las_on = cs.cfg.in_queue_las && !may_reclaim;
  // When the job defers to queues owed their guarantee (the order tries it at its tier's end), a
  // victim that, waiting again, would not is tried before it in the next cycle (fits_after).
  const bool e_defers =
      las_on && job_order_policy(cs.cfg.order).rules().defers_to_owed && cs.ledger->defers_to_owed(claimant);

  using Cand = VictimCandidate;
  std::vector<Cand> cands;
  // Neither priority nor reclaim may take anything for it: no candidate (the scans below would find
  // none; skipped but in the reference run).
  if (!cs.reference && !may_reclaim && !(cs.cfg.preemption && e.pc->can_preempt)) return s;
  // Jobs already checkpointing on their way out free their GPUs within their save time: count them
  // first (no new decision, no lost work), so a preemptor waiting for its victims to leave does not
  // preempt more jobs in the cycles in between.
  if ((cs.cfg.preemption && e.pc->can_preempt) || may_reclaim)
    for (const RunningFacts& f : cs.running_facts) {
      if (!cs.reference && !(f.flags & RunningFacts::kCheckpointing)) continue;
      const Entry& v = cs.entries[f.entry];
      if (v.running && !v.claimed && v.job->state == JobState::kCheckpointing && !v.holding.empty())
        cands.push_back({f.entry, -1, true, true});
    }
  // Could priority or reclaim take a job with these facts at all (a superset of the rules below)?
  const bool may_priority = cs.cfg.preemption && e.pc->can_preempt;
  auto may_take = [&](const RunningFacts& f) {
    if (!(f.flags & RunningFacts::kRunningPlaced)) return false;
    const bool same_queue = f.queue == e.job->queue.value;
    const bool by_priority = may_priority && (f.flags & RunningFacts::kPreemptible) &&
                             !(f.flags & RunningFacts::kProtected) &&
                             (f.prio < e.prio || (cs.cfg.in_queue_las && same_queue && f.prio == e.prio));
    const bool by_reclaim = may_reclaim && !same_queue &&
                            ((f.flags & RunningFacts::kPreemptible) || f.class_value <= claimant.class_value);
    return by_priority || by_reclaim;
  };
  // Outside the reference run, the same tests on the packed facts (no read of the job), with the
  // ledger's borrowing of class "any" kept per queue while its fair share is unchanged.
  auto borrows_any = [&](uint32_t q) {
    if (cs.borrows_any.size() != cs.tree.size()) cs.borrows_any.assign(cs.tree.size(), {0, false});
    auto& [generation, borrows] = cs.borrows_any[q];
    if (generation != fs(cs).generation()) {
      generation = fs(cs).generation();
      borrows = fs(cs).borrowing(QueueId(q), kAnyClass);
    }
    return borrows;
  };
  for (const RunningFacts& f : cs.running_facts) {
    if (!cs.reference && !may_take(f)) continue;
    if (!cs.reference) {
      if (f.flags & RunningFacts::kVictim) continue;
      const bool same_queue = f.queue == e.job->queue.value;
      const bool by_las = las_on && same_queue && f.prio == e.prio && f.las > e.las;
      auto borrows = [&] {
        if (!(f.flags & RunningFacts::kHoldsGpu)) return true;
        return f.flags & RunningFacts::kAnyOnly ? borrows_any(f.queue) : cs.ledger->borrows(facts(cs.entries[f.entry]));
      };
      const bool by_priority =
          may_priority && !(f.flags & RunningFacts::kProtected) && (f.flags & RunningFacts::kPreemptible) &&
          ((f.prio < e.prio && (same_queue || borrows() || cs.cfg.order == JobOrder::kLeastAttained)) || by_las);
      const bool by_reclaim =
          may_reclaim && !same_queue && cs.ledger->reclaimable(facts(cs.entries[f.entry]), claimant, reclaim_classes);
      if (!by_priority && !by_reclaim) continue;
      const bool inside_own = !by_priority && cs.ledger->inside_own_guarantee(QueueId(f.queue), reclaim_classes);
      cands.push_back({f.entry, f.cost, by_priority, false, inside_own, by_reclaim, &f});
      continue;
    }
    const size_t i = f.entry;
    const Entry& v = cs.entries[i];
    const Job& vj = *v.job;
    if (!v.running || v.victim || vj.state != JobState::kRunning || vj.placement.empty()) continue;
    // min_runtime and the protection window shield a job from priority preemption; a guarantee's
    // owner reclaims regardless (borrowed capacity is lent on those terms).
    const bool protected_now = (vj.started >= 0 && cs.now - vj.started < v.pc->min_runtime) ||
                               (vj.last_preempted >= 0 && cs.now - vj.last_preempted < cs.cfg.preemption_protection);
    const bool same_queue = vj.queue == e.job->queue;
    const bool by_las = las_on && same_queue && v.prio == e.prio && v.las > e.las;  // as above
    const bool by_priority = cs.cfg.preemption && !protected_now && e.pc->can_preempt && v.pc->preemptible &&
                             ((v.prio < e.prio &&
                               (same_queue || cs.ledger->borrows(facts(v)) || cs.cfg.order == JobOrder::kLeastAttained)) ||
                              by_las);
    const bool by_reclaim = may_reclaim && !same_queue && cs.ledger->reclaimable(facts(v), claimant, reclaim_classes);
    if (!by_priority && !by_reclaim) continue;
    const bool inside_own = !by_priority && cs.ledger->inside_own_guarantee(vj.queue, reclaim_classes);
    cands.push_back({i, lost_work_cost(cs, v), by_priority, false, inside_own, by_reclaim});
  }
  // With this cycle's victims gone and their preemptors placed, the job may fit already: it waits
  // for those exits like its own victims (no new decision).
  if (claims_active && ((cs.cfg.preemption && e.pc->can_preempt) || may_reclaim)) {
    if (auto fit = fits_under(cs, fs(cs), e, gang)) {
      s.outcome = VictimSearch::Outcome::kOnlyLeaving;
      s.fit = std::move(*fit);
      return s;
    }
  }
  // Cheap bound before copying the cluster: all candidates plus what is free must cover the job.
  int64_t room = cs.work.total_gpus() * 1000 - cs.work.allocated_gpu_milli();
  for (const Cand& c : cands) room += cs.entries[c.idx].milli;
  if (cands.empty() || room < e.milli) return s;
  s.searched = true;

  // Add victims one by one on a scratch copy until the engine places the job. A fresh engine: its
  // score cache must not mix the scratch copy's node generations with the working copy's.
  // Release victims one by one on the working copy itself (their placements are put back below:
  // victims keep their resources this cycle) until the engine places the job. The engine's cache is
  // keyed by node generation, which every release/apply advances, so it stays valid.
  // Allocations as if the victims chosen so far were gone. Fits are checked against its limits and
  // owed guarantees (try_job checks the GPUs chosen too: a preemption for a placement they then
  // refuse would free room for nobody, again and again).
  FairShare after = fs(cs);
  // Rule (b) holds across the cycle: the victims chosen before (by earlier searches this cycle, or
  // still checkpointing from an earlier cycle) are gone already, so a victim queue that stops
  // borrowing once they leave gives up nothing more.
  if (cs.reference) {
    for (size_t i : cs.running)
      if (const Entry& v = cs.entries[i]; v.running && (v.victim || v.job->state == JobState::kCheckpointing))
        after.add(v.job->queue, amounts(v), -1);
  } else {  // the same jobs: those checkpointing, and this cycle's victims that are not
    for (const RunningFacts& f : cs.running_facts)
      if (f.flags & RunningFacts::kCheckpointing) after.add(QueueId(f.queue), amounts(cs.entries[f.entry]), -1);
    for (size_t i : leaving_marked(cs))
      if (const Entry& v = cs.entries[i]; v.running && v.victim && v.job->state != JobState::kCheckpointing)
        after.add(v.job->queue, amounts(v), -1);
  }
  std::vector<Cand> chosen;
  bool fits = false, room_opened = false;
  // The engine found no node for the job before this cycle's victims were released (the caller found
  // no room), so only a node a victim leaves can hold it: the victims of earlier searches (`freed`,
  // with claims active) and this search's. Outside the reference run the engine looks at those
  // alone (PlacementEngine::place_within: a lone task; otherwise every node).
  // (Bounded: a search that releases hundreds of victims, each followed by a trial, would otherwise
  // look at all their nodes each time; past the bound the nodes are no longer kept, and the engine's
  // index of fitting nodes answers.)
  constexpr size_t kWithinAtMost = 256;
  std::vector<NodeId> released_on = std::move(freed);
  std::sort(released_on.begin(), released_on.end());
  released_on.erase(std::unique(released_on.begin(), released_on.end()), released_on.end());
  auto note_released = [&](const std::vector<TaskPlacement>& pl) {
    for (const TaskPlacement& tp : pl)
      if (released_on.size() <= kWithinAtMost && std::find(released_on.begin(), released_on.end(), tp.node) == released_on.end())
        released_on.push_back(tp.node);
  };
  auto within = [&]() -> const std::vector<NodeId>* {
    return cs.reference || released_on.size() > kWithinAtMost ? nullptr : &released_on;
  };
  // While adding victims, releases only add room: once the engine found no node among the released
  // ones, only a node released since can hold the job, and the next trial looks at those alone
  // (`since_no_fit`). Not once the engine found a node the limits or owed guarantees refused: the
  // next best may then be any released node.
  std::vector<NodeId> since_no_fit = released_on;
  bool narrow = true;
  ScratchEdits released(cs.work);  // the chosen victims' releases; undone before this returns
  // A guarantee's owner may need more victims than one cycle's budget (a gang of whole nodes among
  // small borrowers): the search may take every candidate, and the victims beyond the budget are
  // preempted in later cycles (those already leaving then count first).
  const int cap = may_reclaim ? std::max(budget, int(cands.size())) : budget;
  bool inconsistent = false;
  // Candidates in victim order, taken until the job fits or the cap is reached (visit_victims).
  visit_victims(cs, gang, std::move(cands), [&](const Cand& c) {
    if (int(chosen.size()) >= cap) return false;
    const Entry& v = cs.entries[c.idx];
    // Judged with the victims chosen before gone (`after`): reclaim only while the victim's queue
    // still borrows and keeps its guarantees (every class, up to the level it shares with e's); another queue's job by priority only if its queue keeps its guarantee, at every
    // level of the tree, once this victim is gone too.
    if (!c.leaving && v.job->queue != e.job->queue) {
      const bool reclaim_ok = c.by_reclaim && cs.ledger->may_reclaim_from(after, facts(v), e.job->queue, reclaim_classes);
      const bool priority_ok =
          c.by_priority && (cs.cfg.order == JobOrder::kLeastAttained || cs.ledger->keeps_guarantee(after, facts(v)));
      if (!reclaim_ok && !priority_ok) return true;
    }
    if (!c.leaving) after.add(v.job->queue, amounts(v), -1);
    const auto& pl = v.holding;
    if (!released.release(pl)) {  // inconsistent snapshot: put everything back, preempt nothing
      inconsistent = true;
      return false;
    }
    chosen.push_back(c);
    note_released(pl);
    for (const TaskPlacement& tp : pl) since_no_fit.push_back(tp.node);
    // The job did not fit before any release, so a fit needs a task's room on a released node:
    // try the engine only once some released node can hold one task.
    if (!room_opened)
      for (const TaskPlacement& tp : pl)
        if (check_fit(cs.work.node(tp.node), gang.task) == Misfit::kFits) room_opened = true;
    if (room_opened) {
      const std::vector<NodeId>* look = within();
      if (look && narrow) {
        std::sort(since_no_fit.begin(), since_no_fit.end());
        since_no_fit.erase(std::unique(since_no_fit.begin(), since_no_fit.end()), since_no_fit.end());
        look = &since_no_fit;
      }
      TrialFit t = trial_fit(cs, after, e, gang, look);
      if (t.fit) {
        s.fit = std::move(*t.fit);
        fits = true;
        return false;
      }
      narrow = narrow && !t.placed;
      since_no_fit.clear();
    }
    return true;
  });
  if (inconsistent || !fits) return s;
  // Drop victims that turned out unnecessary (most expensive first, the last one is needed).
  for (size_t k = chosen.size() - 1; k-- > 0;) {
    const Entry& v = cs.entries[chosen[k].idx];
    if (!released.apply(v.holding)) continue;  // put back: stays (on the scratch view) if not needed
    const int sign = chosen[k].leaving ? 0 : 1;  // a job already leaving stays gone from `after`
    if (sign) after.add(v.job->queue, amounts(v), +1);
    if (auto fit = fits_under(cs, after, e, gang, within())) {
      s.fit = std::move(*fit);
      chosen.erase(chosen.begin() + long(k));
    } else {
      released.undo_last();
      if (sign) after.add(v.job->queue, amounts(v), -1);
    }
  }
  // The room the victims free can make a waiting job of a leaf short of its guarantee fit, and
  // that leaf is owed the room then: a start taking it would be refused in the next cycle while the
  // victims restart in their own room (preempted for nothing, again and again).
  std::vector<size_t> victims;
  for (const Cand& c : chosen) victims.push_back(c.idx);
  const bool takes_owed = takes_owed_once_freed(cs, after, e, s.fit, victims, within());
  // Victims of least attained service tried before the job in the next cycle restart first: for
  // nothing (again and again) if the job then no longer fits.
  bool retaken = false;
  if (e_defers && !takes_owed) {
    std::vector<size_t> first;
    for (const Cand& c : chosen)
      if (const Entry& v = cs.entries[c.idx];
          c.by_priority && v.job->queue == e.job->queue && v.prio == e.prio && !cs.ledger->defers_to_owed(as_pending(cs, v)))
        first.push_back(c.idx);
    retaken = !first.empty() && !fits_after(cs, after, e, gang, first);
  }
  // The next cycle refuses a start that takes the room of a job of a lower class owed its guarantee
  // (owed_room_taken): preempting for it would free room it may not take, and its victims restart
  // there, once per protection window (seeds 7687 and 8728).
  const bool owed_room = !takes_owed && !retaken && takes_owed_room(cs, e, s.fit);
  released.undo();
  if (takes_owed || retaken || owed_room) {
    s.fit.clear();
    return s;
  }

  const std::string need = gpus_text(e.milli);
  int fresh = 0, later = 0;
  for (const Cand& c : chosen) fresh += c.leaving ? 0 : 1;
  if (fresh > budget) {  // the first `budget` now (cheapest nodes first), the rest in later cycles
    later = fresh - budget;
    int kept = 0;
    std::vector<Cand> now;
    for (const Cand& c : chosen)
      if (c.leaving || kept++ < budget) now.push_back(c);
    chosen = std::move(now);
    fresh = budget;
    s.partial = true;
  }
  if (fresh == 0) {
    // The jobs already leaving are enough: nothing new is preempted; the job waits for them like any
    // job without room (its reservation is their exit). They are not counted by a later preemptor.
    for (const Cand& c : chosen) {
      cs.entries[c.idx].claimed = true;
      cs.marked_leaving.push_back(c.idx);
    }
    s.outcome = VictimSearch::Outcome::kOnlyLeaving;
    return s;
  }
  for (const Cand& c : chosen) {
    Entry& v = cs.entries[c.idx];
    if (c.leaving) {  // not counted again by a later preemptor; no new decision
      v.claimed = true;
      cs.marked_leaving.push_back(c.idx);
      continue;
    }
    const bool las_turn = c.by_priority && v.job->queue == e.job->queue && v.prio == e.prio;
    preempt(cs, v, e, c.by_priority,
            las_turn ? "least attained service: job " + e.job->name + " of the same queue has run less and needs " + need
            : c.by_priority ? "priority: " + e.pc->name + " job " + e.job->name + " needs " + need
                            : "reclaim: queue " + cs.tree.queue(e.job->queue).name + " takes back its guarantee");
  }
  cs.preemptions += fresh;
  // Victims keep their resources in the working copy this cycle, so nobody else takes the room.
  e.wait = WaitCategory::kPreempting;
  e.reason = "waiting for " + std::to_string(chosen.size()) +
             (chosen.size() == 1 ? " preempted job" : " preempted jobs") + " to checkpoint and exit";
  if (later > 0) e.reason += "; " + std::to_string(later) + " more to be preempted in later cycles (max_preemptions_per_cycle)";
  s.outcome = VictimSearch::Outcome::kPreempting;
  return s;
}

}  // namespace tessera::sched
