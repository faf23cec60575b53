// Placing one job now: limits, the engine's fit, the owed-guarantee check, the start; and what a
// job that finds no room is told.
#include "core/sched/cycle.h"
#include "core/sched/scratch.h"

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

// The GPU models e's gang allows, in a class where e's start is owed its room (its queue stays within
// its guarantee there, GuaranteeLedger::owed_classes), on which a start of e's size takes nothing
// another queue is owed (GuaranteeLedger::takes_owed), when they are fewer than it allows; else none.
// Borrowers get no retry: a victim restarting on another model could take the part of a
// preemptor's room in a class nobody is owed.
static std::vector<std::string> models_not_owed(const CycleState& cs, const Entry& e, const Gang& gang) {
  std::vector<std::string> out;
  if (gang.task.gpu_models.size() == 1 || e.milli <= 0) return out;
  const std::vector<std::string> mine = cs.ledger->owed_classes(facts(e));
  if (mine.empty()) return out;
  const bool any = std::find(mine.begin(), mine.end(), kAnyClass) != mine.end();
  const std::vector<std::string> allowed = allowed_models(cs, gang.task);
  for (const std::string& m : allowed) {
    const std::string cls = model_class_of(cs, m);
    if (!any && std::find(mine.begin(), mine.end(), cls) == mine.end()) continue;
    if (cs.ledger->takes_owed(fs(cs), e.queue, amounts_of(cls, e.milli)).empty()) out.push_back(m);
  }
  if (out.size() == allowed.size()) out.clear();  // the engine had them all already
  return out;
}

