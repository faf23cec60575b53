// What the next cycle makes of a preemption found now: the victims wait again (their requests
// count as demand, and as usable demand where they fit the room they leave), pending jobs may fit in
// the room they free, and victims tried before their preemptor restart first. A victim search asks
// these before it preempts anything, so that it does not free room its preemptor will be refused
// (cycle.h, "preempt.cc"). Internal to src/core/sched; not thread-safe (one cycle, one thread).
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/sched/cycle.h"
#include "core/sched/scratch.h"

namespace tessera::sched {

bool fits_after(CycleState& cs, const FairShare& after, const Entry& e, const Gang& gang, std::span<const size_t> first) {
  std::deque<std::vector<TaskPlacement>> starts;  // ScratchEdits keeps pointers to them
  ScratchEdits placed(cs.work);
  FairShare fs_then = after;
  for (size_t i : first) {
    const Entry& v = cs.entries[i];
    PlacementResult r = cs.trial.place(cs.work, gang_of(cs, v));
    if (r.outcome != Outcome::kPlaced) continue;
    const std::vector<TaskPlacement>& tasks = starts.emplace_back(std::move(r.tasks));
    if (!placed.apply(tasks)) continue;
    fs_then.add(v.queue, placement_amounts(cs, cs.work, tasks), +1);
  }
  const bool fits = trial_fit(cs, fs_then, e, gang, nullptr).fit.has_value();
  placed.undo();
  return fits;
}

GuaranteeJob as_pending(CycleState& cs, const Entry& v) {
  if (!v.running) return facts(v);
  const int64_t milli = request_milli(cs, v.job->gang);  // as collect_entries asks it
  return {v.queue, milli, nullptr, &asked_for(cs, v.cls, milli), &classes_for(cs, v.job->gang.task), v.pc->value,
          v.pc->preemptible};
}

bool takes_owed_once_freed(CycleState& cs, const FairShare& after, const Entry& e, const std::vector<TaskPlacement>& fit,
                           std::span<const size_t> victims, const std::vector<NodeId>* released) {
  OwedDelta next;
  // The victims wait again, with their requests: their queues' demand is what they ask, not what
  // they hold (compute_books), and each fits the room it leaves.
  for (size_t i : victims) {
    const Entry& v = cs.entries[i];
    if (v.job->queue == e.job->queue || v.milli <= 0) continue;
    const GuaranteeJob p = as_pending(cs, v);
    ClassAmounts& d = next.demand[v.queue.value];
    for (const auto& [c, x] : v.held) d[c] -= x;
    add_waiting_demand(d, p, v.cls);
    cs.ledger->add_usable(next, p);
  }
  // A job that did not fit as the cycle began fits now only by room on the nodes released since
  // (starts only take room): its room then is at most its room as the cycle began plus what those
  // nodes hold now. Only a shape that passes that bound (or is not counted so) is scanned.
  for (const CycleState::OwedUnfit& u : cs.owed_unfit) {
    const Entry& first = cs.entries[u.entries.front()];
    const Gang g = gang_of(cs, first);
    if (released && u.room >= 0) {
      const int64_t need = g.varied() ? g.total_gpu_milli() : g.required_tasks();
      int64_t more_room = 0;
      if (!fits_free_scan(cs, g, &more_room, released) && u.room + more_room < need) continue;
    }
    if (!fits_free_scan(cs, g)) continue;
    for (size_t i : u.entries)
      if (const Entry& o = cs.entries[i]; !o.started && o.job->queue != e.job->queue) cs.ledger->add_usable(next, facts(o));
  }
  return !next.usable.empty() &&
         !cs.ledger->takes_owed_with(after, e.job->queue, placement_amounts(cs, cs.work, fit), next).empty();
}

}  // namespace tessera::sched
