// Placing one job now: limits, the engine's fit, the owed-guarantee check, the start; and what a
// job that finds no room is told.
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

void Cycle::try_job(Entry& e) {
  const ClassAmounts need = amounts(e);
  if (Status lim = fs().within_limits(e.job->queue, need); !lim.ok()) {
    e.wait = WaitCategory::kQuota;
    e.reason = lim.message();
    return;
  }
  Gang gang = gang_of(e);
  const std::string shape = shape_key(gang);
  if (auto it = no_room_.find(shape); it != no_room_.end()) {
    if (it->second.wait == WaitCategory::kMigReconfiguring && gang.task.mig() && claim_gpu_for_mig(e, gang)) {
      e.wait = WaitCategory::kMigReconfiguring;
      e.reason = it->second.reason + "; an idle GPU is held for it, to be repartitioned";
      e.no_room = e.short_of_room = true;
      return;
    }
    if (it->second.wait == WaitCategory::kMigReconfiguring && gang.task.mig() && reclaim_gpu_for_mig(e, gang, true)) return;
    if (const VictimSearch s = try_preempt(e, gang); !s.preempting()) {
      e.wait = it->second.wait;
      e.reason = it->second.reason + leaving_note(s);
      e.short_of_room = true;
      no_room(e, gang);
    }
    return;
  }
  PlaceNow now = place_now(e, gang);
  PlacementResult& r = now.result;
  if (r.outcome == Outcome::kPlaced) {
    // The classes of the GPUs actually chosen must be within the queue's limits too. If not, and the
    // job allows other models, try once more on those whose class still has room.
    if (Status lim = fs().within_limits(e.job->queue, placement_amounts(work_, r.tasks)); !lim.ok()) {
      std::vector<std::string> room;
      if (gang.task.gpu_models.size() != 1)
        for (const std::string& m : gang.task.gpu_models.empty() ? work_.catalog().names() : gang.task.gpu_models) {
          ClassAmounts one;
          one[cfg_.model_class(m)] = e.milli;
          if (fs().within_limits(e.job->queue, one).ok()) room.push_back(m);
        }
      e.wait = WaitCategory::kQuota;
      if (room.empty()) {
        e.reason = lim.message();
        return;
      }
      gang.task.gpu_models = room;
      now = place_now(e, gang);
      if (r.outcome != Outcome::kPlaced) {
        e.reason = lim.message() + "; no room on other models: " + r.reason;
        return;
      }
    }
    if (std::string owed = ledger_->takes_owed(fs(), e.job->queue, placement_amounts(work_, r.tasks)); !owed.empty()) {
      e.wait = WaitCategory::kQuota;
      e.reason = owed;
      return;
    }
    if (Status s = work_.apply_all(r.tasks); !s.ok()) {
      e.wait = WaitCategory::kOther;
      e.reason = "internal: placement could not be applied: " + s.message();
      return;
    }
    commit_start(e, std::move(r.tasks));
    return;
  }
  if (now.only_on_reserved) {
    // A queue owed its guarantee takes it back from borrowers elsewhere rather than wait for the
    // reservation (victims are sought off the reserved nodes, as the engine keeps off them).
    if (ledger_->owed(facts(e))) {
      const ReservedBlocked blocked(*this, true);
      if (try_preempt(e, gang, true).preempting()) return;
    }
    e.wait = WaitCategory::kReservation;
    e.reason = r.reason;
    return;
  }
  if (r.outcome == Outcome::kNeverFits && cfg_.dynamic_mig && blocked_by_mig_mode(gang.task)) {
    // MIG mode is not permanent: the planner can change idle GPUs for it.
    r.reason = gang.task.mig() ? "needs a " + gang.task.mig_profile + " MIG instance; no GPU that offers one is in MIG mode now"
                               : "needs whole GPUs; the GPUs that could hold it are in MIG mode now";
    no_room_[shape] = {r.reason, WaitCategory::kMigReconfiguring};
    const bool claimed = gang.task.mig() && claim_gpu_for_mig(e, gang);
    if (!claimed && gang.task.mig() && reclaim_gpu_for_mig(e, gang, true)) return;
    e.wait = WaitCategory::kMigReconfiguring;
    e.reason = r.reason + (claimed ? "; an idle GPU is held for it, to be repartitioned" : "");
    e.no_room = true;  // demand for the MIG planner; no reservation (ends of running jobs do not help)
    e.short_of_room = true;
    return;
  }
  if (std::string note = pool_note(gang); !note.empty()) r.reason = note + "; " + r.reason;
  if (!held_for_.empty()) r.reason += "; " + held_text_;
  if (!cfg_.elastic_capacity && gang.topology.mode == TopologyMode::kRequired &&
      e.job->gang.topology.mode == TopologyMode::kPreferred)
    r.reason = "holds out for one node (config.topology_wait " + duration_text(cfg_.topology_wait) +
               ", then it may be spread); " + r.reason;
  // Room that exists only outside the one domain a spread gang requires is a topology wait.
  const WaitCategory wait = gang.topology.mode == TopologyMode::kRequired && gang.tasks > 1 ? WaitCategory::kTopology
                                                                                           : WaitCategory::kCapacity;
  no_room_[shape] = {r.reason, wait};
  VictimSearch s;
  if (r.outcome == Outcome::kRetryLater) s = try_preempt(e, gang);
  if (s.preempting()) return;
  e.wait = wait;
  e.reason = r.reason + leaving_note(s);
  e.short_of_room = true;
  if (r.outcome == Outcome::kRetryLater) no_room(e, gang);
}