void try_job(CycleState& cs, Entry& e) {
  const ClassAmounts& need = amounts(e);
  if (Status lim = fs(cs).within_limits(e.queue, need); !lim.ok()) {
    e.wait = WaitCategory::kQuota;
    e.reason = lim.message();
    return;
  }
  if (const std::optional<NoRoom>& memo = cs.no_room[e.shape]) {
    // Its shape found no room earlier this cycle. The common case (no MIG, preemption's budget spent
    // or nothing to ask for, a reservation held) needs neither its gang nor the engine.
    const NoRoom& it = *memo;
    std::optional<Gang> g;
    auto gang = [&]() -> const Gang& { return g ? *g : g.emplace(gang_of(cs, e)); };
    const bool mig = e.mig;  // gang_of keeps the task's MIG profile
    if (it.wait == WaitCategory::kMigReconfiguring && mig && claim_gpu_for_mig(cs, e, gang())) {
      e.wait = WaitCategory::kMigReconfiguring;
      e.reason = it.reason + "; an idle GPU is held for it, to be repartitioned";
      e.no_room = e.short_of_room = true;
      return;
    }
    if (it.wait == WaitCategory::kMigReconfiguring && mig && reclaim_gpu_for_mig(cs, e, gang(), true)) return;
    VictimSearch s;  // try_preempt finds none without a budget or an amount: not asked then
    if (cs.preemptions < cs.cfg.max_preemptions_per_cycle && e.milli > 0) s = try_preempt_now(cs, e, gang());
    if (!s.preempting()) {
      e.wait = it.wait;
      e.reason_from_shape = true;  // tried once a cycle: `reason` holds nothing before this
      if (const char* note = leaving_note(s); *note) e.reason = note;
      e.short_of_room = true;
      if (!cs.cfg.backfill || cs.res.active) e.no_room = true;  // what no_room() does then
      else no_room(cs, e, gang());
    }
    return;
  }
  // Refused as the last job of its shape and queue was, with nothing changed since (owed_refusals).
  const bool refusals = !cs.reference && cs.policy.cacheable();
  const std::pair<uint32_t, uint32_t> refusal_key{e.shape, e.queue.value};
  if (refusals)
    if (auto it = cs.owed_refusals.find(refusal_key); it != cs.owed_refusals.end() &&
                                                      it->second.work_generation == cs.work.generation() &&
                                                      it->second.fair_share_generation == fs(cs).generation() &&
                                                      it->second.reservation_active == cs.res.active) {
      e.wait = WaitCategory::kQuota;
      e.reason = it->second.reason;
      return;
    }
  Gang gang = gang_of(cs, e);
  PlaceNow now = place_now(cs, e, gang);
  PlacementResult& r = now.result;
  if (r.outcome == Outcome::kPlaced) {
    bool own_shape = true;  // the gang asked is gang_of(e) (not narrowed to other models below)
    // The classes of the GPUs actually chosen must be within the queue's limits too. If not, and the
    // job allows other models, try once more on those whose class still has room.
    if (Status lim = fs(cs).within_limits(e.job->queue, placement_amounts(cs, cs.work, r.tasks)); !lim.ok()) {
      std::vector<std::string> room;
      if (gang.task.gpu_models.size() != 1)
        for (const std::string& m : allowed_models(cs, gang.task)) {
          ClassAmounts one;
          one[cs.cfg.model_class(m)] = e.milli;
          if (fs(cs).within_limits(e.job->queue, one).ok()) room.push_back(m);
        }
      e.wait = WaitCategory::kQuota;
      if (room.empty()) {
        e.reason = lim.message();
        return;
      }
      gang.task.gpu_models = room;
      own_shape = false;
      now = place_now(cs, e, gang);
      if (r.outcome != Outcome::kPlaced) {
        e.reason = lim.message() + "; no room on other models: " + r.reason;
        return;
      }
    }
    std::string owed = cs.ledger->takes_owed(fs(cs), e.queue, placement_amounts(cs, cs.work, r.tasks));
    if (!owed.empty()) {
      // The engine chose GPUs another queue is owed. A job owed its room in another class tries once
      // more on that class's models no queue is owed: a queue owed A100s does not make a job within
      // its queue's H100 guarantee wait while H100s are free.
      if (std::vector<std::string> other = models_not_owed(cs, e, gang); !other.empty()) {
        Gang narrowed = gang;
        narrowed.task.gpu_models = std::move(other);
        PlaceNow again = place_now(cs, e, narrowed);
        if (again.result.outcome == Outcome::kPlaced) {
          const ClassAmounts got = placement_amounts(cs, cs.work, again.result.tasks);
          if (fs(cs).within_limits(e.job->queue, got).ok() && cs.ledger->takes_owed(fs(cs), e.queue, got).empty()) {
            gang = std::move(narrowed);
            now = std::move(again);
            own_shape = false;
            owed.clear();
          }
        }
      }
    }
    if (!owed.empty()) {
      e.wait = WaitCategory::kQuota;
      auto on_reserved = [&](const TaskPlacement& p) { return cs.res.nodes.count(p.node.value) > 0; };
      if (refusals && own_shape && !now.off_reserved && std::none_of(r.tasks.begin(), r.tasks.end(), on_reserved))
        cs.owed_refusals[refusal_key] = {cs.work.generation(), fs(cs).generation(), cs.res.active, owed};
      e.reason = std::move(owed);
      return;
    }
    const std::vector<size_t> owed_fit = owed_below_that_fit(cs, e);
    const ClusterState::MigLayouts before = cs.work.mig_layouts_changed_by(r.tasks);
    if (Status s = cs.work.apply_all(r.tasks); !s.ok()) {
      e.wait = WaitCategory::kOther;
      e.reason = "internal: placement could not be applied: " + s.message();
      return;
    }
    if (const std::optional<size_t> o = owed_room_taken(cs, owed_fit, r.tasks, before)) {  // undone again
      const Entry& owner = cs.entries[*o];
      e.wait = WaitCategory::kQuota;
      e.reason = "guarantee: would take the GPUs that job " + owner.job->name + " of queue " +
                 cs.tree.queue(owner.job->queue).name + " (owed its guarantee, a lower priority class) starts on";
      return;
    }
    commit_start(cs, e, std::move(r.tasks));
    return;
  }
  if (now.only_on_reserved) {
    // A queue owed its guarantee takes it back from borrowers elsewhere rather than wait for the
    // reservation (victims are sought off the reserved nodes, as the engine keeps off them).
    if (cs.ledger->owed(facts(e)) && try_preempt(cs, e, gang, true).preempting()) return;
    e.wait = WaitCategory::kReservation;
    e.reason = r.reason;
    return;
  }
  if (r.outcome == Outcome::kNeverFits && cs.cfg.dynamic_mig && blocked_by_mig_mode(cs, gang.task)) {
    // MIG mode is not permanent: the planner can change idle GPUs for it.
    r.reason = gang.task.mig() ? "needs a " + gang.task.mig_profile + " MIG instance; no GPU that offers one is in MIG mode now"
                               : "needs whole GPUs; the GPUs that could hold it are in MIG mode now";
    cs.no_room[e.shape] = NoRoom{r.reason, WaitCategory::kMigReconfiguring};
    const bool claimed = gang.task.mig() && claim_gpu_for_mig(cs, e, gang);
    if (!claimed && gang.task.mig() && reclaim_gpu_for_mig(cs, e, gang, true)) return;
    e.wait = WaitCategory::kMigReconfiguring;
    e.reason = r.reason + (claimed ? "; an idle GPU is held for it, to be repartitioned" : "");
    e.no_room = true;  // demand for the MIG planner; no reservation (ends of running jobs do not help)
    e.short_of_room = true;
    return;
  }
  if (std::string note = pool_note(cs, gang); !note.empty()) r.reason = note + "; " + r.reason;
  if (!cs.held_for.empty()) r.reason += "; " + cs.held_text;
  if (!cs.cfg.elastic_capacity && gang.topology.mode == TopologyMode::kRequired &&
      e.job->gang.topology.mode == TopologyMode::kPreferred)
    r.reason = "holds out for one node (config.topology_wait " + duration_text(cs.cfg.topology_wait) +
               ", then it may be spread); " + r.reason;
  // Room that exists only outside the one domain a spread gang requires is a topology wait.
  const WaitCategory wait = gang.topology.mode == TopologyMode::kRequired && gang.tasks > 1 ? WaitCategory::kTopology
                                                                                           : WaitCategory::kCapacity;
  cs.no_room[e.shape] = NoRoom{r.reason, wait};
  VictimSearch s;
  if (r.outcome == Outcome::kRetryLater) s = try_preempt_now(cs, e, gang);
  if (s.preempting()) return;
  e.wait = wait;
  (e.reason = std::move(r.reason)) += leaving_note(s);
  e.short_of_room = true;
  if (r.outcome == Outcome::kRetryLater) no_room(cs, e, gang);
}

