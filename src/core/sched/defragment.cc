// Defragmenting moves: an owed gang that reclaiming every borrower cannot place may have jobs
// within their guarantee checkpoint and restart elsewhere at once. Gathering: a gang that prefers
// one node and runs spread moves onto one node once one has room for it.
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

bool movable(const CycleState& cs, const Entry& v, const Entry& e) {
  const Job& vj = *v.job;
  if (!v.running || v.victim || v.claimed || vj.state != JobState::kRunning || v.holding.empty()) return false;
  if (vj.checkpoint.interval <= 0 || v.pc->value > e.pc->value) return false;
  if (vj.last_preempted >= 0 && cs.now - vj.last_preempted < cs.cfg.preemption_protection) return false;
  if (int(v.holding.size()) != vj.gang.tasks) return false;
  for (const TaskPlacement& p : v.holding) {
    if (p.node != v.holding.front().node) return false;
    for (const GpuGrant& g : p.gpus)
      if (g.kind != GrantKind::kWhole) return false;
  }
  return true;
}

Gang mover_gang(const CycleState& cs, const Entry& v) {
  Gang g = gang_of(cs, v);
  if (const GpuModel* m = cs.work.node(v.holding.front().node).gpu_model()) g.task.gpu_models = {m->name};
  if (g.tasks > 1) {
    g.topology.mode = TopologyMode::kRequired;
    g.topology.level = "node";
  }
  return g;
}

