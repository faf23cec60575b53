// Backfill (EASY): the first job that finds no room reserves the earliest time it fits.
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

std::string Cycle::reservation_text() const {
  const Job& j = *entries_[res_.entry].job;
  return "job " + j.name + "'s reservation at t=" + std::to_string(res_.start) + " (in " +
         duration_text(res_.start - now_) + ")";
}

void Cycle::no_room(Entry& e, const Gang& gang) {
  e.no_room = true;
  if (cfg_.backfill && !res_.active) reserve(e, gang);
}

// The earliest time e fits, from the expected ends of running jobs (and of jobs started this cycle):
// release them in end order on the working copy until the engine places e, then put them back.
// Releases are searched by galloping then bisection (placement only gets easier as more is freed).
void Cycle::reserve(Entry& e, const Gang& gang) {
  struct Ending {
    Time end;
    JobId id;
    const std::vector<TaskPlacement>* placement;
    int64_t milli;
  };
  std::vector<Ending> ends;
  for (const Entry& x : entries_) {
    if (x.running && !x.holding.empty()) ends.push_back({x.victim ? now_ : x.end, x.job->id, &x.holding, x.milli});
    if (x.started) ends.push_back({x.end, x.job->id, &out_.start[size_t(x.start_index)].placement, x.milli});
  }
  for (const auto& [id, pl] : held_for_)  // what is held for e is e's at once
    if (id == e.job->id) ends.push_back({now_, id, &pl, placement_milli(pl)});
  std::sort(ends.begin(), ends.end(), [](const Ending& a, const Ending& b) {
    return a.end != b.end ? a.end < b.end : a.id < b.id;
  });
  size_t released = 0;
  auto move_to = [&](size_t k) {
    for (; released < k; ++released)
      for (const TaskPlacement& p : *ends[released].placement) {
        Status st = work_.release(p);
        assert(st.ok() && "releasing a running job for a reservation failed");
        (void)st;
      }
    for (; released > k; --released) {
      Status st = work_.apply_all(settled(*ends[released - 1].placement));
      assert(st.ok() && "restoring a running job after a reservation search failed");
      (void)st;
    }
  };
  auto fits = [&](size_t k) {
    move_to(k);
    return trial_.place(work_, gang).outcome == Outcome::kPlaced;
  };
  // Cheap bound: nothing fits before enough GPU milli are free; with none released it did not fit.
  int64_t free = work_.total_gpus() * 1000 - work_.allocated_gpu_milli();
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
  if (hi == 0) {  // does not fit even when everything running is gone
    move_to(0);
    return;
  }
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) hi = mid;
    else lo = mid;
  }
  move_to(hi);
  PlacementResult r = trial_.place(work_, gang);
  move_to(0);
  assert(r.outcome == Outcome::kPlaced);
  // Quotas apply to the reserved job as to any other: a limit on a model class is only seen on the
  // GPUs chosen (the request names no model), so a job those GPUs would put over a limit gets none.
  if (Status lim = fs().within_limits(e.job->queue, placement_amounts(work_, r.tasks)); !lim.ok()) {
    e.reason += "; no reservation: " + lim.message();
    return;
  }
  res_.active = true;
  res_.entry = size_t(&e - entries_.data());
  res_.owed = ledger_->owed(facts(e));
  res_.start = ends[hi - 1].end;
  for (const TaskPlacement& p : r.tasks) res_.nodes.insert(p.node.value);
  e.reason += "; reserved to start at t=" + std::to_string(res_.start) + " (in " + duration_text(res_.start - now_) + ")";
}

}  // namespace tessera::sched