void commit_start(CycleState& cs, Entry& e, std::vector<TaskPlacement> tasks) {
  e.started = true;
  e.end = cs.now + occupied_runtime(cs, *e.job);
  e.start_index = int(cs.out.start.size());
  const ClassAmounts got = placement_amounts(cs, cs.work, tasks);
  cs.ledger->add(e.job->queue, got, +1);
  cs.user_milli[e.user] += get_or(got, kAnyClass);
  cs.out.start.push_back({e.job->id, std::move(tasks)});
}

// A job moved out of an owed gang's way restarts on the GPUs held for it while it checkpointed, ahead
// of the cycle's order (its queue keeps its share: the move is one step). Taken or gone since (a
// failure): it is placed in order like any job.
void start_moved(CycleState& cs) {
  for (size_t i = 0; i < cs.entries.size(); ++i) {
    Entry& e = cs.entries[i];
    if (e.running || e.job->move_to.empty()) continue;
    if (!fs(cs).within_limits(e.job->queue, amounts(e)).ok()) continue;
    std::vector<TaskPlacement> tasks = settled(e.job->move_to);
    if (int(tasks.size()) != e.job->gang.tasks) continue;
    bool usable = true;
    for (const TaskPlacement& p : tasks)
      usable = usable && p.node.value < cs.work.nodes().size() && cs.work.node(p.node).schedulable &&
               e.job->gang.task.pool_kind_allowed(cs.work.node(p.node).pool_kind) &&
               e.job->gang.task.data_pool_allowed(cs.work.node(p.node).pool);
    if (!usable) continue;
    if (!cs.work.apply_all(tasks).ok()) {
      // Its GPUs are still held by jobs leaving (a borrower reclaimed for it saves longer than it
      // did): it waits for them, as planned, rather than restart elsewhere (perhaps in the room
      // it was moved out of, for the job that room was made for).
      if (const std::string holder = destination_leaver(cs, tasks); !holder.empty()) {
        hold_idle(cs, tasks);
        e.awaits_move = true;
        e.wait = WaitCategory::kPreempting;
        e.reason = "moved: waits for its new GPUs, which job " + holder + " frees when it has left";
        cs.order.push_back(i);
      }
      continue;
    }
    cs.order.push_back(i);
    commit_start(cs, e, std::move(tasks));
  }
}