// Plans on the working copy as find_victims left it (this cycle's victims gone, earlier preemptors'
// claims placed). Jobs already leaving are released, and the borrowers the owner may reclaim (those
// inside their own guarantee last, then cheapest first, while their queue still borrows); then, node by node (the
// node that needs the fewest GPUs moved for one more task's room first), movable jobs are released
// until the engine places the gang. The jobs whose GPUs that fit uses move: each is placed with the
// fit applied, on its GPU model and one node, off a reservation's nodes, on free GPUs or GPUs of
// borrowers, which are then reclaimed too. Everything else is put back, and so is the working copy.
std::optional<MovePlan> find_moves(CycleState& cs, Entry& e, const Gang& gang, bool off_reservation) {
  const GuaranteeJob claimant = facts(e);
  const std::vector<std::string> classes = cs.ledger->owed_classes(claimant);
  if (classes.empty() || cs.moves >= cs.cfg.max_moves_per_cycle) return std::nullopt;
  const TaskRequest& t = gang.task;
  const bool one_node = gang.topology.mode == TopologyMode::kRequired && gang.topology.level == "node";
  // Moving frees GPUs in one place by taking as many elsewhere: it helps only tasks of several whole
  // GPUs, or a gang that must share one node.
  if (!t.whole_gpus() || t.gpu_count <= 0 || (t.gpu_count == 1 && !(one_node && gang.tasks > 1))) return std::nullopt;
  MovePlan plan;
  FairShare after = fs(cs);
  std::vector<size_t> released;  // entries whose holding is released here, in order
  std::vector<bool> is_borrower(cs.entries.size(), false);
  std::vector<bool> out(cs.entries.size(), false);
  std::deque<std::vector<TaskPlacement>> placed;  // the fit and the movers' places (stable for `scratch`)
  ScratchEdits scratch(cs.work);  // every release and apply of the plan, undone before this returns
  auto release = [&](size_t i) {
    const bool ok = scratch.release(cs.entries[i].holding);
    assert(ok && "releasing a job for a move plan failed");
    (void)ok;
    released.push_back(i);
    out[i] = true;
  };
  auto unwind = [&] {
    scratch.undo();
    released.clear();
  };
  std::vector<std::tuple<bool, int64_t, JobId, size_t>> borrowers;  // (inside own guarantee, cost, id)
  for (size_t i = 0; i < cs.entries.size(); ++i) {
    const Entry& v = cs.entries[i];
    if (!v.running || v.victim || v.claimed || v.holding.empty()) continue;
    if (v.job->state == JobState::kCheckpointing) {
      release(i);
    } else if (v.job->state == JobState::kRunning && v.job->queue != e.job->queue &&
               cs.ledger->reclaimable(facts(v), claimant, classes)) {
      borrowers.emplace_back(cs.ledger->inside_own_guarantee(v.job->queue, classes), lost_work_cost(cs, v), v.job->id, i);
    }
  }
  std::sort(borrowers.begin(), borrowers.end());
  for (const auto& [inside, cost, id, i] : borrowers) {
    if (!cs.ledger->may_reclaim_from(after, facts(cs.entries[i]), e.job->queue, classes)) continue;
    release(i);
    is_borrower[i] = true;
    after.add(cs.entries[i].job->queue, amounts(cs.entries[i]), -1);
  }
  if (cs.work.total_gpus() * 1000 - cs.work.allocated_gpu_milli() < e.milli) {
    unwind();
    return std::nullopt;
  }
  // Movable jobs per node that could hold a task, cheapest first.
  std::map<uint32_t, std::vector<size_t>> on_node;
  for (size_t i = 0; i < cs.entries.size(); ++i)
    if (!out[i] && movable(cs, cs.entries[i], e) && could_host(cs, cs.work.node(cs.entries[i].holding.front().node), t))
      on_node[cs.entries[i].holding.front().node.value].push_back(i);
  for (auto& [n, ks] : on_node)
    std::sort(ks.begin(), ks.end(), [&](size_t a, size_t b) {
      const int64_t ca = lost_work_cost(cs, cs.entries[a]), cb = lost_work_cost(cs, cs.entries[b]);
      return ca != cb ? ca < cb : cs.entries[a].job->id < cs.entries[b].job->id;
    });
  const int64_t per_task = t.gpu_count, tasks = gang.required_tasks();
  auto slots = [&](const Node& n) -> int64_t {
    if (!could_host(cs, n, t)) return 0;
    return one_node ? (n.idle_gpus >= per_task * tasks ? tasks : 0) : n.idle_gpus / per_task;
  };
  const int room = cs.cfg.max_moves_per_cycle - cs.moves;
  int moving = 0;
  std::optional<std::vector<TaskPlacement>> fits;
  while (!fits) {
    // The cheapest next step, (GPUs moved, lost work, node): one more task's room on a node (for a
    // one-node gang, the whole gang's).
    std::tuple<int64_t, int64_t, uint32_t> best{INT64_MAX, INT64_MAX, 0};
    for (const auto& [n, ks] : on_node) {
      const Node& node = cs.work.node(NodeId(n));
      const int64_t want = one_node ? per_task * tasks : per_task * (node.idle_gpus / per_task + 1);
      int64_t idle = node.idle_gpus, gpus = 0, cost = 0;
      for (size_t k = 0; k < ks.size() && idle < want; ++k) {
        if (out[ks[k]]) continue;
        const int64_t g = cs.entries[ks[k]].milli / 1000;
        idle += g, gpus += g, cost += lost_work_cost(cs, cs.entries[ks[k]]);
      }
      if (idle >= want && gpus > 0 && std::make_tuple(gpus, cost, n) < best) best = {gpus, cost, n};
    }
    if (std::get<0>(best) == INT64_MAX) break;
    const Node& node = cs.work.node(NodeId(std::get<2>(best)));
    const int64_t want = one_node ? per_task * tasks : per_task * (node.idle_gpus / per_task + 1);
    for (size_t k : on_node[std::get<2>(best)]) {
      if (node.idle_gpus >= want) break;
      if (out[k]) continue;
      release(k);
      ++moving;
    }
    if (moving > room) break;
    int64_t have = 0;
    for (const Node& n : cs.work.nodes()) have = one_node ? std::max(have, slots(n)) : have + slots(n);
    if (have >= tasks) fits = fits_under(cs, after, e, gang);
  }
  if (!fits || moving > room) {
    unwind();
    return std::nullopt;
  }
  const std::vector<TaskPlacement> fit = std::move(*fits);
  auto gpus_of = [](const std::vector<TaskPlacement>& pl) {
    std::set<std::pair<uint32_t, uint16_t>> s;
    for (const TaskPlacement& p : pl)
      for (const GpuGrant& g : p.gpus) s.insert({p.node.value, g.gpu});
    return s;
  };
  auto overlaps = [&](size_t i, const std::set<std::pair<uint32_t, uint16_t>>& used) {
    for (const TaskPlacement& p : cs.entries[i].holding)
      for (const GpuGrant& g : p.gpus)
        if (used.count({p.node.value, g.gpu})) return true;
    return false;
  };
  // Movers the fit does not need stay; the others are placed with the fit applied.
  std::set<std::pair<uint32_t, uint16_t>> used = gpus_of(fit);
  for (size_t i : released)
    if (out[i] && !is_borrower[i] && cs.entries[i].job->state == JobState::kRunning) {
      if (overlaps(i, used)) plan.moved.push_back(i);
      else if (scratch.apply(cs.entries[i].holding)) out[i] = false;
      else plan.moved.push_back(i);
    }
  bool ok = !plan.moved.empty() && scratch.apply(placed.emplace_back(fit));
  std::sort(plan.moved.begin(), plan.moved.end(), [&](size_t a, size_t b) {
    return cs.entries[a].milli != cs.entries[b].milli ? cs.entries[a].milli > cs.entries[b].milli : cs.entries[a].job->id < cs.entries[b].job->id;
  });
  // Borrowers the fit does not use are put back first: a mover goes to free GPUs, and to a
  // borrower's (reclaimed for it) only when it fits nowhere else.
  std::vector<size_t> put_back;
  for (const auto& [inside, cost, id, i] : borrowers)
    if (ok && is_borrower[i] && !overlaps(i, used) && scratch.apply(cs.entries[i].holding)) {
      out[i] = false;
      put_back.push_back(i);
    }
  if (ok) {
    const ReservedBlocked blocked(cs, !off_reservation);  // movers keep off a reservation's nodes
    for (size_t k = 0; ok && k < plan.moved.size(); ++k) {
      PlacementResult r = cs.trial.place(cs.work, mover_gang(cs, cs.entries[plan.moved[k]]));
      if (r.outcome != Outcome::kPlaced && !put_back.empty()) {  // the borrowers' GPUs too, then
        for (size_t i : put_back) {
          const bool off = scratch.release(cs.entries[i].holding);
          assert(off && "releasing a borrower put back failed");
          (void)off;
          out[i] = true;
        }
        put_back.clear();
        r = cs.trial.place(cs.work, mover_gang(cs, cs.entries[plan.moved[k]]));
      }
      ok = r.outcome == Outcome::kPlaced && scratch.apply(placed.emplace_back(r.tasks));
      if (ok) {
        for (const TaskPlacement& p : r.tasks)
          for (const GpuGrant& g : p.gpus) used.insert({p.node.value, g.gpu});
        plan.dest.push_back(std::move(r.tasks));
      }
    }
  }
  // Borrowers whose GPUs the fit or a mover uses are reclaimed (while their queue still borrows,
  // cheapest first); the others are put back.
  FairShare confirm = fs(cs);
  for (const auto& [inside, cost, id, i] : borrowers) {
    if (!ok || !is_borrower[i] || !out[i]) continue;
    if (!overlaps(i, used) && scratch.apply(cs.entries[i].holding)) {
      out[i] = false;
      continue;
    }
    ok = cs.ledger->may_reclaim_from(confirm, facts(cs.entries[i]), e.job->queue, classes);
    confirm.add(cs.entries[i].job->queue, amounts(cs.entries[i]), -1);
    plan.reclaimed.push_back(i);
  }
  for (size_t i : released)
    if (ok && out[i] && cs.entries[i].job->state == JobState::kCheckpointing && overlaps(i, used)) plan.leaving.push_back(i);
  if (ok) {
    const ClassAmounts got = placement_amounts(cs, cs.work, fit);
    ok = confirm.within_limits(e.job->queue, got).ok() && cs.ledger->takes_owed(confirm, e.job->queue, got).empty();
  }
  unwind();
  if (!ok) return std::nullopt;
  plan.fit = fit;
  return plan;
}

