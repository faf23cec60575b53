// `tessera bench cluster --compare-sim`: the live run's jobs gathered for bench/sim_compare.h
// (bench_internal.h, compare_run).
#include <algorithm>
#include <cmath>

#include "bench/bench_internal.h"
#include "bench/sim_compare.h"
#include "sim/sim_run.h"

namespace tessera::bench {

void compare_run(const BenchClusterOptions& o, const std::string& cluster_yaml, const std::vector<SubmitRecord>& records,
                 const std::function<std::optional<Submission>(int64_t)>& next, Clock::time_point t0, int64_t t0_unix_ms,
                 const std::map<int64_t, Clock::time_point>& work_ends, RestClient& admin, BenchClusterResult& res) {
  auto times = fetch_live_times(admin);
  if (!times.ok()) {
    res.compare_error = times.error().message;
    return;
  }
  auto since_t0 = [t0](Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); };
  auto unix_s = [t0_unix_ms](int64_t at_ms) { return at_ms >= 0 ? double(at_ms - t0_unix_ms) / 1000.0 : -1.0; };
  std::vector<LiveJob> jobs;
  std::vector<double> lag_ms;
  for (const SubmitRecord& r : records) {
    const std::optional<Submission> s = next(r.index);
    auto t = times->find(r.job);
    if (!s || t == times->end()) {
      res.compare_error = "job " + std::to_string(r.job) + " (submission " + std::to_string(r.index) + ") is not known to the server";
      return;
    }
    LiveJob j;
    j.id = r.job;
    j.spec = s->body;
    j.user = t->second.user;
    j.arrival_s = since_t0(r.sent);
    j.submitted_s = unix_s(t->second.submitted_ms);
    j.start_s = unix_s(t->second.started_ms);
    j.finish_s = unix_s(t->second.finished_ms);
    j.attempts = t->second.attempts;
    j.state = t->second.state;
    if (auto e = work_ends.find(r.job); e != work_ends.end()) j.work_end_s = since_t0(e->second);
    if (o.workload == "trace") lag_ms.push_back(std::max(0.0, (j.arrival_s - s->due_s) * 1000));
    jobs.push_back(std::move(j));
  }
  std::sort(lag_ms.begin(), lag_ms.end());
  const double lag_p99 = sim::percentile(lag_ms, 0.99);
  auto c = compare_live_with_sim(cluster_yaml, jobs, o.sim_model, lag_p99);
  if (!c.ok()) {
    res.compare_error = c.error().message;
    return;
  }
  res.compared = true;
  res.compare = std::move(*c);
}

}  // namespace tessera::bench