std::string destination_leaver(const CycleState& cs, const std::vector<TaskPlacement>& tasks) {
  std::map<std::pair<uint32_t, uint16_t>, const Entry*> by;  // GPUs of jobs checkpointing on their way out
  for (const Entry& v : cs.entries)
    if (v.running && v.job->state == JobState::kCheckpointing)
      for (const TaskPlacement& p : v.holding)
        for (const GpuGrant& g : p.gpus) by[{p.node.value, g.gpu}] = &v;
  std::string first;
  for (const TaskPlacement& p : tasks)
    for (const GpuGrant& g : p.gpus) {
      if (g.gpu >= cs.work.node(p.node).gpus.size()) return "";
      if (cs.work.node(p.node).gpus[g.gpu].idle()) continue;
      auto it = by.find({p.node.value, g.gpu});
      if (it == by.end()) return "";  // held by a job that is not leaving: the plan no longer holds
      if (first.empty()) first = it->second->job->name;
    }
  return first;
}

// Which pool rule keeps the gang off nodes where it would fit now (or, if none would, off any
// node); "" when no rule excludes anything.
std::string pool_note(const CycleState& cs, const Gang& gang) {
  if (std::all_of(cs.work.pools().begin(), cs.work.pools().end(),
                  [&](const Pool& p) { return (gang.task.pool_kinds & pool_kind_bit(p.kind)) != 0; }))
    return "";  // no pool is excluded (the common case: no pools declared)
  TaskRequest any = gang.task;
  any.pool_kinds = kAnyPoolKind;
  std::set<uint32_t> free_pools, excluded_pools;  // by pool id
  for (const Node& n : cs.work.nodes()) {
    if (gang.task.pool_kinds & pool_kind_bit(n.pool_kind)) continue;
    excluded_pools.insert(n.pool.value);
    if (check_fit(n, any) == Misfit::kFits) free_pools.insert(n.pool.value);
  }
  const std::set<uint32_t>& named = free_pools.empty() ? excluded_pools : free_pools;
  if (named.empty()) return "";
  const Pool& first = cs.work.pool(PoolId(*named.begin()));
  std::string s = pool_rule_reason(gang, cs.cfg.pool_rules, first.kind);
  s += free_pools.empty() ? "; excluded pools:" : "; the free GPUs are on";
  bool sep = false;
  for (uint32_t id : named) {
    const Pool& p = cs.work.pool(PoolId(id));
    s += std::string(sep ? ", " : " ") + pool_kind_name(p.kind) + " pool " + p.name;
    sep = true;
  }
  return s;
}

// GPU i of n is whole, healthy and idle, and the planner may change it now (not within
// min_layout_age of its last change): a GPU to hold for slices, to be repartitioned.
static bool repartitionable(const CycleState& cs, const Node& n, size_t i) {
  const Gpu& g = n.gpus[i];
  if (g.health != GpuHealth::kHealthy || g.mig_enabled || !g.idle()) return false;
  auto changed = cs.snap.mig_last_changed.find(GpuRef{n.id, uint16_t(i)});
  return changed == cs.snap.mig_last_changed.end() || cs.now - changed->second >= cs.cfg.mig.min_layout_age;
}

static std::optional<Gang> owed_gang(const CycleState& cs, const Entry& o);

bool gpu_for_owed_slices(const CycleState& cs, const Entry& e) {
  const std::optional<Gang> g = owed_gang(cs, e);
  if (!g || !g->task.mig()) return false;
  for (const Node& n : cs.work.nodes()) {
    if (!could_host(cs, n, g->task)) continue;
    const MigProfile* profile = n.gpu_model()->find_profile(g->task.mig_profile);
    if (!profile || profile->max_instances <= 0) continue;
    for (size_t i = 0; i < n.gpus.size(); ++i)
      if (repartitionable(cs, n, i)) return true;
  }
  return false;
}