void Cycle::commit_start(Entry& e, std::vector<TaskPlacement> tasks) {
  e.started = true;
  e.end = now_ + occupied_runtime(*e.job);
  e.start_index = int(out_.start.size());
  const ClassAmounts got = placement_amounts(work_, tasks);
  ledger_->add(e.job->queue, got, +1);
  user_milli_[e.job->user] += get_or(got, kAnyClass);
  out_.start.push_back({e.job->id, std::move(tasks)});
}

// A job moved out of an owed gang's way restarts on the GPUs held for it while it checkpointed, ahead
// of the cycle's order (its queue keeps its share: the move is one step). Taken or gone since (a
// failure): it is placed in order like any job.
void Cycle::start_moved() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.running || e.job->move_to.empty()) continue;
    if (!fs().within_limits(e.job->queue, amounts(e)).ok()) continue;
    std::vector<TaskPlacement> tasks = settled(e.job->move_to);
    if (int(tasks.size()) != e.job->gang.tasks) continue;
    bool usable = true;
    for (const TaskPlacement& p : tasks)
      usable = usable && p.node.value < work_.nodes().size() && work_.node(p.node).schedulable &&
               (e.job->gang.task.pool_kinds & pool_kind_bit(work_.node(p.node).pool_kind));
    if (!usable || !work_.apply_all(tasks).ok()) continue;
    order_.push_back(i);
    commit_start(e, std::move(tasks));
  }
}

// Which pool rule keeps the gang off nodes where it would fit now (or, if none would, off any
// node); "" when no rule excludes anything.
std::string Cycle::pool_note(const Gang& gang) const {
  if (std::all_of(work_.pools().begin(), work_.pools().end(),
                  [&](const Pool& p) { return (gang.task.pool_kinds & pool_kind_bit(p.kind)) != 0; }))
    return "";  // no pool is excluded (the common case: no pools declared)
  TaskRequest any = gang.task;
  any.pool_kinds = kAnyPoolKind;
  std::set<uint32_t> free_pools, excluded_pools;  // by pool id
  for (const Node& n : work_.nodes()) {
    if (gang.task.pool_kinds & pool_kind_bit(n.pool_kind)) continue;
    excluded_pools.insert(n.pool.value);
    if (check_fit(n, any) == Misfit::kFits) free_pools.insert(n.pool.value);
  }
  const std::set<uint32_t>& named = free_pools.empty() ? excluded_pools : free_pools;
  if (named.empty()) return "";
  const Pool& first = work_.pool(PoolId(*named.begin()));
  std::string s = pool_rule_reason(gang, cfg_.pool_rules, first.kind);
  s += free_pools.empty() ? "; excluded pools:" : "; the free GPUs are on";
  bool sep = false;
  for (uint32_t id : named) {
    const Pool& p = work_.pool(PoolId(id));
    s += std::string(sep ? ", " : " ") + pool_kind_name(p.kind) + " pool " + p.name;
    sep = true;
  }
  return s;
}

