// Backfill (EASY): the first job that finds no room reserves the earliest time it fits.
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

std::string reservation_text(const CycleState& cs) {
  const Job& j = *cs.entries[cs.res.entry].job;
  return "job " + j.name + "'s reservation starting " + in_text(cs.res.start, cs.now);
}

void no_room(CycleState& cs, Entry& e, const Gang& gang) {
  e.no_room = true;
  if (!cs.cfg.backfill || cs.res.active) return;
  if (std::optional<Reservation> r = find_reservation(cs, e, gang)) {
    cs.res = std::move(*r);
    e.reason += "; reserved to start " + in_text(cs.res.start, cs.now);
  }
}

// The earliest time e fits, from the expected ends of running jobs (and of jobs started this cycle):
// release them in end order on the working copy (under a ScratchEdits guard) until the engine places
// e; the working copy is as before when this returns. Releases are searched by galloping then
// bisection (placement only gets easier as more is freed).
std::optional<Reservation> find_reservation(CycleState& cs, Entry& e, const Gang& gang) {
  struct Ending {
    Time end;
    JobId id;
    const std::vector<TaskPlacement>* placement;
    int64_t milli;
  };
  std::vector<Ending> ends;
  // This cycle's starts as they will stand (MIG instances created): undoing a release re-applies them.
  std::deque<std::vector<TaskPlacement>> started;
  for (const Entry& x : cs.entries) {
    if (x.running && !x.holding.empty()) ends.push_back({x.victim ? cs.now : x.end, x.job->id, &x.holding, x.milli});
    if (x.started)
      ends.push_back({x.end, x.job->id, &started.emplace_back(settled(cs.out.start[size_t(x.start_index)].placement)), x.milli});
  }
  for (const auto& [id, pl] : cs.held_for)  // what is held for e is e's at once
    if (id == e.job->id) ends.push_back({cs.now, id, &pl, placement_milli(pl)});
  std::sort(ends.begin(), ends.end(), [](const Ending& a, const Ending& b) {
    return a.end != b.end ? a.end < b.end : a.id < b.id;
  });
  ScratchEdits trial(cs.work);  // ends[0..released) released, in order
  size_t released = 0;
  auto move_to = [&](size_t k) {
    for (; released < k; ++released) {
      const bool ok = trial.release(*ends[released].placement);
      assert(ok && "releasing a running job for a reservation failed");
      (void)ok;
    }
    for (; released > k; --released) trial.undo_last();
  };
  auto fits = [&](size_t k) {
    move_to(k);
    return cs.trial.place(cs.work, gang).outcome == Outcome::kPlaced;
  };
  // Cheap bound: nothing fits before enough GPU milli are free; with none released it did not fit.
  int64_t free = cs.work.total_gpus() * 1000 - cs.work.allocated_gpu_milli();
  size_t lo = 0;  // known not to fit with `lo` released
  while (lo < ends.size() && free + ends[lo].milli < e.milli) free += ends[lo++].milli;
  size_t hi = 0;  // known to fit (0 = not found)
  for (size_t step = 1; lo < ends.size(); step *= 2) {
    const size_t k = std::min(ends.size(), lo + step);
    if (fits(k)) {
      hi = k;
      break;
    }
    lo = k;
  }
  if (hi == 0) return std::nullopt;  // does not fit even when everything running is gone
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) hi = mid;
    else lo = mid;
  }
  move_to(hi);
  PlacementResult r = cs.trial.place(cs.work, gang);
  trial.undo();
  assert(r.outcome == Outcome::kPlaced);
  // Quotas apply to the reserved job as to any other: a limit on a model class is only seen on the
  // GPUs chosen (the request names no model), so a job those GPUs would put over a limit gets none.
  if (Status lim = fs(cs).within_limits(e.job->queue, placement_amounts(cs, cs.work, r.tasks)); !lim.ok()) {
    e.reason += "; no reservation: " + lim.message();
    return std::nullopt;
  }
  Reservation res;
  res.active = true;
  res.entry = size_t(&e - cs.entries.data());
  res.owed = cs.ledger->owed(facts(e));
  res.start = ends[hi - 1].end;
  for (const TaskPlacement& p : r.tasks) res.nodes.insert(p.node.value);
  return res;
}

}  // namespace tessera::sched