bool claim_gpu_for_mig(CycleState& cs, Entry& e, const Gang& gang) {
  const TaskRequest& t = gang.task;
  int& spare = cs.mig_claim_spare[t.mig_profile];
  const int need = gang.tasks;
  bool claimed = false;
  for (const Node& n : cs.work.nodes()) {
    if (spare >= need) break;
    if (!could_host(cs, n, t)) continue;
    const MigProfile* profile = n.gpu_model()->find_profile(t.mig_profile);
    if (!profile || profile->max_instances <= 0) continue;
    for (size_t i = 0; i < n.gpus.size() && spare < need; ++i) {
      // The planner leaves a GPU changed less than min_layout_age ago alone: holding it would only idle it.
      if (!repartitionable(cs, n, i)) continue;
      TaskPlacement hold{n.id, MilliCpu{0}, MiB{0}, 0, {GpuGrant{uint16_t(i)}}};
      // What is owed is not borrowed, held idle for slices either: a claim its queue would borrow
      // may not take a GPU other queues below their guarantee are owed (else an owner, finding the
      // idle GPU claimed, reclaimed a borrower's job, and the borrowers took turns on the room).
      if (!cs.ledger->takes_owed(fs(cs), e.job->queue, placement_amounts(cs, cs.work, {hold})).empty()) continue;
      if (!cs.work.apply(hold).ok()) continue;
      cs.mig_claims.push_back(std::move(hold));
      spare += profile->max_instances;
      claimed = true;
    }
  }
  if (spare < need && !claimed) return false;
  spare = std::max(0, spare - need);
  cs.mig_claim_class = std::max(cs.mig_claim_class, e.pc->value);
  return true;
}

// Would `t` fit some node if its GPUs' MIG modes were changed (MIG slices on a MIG-capable model,
// or whole GPUs on a node whose GPUs are in MIG mode)?
bool blocked_by_mig_mode(const CycleState& cs, const TaskRequest& t) {
  for (const Node& n : cs.work.nodes()) {
    if (!could_host(cs, n, t)) continue;
    if (t.mig()) {
      if (n.gpu_model()->find_profile(t.mig_profile)) return true;
    } else if (t.whole_gpus() && int(n.gpus.size()) >= t.gpu_count &&
               std::any_of(n.gpus.begin(), n.gpus.end(), [](const Gpu& g) { return g.mig_enabled; })) {
      return true;
    }
  }
  return false;
}

std::vector<size_t> owed_below_that_fit(CycleState& cs, const Entry& e) {
  std::vector<size_t> out;
  if (!cs.cfg.reclaim || !e.pc->preemptible) return out;
  if (!cs.owed_pending) {  // once per cycle: starts only make fewer jobs owed
    std::vector<size_t>& c = cs.owed_pending.emplace();
    for (size_t i = 0; i < cs.entries.size(); ++i) {
      const Entry& o = cs.entries[i];
      if (o.running || o.started || o.milli <= 0) continue;
      if (owed_now(cs, o) && fits_free_now(cs, o)) c.push_back(i);
    }
    std::stable_sort(c.begin(), c.end(), [&](size_t a, size_t b) { return cs.entries[a].pc->value < cs.entries[b].pc->value; });
  }
  if (cs.owed_pending->empty() || cs.entries[cs.owed_pending->front()].pc->value >= e.pc->value ||
      !cs.ledger->borrows_after(facts(e)))
    return out;
  size_t examined = 0;  // bounded work per start: the first few, lowest class first
  for (size_t i : *cs.owed_pending) {
    const Entry& o = cs.entries[i];
    if (o.pc->value >= e.pc->value || examined >= kOwedBelowChecked) break;
    if (o.started || o.job->queue == e.job->queue) continue;
    ++examined;
    if (auto f = cs.owed_fit.find(i); f != cs.owed_fit.end() && f->second.never) continue;
    if (cs.ledger->owed(facts(o))) out.push_back(i);
  }
  return out;
}