// Would `t` fit some node if its GPUs' MIG modes were changed (MIG slices on a MIG-capable model,
// or whole GPUs on a node whose GPUs are in MIG mode)?
bool Cycle::claim_gpu_for_mig(Entry& e, const Gang& gang) {
  const TaskRequest& t = gang.task;
  int& spare = mig_claim_spare_[t.mig_profile];
  const int need = gang.tasks;
  bool claimed = false;
  for (const Node& n : work_.nodes()) {
    if (spare >= need) break;
    if (!could_host(n, t)) continue;
    const MigProfile* profile = n.gpu_model()->find_profile(t.mig_profile);
    if (!profile || profile->max_instances <= 0) continue;
    for (size_t i = 0; i < n.gpus.size() && spare < need; ++i) {
      const Gpu& g = n.gpus[i];
      if (g.health != GpuHealth::kHealthy || g.mig_enabled || !g.idle()) continue;
      // The planner leaves a GPU changed less than min_layout_age ago alone: holding it would only idle it.
      auto changed = snap_.mig_last_changed.find(GpuRef{n.id, uint16_t(i)});
      if (changed != snap_.mig_last_changed.end() && now_ - changed->second < cfg_.mig.min_layout_age) continue;
      TaskPlacement hold{n.id, MilliCpu{0}, MiB{0}, 0, {GpuGrant{uint16_t(i)}}};
      if (!work_.apply(hold).ok()) continue;
      mig_claims_.push_back(std::move(hold));
      spare += profile->max_instances;
      claimed = true;
    }
  }
  if (spare < need && !claimed) return false;
  spare = std::max(0, spare - need);
  mig_claim_class_ = std::max(mig_claim_class_, e.pc->value);
  return true;
}

bool Cycle::blocked_by_mig_mode(const TaskRequest& t) const {
  for (const Node& n : work_.nodes()) {
    if (!could_host(n, t)) continue;
    if (t.mig()) {
      if (n.gpu_model()->find_profile(t.mig_profile)) return true;
    } else if (t.whole_gpus() && int(n.gpus.size()) >= t.gpu_count &&
               std::any_of(n.gpus.begin(), n.gpus.end(), [](const Gpu& g) { return g.mig_enabled; })) {
      return true;
    }
  }
  return false;
}

// Places e now. With a reservation active, a job that would still run when the reservation starts
// must keep off the reserved nodes; if it can only fit on them it waits (only_on_reserved).
PlaceNow Cycle::place_now(Entry& e, const Gang& gang) {
  PlacementResult r = engine_.place(work_, gang);
  if (r.outcome != Outcome::kPlaced || !res_.active || ends_before_reservation(e)) return {std::move(r)};
  // A queue's guarantee comes before a borrower's reservation: the owner's job may start on the
  // reserved nodes (the holder would only be lent those GPUs; the owner would take them back).
  if (!res_.owed && ledger_->owed(facts(e))) return {std::move(r)};
  bool touches = false;
  for (const TaskPlacement& p : r.tasks) touches = touches || res_.nodes.count(p.node.value);
  if (!touches) return {std::move(r)};
  const std::string shape = shape_key(gang);
  PlacementResult off;
  if (!no_room_off_reservation_.count(shape)) {
    {
      const ReservedBlocked blocked(*this, true);
      off = trial_.place(work_, gang);
    }
    if (off.outcome == Outcome::kPlaced) return {std::move(off)};
    no_room_off_reservation_.insert(shape);
  }
  off.outcome = Outcome::kRetryLater;
  off.tasks.clear();
  const Duration run = assumed_runtime(*e.job, snap_.runtimes, cfg_.default_runtime);
  const Duration held = occupied_runtime(*e.job);
  off.reason = "backfill: would delay " + reservation_text() + " (this job is expected to run " + duration_text(run) +
               (held > run ? " after a " + duration_text(held - run) + " restart" : "") +
               ", past the reservation's start); it fits only on the reserved nodes";
  return {std::move(off), true};
}

}  // namespace tessera::sched
