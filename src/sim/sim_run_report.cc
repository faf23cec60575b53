// The end of a simulation run (sim_run.cc): its metrics, from what the run integrated, and a record
// per job that arrived. Part of simrun::Simulation (sim_run_internal.h).
#include <algorithm>

#include "sim/sim_run_internal.h"

namespace tessera::sim::simrun {

void Simulation::report(Time end) {
  SimMetrics& m = rep_.metrics;
  std::vector<double> jct, wait, first_start, batch_jct, batch_wait;
  Time last_finish = first_arrival_;
  for (const SimJob& j : jobs_) {
    if (!j.arrived) continue;
    // A job still waiting at the end counts the time it has waited so far (a lower bound), so a
    // policy that never starts a job does not look faster than one that starts it late.
    const Time started = j.first_start >= 0 ? j.first_start : end;
    first_start.push_back(double(started - j.spec->arrival));
    if (j.first_start < 0) ++m.unstarted;
    const double queued = j.queued_s + (j.queued_since >= 0 ? double(end - j.queued_since) : 0.0);
    wait.push_back(queued);
    if (!j.spec->service) batch_wait.push_back(queued);
    if (!j.finished) continue;
    jct.push_back(double(j.finish - j.spec->arrival));
    if (!j.spec->service) batch_jct.push_back(double(j.finish - j.spec->arrival));
    last_finish = std::max(last_finish, j.finish);
  }
  std::sort(jct.begin(), jct.end());
  std::sort(wait.begin(), wait.end());
  std::sort(first_start.begin(), first_start.end());
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
  };
  std::sort(batch_wait.begin(), batch_wait.end());
  m.batch_finished = int64_t(batch_jct.size());
  m.batch_jct_mean_s = mean(batch_jct);
  m.batch_wait_p99_s = percentile(batch_wait, 0.99);
  m.finished = int64_t(jct.size());
  m.unfinished = m.jobs - m.finished;
  m.jct_mean_s = mean(jct);
  m.jct_p50_s = percentile(jct, 0.5);
  m.jct_p99_s = percentile(jct, 0.99);
  m.wait_mean_s = mean(wait);
  m.wait_p99_s = percentile(wait, 0.99);
  m.first_start_mean_s = mean(first_start);
  m.first_start_p99_s = percentile(first_start, 0.99);
  m.makespan_s = double(last_finish - first_arrival_);
  m.allocation_pct = cap_int_ > 0 ? alloc_int_ * 100.0 / cap_int_ : 0;
  // Work lost to preemption, failures and reclaims was done and thrown away: not useful.
  m.effective_util_pct = cap_int_ > 0 ? std::max(0.0, useful_int_ - lost_gpu_s_ * 1000.0) * 100.0 / cap_int_ : 0;
  m.jain_fairness = jain_time_ > 0 ? jain_int_ / jain_time_ : 1;
  m.lost_gpu_hours = lost_gpu_s_ / 3600.0;
  m.jobs_per_hour = m.makespan_s > 0 ? double(m.finished) * 3600.0 / m.makespan_s : 0;
  m.fragmentation_pct = frag_time_ > 0 ? frag_int_ / frag_time_ : 0;
  // Cost: every pool's billed GPU-hours at its price (owned and reserved: the whole run).
  for (const Pool& p : cluster_.pools()) {
    const double gpu_h = double(provider_->billed_gpu_seconds(p.id, end)) / 3600.0;
    const double used_h = pool_int_[p.id.value] / 1000.0 / 3600.0;
    m.used_gpu_hours_by_kind[int(p.kind)] += used_h;
    if (gpu_h <= 0) continue;
    const double cost = gpu_h * double(p.price_micro_per_gpu_hour.value_or(0)) / 1e6;
    m.cost += cost;
    m.billed_gpu_hours += gpu_h;
    m.pools.push_back({p.name, pool_kind_name(p.kind), gpu_h, used_h, cost});
  }
  m.inference_spot_gpu_hours = inference_spot_int_ / 1000.0 / 3600.0;
  m.interruption_lost_gpu_hours = lost_interrupt_gpu_s_ / 3600.0;
  rep_.jct_s = std::move(jct);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const SimJob& j = jobs_[i];
    if (!j.arrived) continue;
    SimJobRecord& r = rep_.jobs.emplace_back();
    wait_log_.fill(uint32_t(i), r);
    r.name = j.spec->name;
    r.team = j.spec->team;
    r.arrival = j.spec->arrival;
    r.gpus_milli = need_milli(j.job);
    r.work = j.spec->work;
    r.first_start = j.first_start;
    r.finish = j.finished ? j.finish : -1;
    r.preemptions = j.job.preemptions;
    r.reclaimed = j.reclaimed, r.by_las = j.by_las, r.by_priority = j.by_priority, r.moved = j.moved;
    r.run_s = j.run_s, r.spread_run_s = j.spread_run_s;
    r.spread_slowdown_milli = j.spec->spread_slowdown_milli;
    r.queued_s = j.queued_s + (j.queued_since >= 0 ? double(end - j.queued_since) : 0.0);
  }
}

}  // namespace tessera::sim::simrun
