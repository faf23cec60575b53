// Dynamic MIG in the cycle: unmet slice and whole-GPU demand drives layout changes of idle GPUs.
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

// Dynamic MIG: what could not be placed (MIG slices, whole GPUs for gangs) drives layout changes
// of idle GPUs; the planner applies NVIDIA's placement rules, the reconfigure cost and hysteresis.
void plan_mig(CycleState& cs) {
  for (const TaskPlacement& p : cs.mig_claims) (void)cs.work.release(p);  // idle again, for the planner
  MigPlanInput in;
  in.cluster = &cs.work;
  in.now = cs.now;
  in.last_changed = cs.snap.mig_last_changed;
  // (profile, model, allowed pool kinds after the pool rules) -> instances
  std::map<std::tuple<std::string, std::string, PoolKindMask>, int> wants;
  // Whole-GPU demand comes first for idle GPUs, except that a MIG request its queue is owed (within
  // its guarantee) comes before whole-GPU demand that would be borrowed, and, where an idle GPU of a
  // class it is owed in could be repartitioned for it, before whole-GPU demand that could not start
  // on the free GPUs as the cycle began (it would leave them idle either way); a MIG request that
  // claimed GPUs comes before whole-GPU demand of a lower class.
  bool owed_mig = false, owed_mig_gpu = false;
  for (const Entry& e : cs.entries)
    if (!e.running && !e.started && e.no_room && e.job->gang.task.mig() && cs.ledger->owed(facts(e))) {
      owed_mig = true;
      owed_mig_gpu = owed_mig_gpu || gpu_for_owed_slices(cs, e);
    }
  for (const Entry& e : cs.entries) {
    if (e.running || e.started || !e.no_room) continue;
    const TaskRequest& t = e.job->gang.task;
    if (t.mig())
      wants[{t.mig_profile, t.gpu_models.empty() ? "" : t.gpu_models.front(), gang_of(cs, e).task.pool_kinds}] += e.job->gang.tasks;
    else if (t.whole_gpus() && (!owed_mig || (cs.ledger->owed(facts(e)) && (!owed_mig_gpu || fits_free_now(cs, e)))) &&
             e.pc->value >= cs.mig_claim_class)
      in.whole_gpu_demand += e.job->gang.total_gpus();
  }
  if (wants.empty() && in.whole_gpu_demand == 0) return;
  for (const auto& [k, n] : wants) in.mig_demand.push_back({std::get<0>(k), n, std::get<1>(k), std::get<2>(k)});
  std::vector<GpuLayoutChange> changes = plan_mig_layouts(in, cs.cfg.mig);
  if (changes.empty()) return;
  int to_mig = 0, to_whole = 0;
  Time ready = changes.front().ready_at;
  for (GpuLayoutChange& c : changes) {
    (c.enable_mig ? to_mig : to_whole) += 1;
    ready = std::min(ready, c.ready_at);
    cs.out.reconfigure_mig.push_back({c.gpu, c.enable_mig, std::move(c.layout), std::move(c.reason), c.ready_at});
  }
  for (Entry& e : cs.entries) {
    if (e.running || e.started || !e.no_room) continue;
    const bool mig = e.job->gang.task.mig();
    const int n = mig ? to_mig : to_whole;
    if (n == 0) continue;
    e.wait = WaitCategory::kMigReconfiguring;
    e.reason += "; " + std::string(mig ? "MIG layout change planned on " : "turning MIG GPUs back to whole on ") +
                std::to_string(n) + (n == 1 ? " GPU" : " GPUs") + ", ready " + in_text(ready, cs.now);
    if (e.estimated_start < 0 || ready < e.estimated_start) e.estimated_start = ready;
  }
}

}  // namespace tessera::sched