std::optional<size_t> owed_room_taken(CycleState& cs, const std::vector<size_t>& owed, const std::vector<TaskPlacement>& tasks,
                                      const ClusterState::MigLayouts& before) {
  for (size_t o : owed) {
    if (owed_fits(cs, o)) continue;  // it still fits with the start applied
    // Undone, not only released: a MIG instance the start created (or destroyed) would otherwise
    // stay in the cycle's view, where no agent was asked for it, and a later start would reuse it.
    const Status st = cs.work.undo_all(tasks, before);
    assert(st.ok() && "undoing a start to check an owed job failed");
    (void)st;
    if (owed_fits(cs, o)) return o;  // the start takes its room: it stays undone
    cs.owed_fit[o].never = true;     // it fits nowhere without the start either, for the rest of the cycle
    const Status back = cs.work.apply_all(tasks);
    assert(back.ok() && "re-applying a start failed");
    (void)back;
  }
  return std::nullopt;
}

// o's gang on the GPU models of the classes it is owed in only (all it allows when owed in "any"):
// room on other GPUs would not give its queue the guarantee it is owed. nullopt: it allows no model
// of those classes, so it fits nowhere that counts.
static std::optional<Gang> owed_gang(const CycleState& cs, const Entry& o) {
  Gang g = gang_of(cs, o);
  const std::vector<std::string> owed = cs.ledger->owed_classes(facts(o));
  if (owed.empty() || std::find(owed.begin(), owed.end(), kAnyClass) != owed.end()) return g;
  std::vector<std::string> models;
  for (const std::string& m : allowed_models(cs, g.task)) {
    const std::string c = model_class_of(cs, m);
    if (std::find(owed.begin(), owed.end(), c) != owed.end()) models.push_back(m);
  }
  if (models.empty()) return std::nullopt;
  g.task.gpu_models = std::move(models);
  return g;
}

// Whether `tasks` could all be applied to `c` now, without changing it: each task's node must hold it,
// and tasks sharing a node are not judged one by one (false: the caller asks the engine instead).
static bool still_applies(const ClusterState& c, const std::vector<TaskPlacement>& tasks) {
  for (size_t a = 0; a < tasks.size(); ++a) {
    for (size_t b = 0; b < a; ++b)
      if (tasks[b].node == tasks[a].node) return false;
    if (!c.can_apply(tasks[a]).ok()) return false;
  }
  return !tasks.empty();
}

PlacementResult place_owed(CycleState& cs, size_t i) {
  const std::optional<Gang> g = owed_gang(cs, cs.entries[i]);
  PlacementResult r;
  if (!g) return r;
  // Room on the reserved nodes is not its room when its own start would keep off them (place_now):
  // else a borrower's start there looked harmless while it took the only room the owed job had.
  const ReservedBlocked blocked(cs, keeps_off_reservation(cs, cs.entries[i]));
  r = cs.trial.place(cs.work, *g);
  // The GPUs of jobs checkpointing on their way out are its room too, as fits_free_now counts
  // them: it may be waiting for them (its victims), and a start on the free part of its room
  // would make it preempt again, for the victim that restarted there. Those a preemptor tried
  // earlier this cycle waits for (claimed) are that preemptor's room, not its own.
  if (r.outcome != Outcome::kPlaced && !cs.checkpointing.empty()) {
    ScratchEdits gone(cs.work);
    for (size_t k : cs.checkpointing)
      if (const Entry& v = cs.entries[k]; v.running && !v.claimed && !v.victim && !v.holding.empty())
        (void)gone.release(v.holding);
    if (gone.size() > 0) r = cs.trial.place(cs.work, *g);
  }
  return r;
}