// Emits the plan's decisions. The movers' new GPUs that are free now are held for the rest of the
// cycle (the rest belong to borrowers reclaimed for them, which keep them until they leave).
void commit_moves(CycleState& cs, Entry& e, MovePlan& plan) {
  const std::string owner = cs.tree.queue(e.job->queue).name;
  for (size_t i : plan.reclaimed) preempt(cs, cs.entries[i], e, false, "reclaim: queue " + owner + " takes back its guarantee");
  for (size_t k = 0; k < plan.moved.size(); ++k) {
    Entry& v = cs.entries[plan.moved[k]];
    preempt(cs, v, e, false,
            "move: checkpoints and restarts at once on node " + cs.work.node(plan.dest[k].front().node).name +
                " so that job " + e.job->name + " of queue " + owner + ", owed its guarantee, fits whole");
    hold_idle(cs, plan.dest[k]);
    cs.out.preempt.back().move_to = std::move(plan.dest[k]);
  }
  for (size_t i : plan.leaving) {  // not counted again by a later preemptor
    cs.entries[i].claimed = true;
    cs.marked_leaving.push_back(i);
  }
  const int fresh = int(plan.reclaimed.size() + plan.moved.size());
  cs.preemptions += fresh;
  cs.moves += int(plan.moved.size());
  e.wait = WaitCategory::kPreempting;
  e.reason = "waiting for " + std::to_string(fresh) + (fresh == 1 ? " preempted job" : " preempted jobs") +
             " to checkpoint and exit (" + std::to_string(plan.moved.size()) + " moved to other GPUs to make room)";
}

// A running gang that prefers one node but runs over several runs slower for as long as it runs
// (spread after topology_wait, or restarted so after a preemption; on the Philly replay such gangs
// of an over-share team ran spread for thousands of hours and set the makespan). Once one node has
// room for all of it, left idle after the cycle's pending jobs were tried (so no waiting job wanted
// it) and off the reservation's nodes, it checkpoints and restarts there: the biggest gangs first.
bool runs_spread_wanting_one_node(const Job& j) {
  if (j.checkpoint.interval <= 0 || j.gang.topology.mode != TopologyMode::kPreferred || j.gang.topology.level != "node")
    return false;
  return std::any_of(j.placement.begin(), j.placement.end(),
                     [&](const TaskPlacement& p) { return p.node != j.placement.front().node; });
}

void gather_spread(CycleState& cs) {
  std::vector<size_t> cands;
  for (size_t i = 0; i < cs.entries.size(); ++i) {
    const Entry& v = cs.entries[i];
    const Job& j = *v.job;
    if (!v.running || v.victim || v.claimed || j.state != JobState::kRunning || v.holding.empty()) continue;
    if (int(v.holding.size()) != j.gang.tasks || !runs_spread_wanting_one_node(j)) continue;
    if (!j.gang.task.whole_gpus() || j.gang.total_gpus() > cs.max_node_gpus) continue;
    const Time since = std::max(j.started, j.last_preempted);
    if (since < 0 || cs.now - since >= cs.cfg.preemption_protection) cands.push_back(i);
  }
  std::sort(cands.begin(), cands.end(), [&](size_t a, size_t b) {
    if (cs.entries[a].milli != cs.entries[b].milli) return cs.entries[a].milli > cs.entries[b].milli;
    return cs.entries[a].job->id < cs.entries[b].job->id;
  });
  for (size_t i : cands) {
    if (cs.moves >= cs.cfg.max_moves_per_cycle || cs.preemptions >= cs.cfg.max_preemptions_per_cycle) return;
    Entry& v = cs.entries[i];
    const Gang g = mover_gang(cs, v);
    PlacementResult r;
    {
      const ReservedBlocked blocked(cs, true);  // off a reservation's nodes
      r = cs.trial.place(cs.work, g);
    }
    if (r.outcome != Outcome::kPlaced || r.tasks.empty()) continue;
    const std::string node = cs.work.node(r.tasks.front().node).name;
    preempt(cs, v, v, false, "gather: runs spread over several nodes; checkpoints and restarts on node " + node +
                             ", which has room for all of it");
    hold_idle(cs, r.tasks);
    cs.out.preempt.back().move_to = std::move(r.tasks);
    ++cs.preemptions;
    ++cs.moves;
  }
}

// Holds, GPU by GPU, the whole GPUs of `pl` that are idle on the working copy now.
void hold_idle(CycleState& cs, const std::vector<TaskPlacement>& pl) {
  for (const TaskPlacement& p : pl)
    for (const GpuGrant& g : p.gpus)
      if (g.kind == GrantKind::kWhole && cs.work.node(p.node).gpus[g.gpu].idle())
        (void)cs.work.apply(TaskPlacement{p.node, MilliCpu{0}, MiB{0}, p.task_class, {g}});
}

}  // namespace tessera::sched