bool owed_fits(CycleState& cs, size_t i) {
  const bool off = keeps_off_reservation(cs, cs.entries[i]);
  auto reserved = [&](const OwedFit& f) {
    return off && std::any_of(f.tasks.begin(), f.tasks.end(),
                              [&](const TaskPlacement& p) { return cs.res.nodes.count(p.node.value) > 0; });
  };
  auto valid = [&](const OwedFit& f) {
    for (size_t k = 0; k < f.tasks.size(); ++k)
      if (cs.work.node(f.tasks[k].node).generation != f.generations[k]) return false;
    return !reserved(f);
  };
  auto keep = [&](OwedFit& f) {
    f.generations.clear();
    for (const TaskPlacement& p : f.tasks) f.generations.push_back(cs.work.node(p.node).generation);
  };
  auto it = cs.owed_fit.find(i);
  if (it != cs.owed_fit.end() && (it->second.never || valid(it->second))) return !it->second.never;
  if (it != cs.owed_fit.end() && !reserved(it->second) && still_applies(cs.work, it->second.tasks)) {
    keep(it->second);  // a node changed, not the fit
    return true;
  }
  PlacementResult r = place_owed(cs, i);
  if (r.outcome != Outcome::kPlaced) {
    cs.owed_fit.erase(i);  // no fit to keep: asked again next time
    return false;
  }
  OwedFit& f = cs.owed_fit[i];
  f.tasks = std::move(r.tasks);
  keep(f);
  return true;
}

bool keeps_off_reservation(const CycleState& cs, const Entry& e) {
  if (!cs.res.active || ends_before_reservation(cs, e)) return false;
  // A queue's guarantee comes before a borrower's reservation: the owner's job may start on the
  // reserved nodes (the holder would only be lent those GPUs; the owner would take them back).
  return cs.res.owed || !cs.ledger->owed(facts(e));
}

VictimSearch try_preempt_now(CycleState& cs, Entry& e, const Gang& gang) {
  // An owner's reclaim may still search there (a guarantee first; the reservation is recomputed
  // each cycle, and the owner's search is bounded by what it is owed).
  // (Cheap tests first: this runs for every job that finds no room.)
  const bool off = cs.res.active && e.milli > 0 && !ends_before_reservation(cs, e) && !owed_now(cs, e);
  return try_preempt(cs, e, gang, off);
}

// What the engine reads of a gang (the task, counts, sizes, topology), not who asks.
static bool same_ask(const Gang& a, const Gang& b) {
  return a.task == b.task && a.tasks == b.tasks && a.min_tasks == b.min_tasks && a.sizes == b.sizes &&
         a.topology.mode == b.topology.mode && a.topology.level == b.topology.level;
}

// cs.engine.place, answered from place_memo when the same ask met the same working copy.
static PlacementResult engine_place(CycleState& cs, const Gang& gang) {
  if (cs.reference || !cs.policy.cacheable()) return cs.engine.place(cs.work, gang);
  PlaceMemo& m = cs.place_memo[shape_key(gang)];
  if (m.generation != cs.work.generation() || !same_ask(m.ask, gang)) {
    m.generation = cs.work.generation();
    m.ask = gang;
    m.ask.id = JobId();
    m.ask.name.clear();
    m.result = cs.engine.place(cs.work, gang);
  }
  return m.result;
}

// Places e now. With a reservation active, a job that would still run when the reservation starts
// must keep off the reserved nodes; if it can only fit on them it waits (only_on_reserved).
PlaceNow place_now(CycleState& cs, Entry& e, const Gang& gang) {
  PlacementResult r = engine_place(cs, gang);
  if (r.outcome != Outcome::kPlaced || !keeps_off_reservation(cs, e)) return {std::move(r)};
  bool touches = false;
  for (const TaskPlacement& p : r.tasks) touches = touches || cs.res.nodes.count(p.node.value);
  if (!touches) return {std::move(r)};
  const std::string shape = shape_key(gang);
  PlacementResult off;
  if (!cs.no_room_off_reservation.count(shape)) {
    {
      const ReservedBlocked blocked(cs, true);
      off = cs.trial.place(cs.work, gang);
    }
    if (off.outcome == Outcome::kPlaced) return {std::move(off), false, true};
    cs.no_room_off_reservation.insert(shape);
  }
  off.outcome = Outcome::kRetryLater;
  off.tasks.clear();
  const Duration run = assumed_runtime(*e.job, cs.snap.runtimes, cs.cfg.default_runtime);
  const Duration held = occupied_runtime(cs, *e.job);
  off.reason = "backfill: would delay " + reservation_text(cs) + " (this job is expected to run " + duration_text(run) +
               (held > run ? " after a " + duration_text(held - run) + " restart" : "") +
               ", past the reservation's start); it fits only on the reserved nodes";
  return {std::move(off), true};
}

}  // namespace tessera::sched
