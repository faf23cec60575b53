// The live run against the simulator (bench/sim_compare.h).
#include "bench/sim_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "bench/hollow_nodes.h"
#include "bench/server_child.h"
#include "config/job_spec.h"
#include "sim/cluster_config.h"
#include "sim/sim_run.h"

namespace tessera::bench {

namespace {

using Json = nlohmann::json;

// The simulator's clock: milliseconds of the live run.
constexpr int64_t kUnit = 1000;

double p99(std::vector<double> v) {  // as the simulator's own percentiles
  std::sort(v.begin(), v.end());
  return sim::percentile(v, 0.99);
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

// Every duration of the scheduler's configuration, in the simulator's unit.
void scale_config(SchedulerConfig& c, int64_t k) {
  for (int64_t& t : c.las_thresholds_gpu_s) t *= k;
  c.multifactor.max_age *= k;
  c.usage_half_life *= k;
  c.reclaim_grace *= k;
  c.preemption_protection *= k;
  c.reservation_slip *= k;
  c.default_runtime *= k;
  c.topology_wait *= k;
  c.mig.reconfigure_cost *= k;
  c.mig.min_layout_age *= k;
  for (PriorityClass& p : c.priority_classes) p.min_runtime *= k;
}

// One side's figures from per-job arrival, first start and finish (seconds; -1: never).
SideFigures figures(const std::vector<double>& arrival, const std::vector<double>& start, const std::vector<double>& finish) {
  SideFigures f;
  f.jobs = int64_t(arrival.size());
  std::vector<double> jct, wait;
  double first = 0, last = 0;
  bool any = false;
  for (size_t i = 0; i < arrival.size(); ++i) {
    first = any ? std::min(first, arrival[i]) : arrival[i];
    any = true;
    if (start[i] >= 0) {
      ++f.started;
      wait.push_back(std::max(0.0, start[i] - arrival[i]));
    }
    if (finish[i] >= 0) {
      ++f.finished;
      jct.push_back(finish[i] - arrival[i]);
      last = std::max(last, finish[i]);
    }
  }
  f.jct_mean_s = mean(jct);
  f.wait_mean_s = mean(wait);
  f.wait_p99_s = p99(wait);
  f.makespan_s = f.finished > 0 ? last - first : 0;
  return f;
}

struct SimSide {
  std::vector<double> start, finish;
  int64_t cycles = 0;
};

Result<SimSide> simulate(const sim::SimCluster& cluster, const sim::Workload& w, const SimModel& m, uint64_t seed) {
  sim::SimRunOptions o;
  o.policy = "tessera";  // the cluster file's configuration as it is (its preset, if it names one)
  o.seed = seed;
  o.cycle_interval = std::max<int64_t>(1, std::llround(m.cycle_interval_ms));
  o.min_cycle_gap = std::llround(m.min_cycle_gap_ms);
  o.submit_latency = std::llround(m.submit_latency_ms);
  o.start_latency = std::llround(m.start_latency_ms);
  o.finish_latency = std::llround(m.finish_latency_ms);
  o.sample_interval = std::max<Duration>(1000, o.cycle_interval);
  auto rep = sim::run_simulation(cluster, w, o);
  if (!rep.ok()) return rep.error();
  SimSide s;
  s.cycles = rep->metrics.cycles;
  for (const sim::SimJobRecord& r : rep->jobs) {
    s.start.push_back(r.first_start >= 0 ? double(r.first_start) / kUnit : -1);
    s.finish.push_back(r.finish >= 0 ? double(r.finish) / kUnit : -1);
  }
  if (s.start.size() != w.jobs.size()) return internal_error("the simulator reported " + std::to_string(s.start.size()) + " of " +
                                                             std::to_string(w.jobs.size()) + " jobs");
  return s;
}

std::string ms(double s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

}  // namespace

Status validate_sim_model(const SimModel& m) {
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(m.cycle_interval_ms) || m.cycle_interval_ms < 1 || m.cycle_interval_ms > 3.6e6)
    return invalid_argument("--sim-cycle-interval-ms: must be 1..3600000");
  if (!finite(m.min_cycle_gap_ms) || m.min_cycle_gap_ms < 0 || m.min_cycle_gap_ms > m.cycle_interval_ms)
    return invalid_argument("--sim-min-cycle-gap-ms: must be 0..--sim-cycle-interval-ms");
  for (auto [v, flag] : {std::pair{m.submit_latency_ms, "--sim-submit-latency-ms"}, std::pair{m.start_latency_ms, "--sim-start-latency-ms"},
                         std::pair{m.finish_latency_ms, "--sim-finish-latency-ms"}})
    if (!finite(v) || (v < 0 && v != -1) || v > 3.6e6)
      return invalid_argument(std::string(flag) + ": must be -1 (the live run's mean) or 0..3600000");
  return {};
}

double relative_diff(double a, double b) {
  if (a == 0) return b == 0 ? 0 : 1;
  return (b - a) / a;
}

double SimCompare::worst_diff() const {
  return std::max({std::abs(jct_diff), std::abs(wait_p99_diff), std::abs(makespan_diff)});
}

Result<std::map<int64_t, ServerJobTimes>> fetch_live_times(RestClient& admin) {
  std::map<int64_t, ServerJobTimes> out;
  int64_t after = 0;
  auto num = [](const Json& j, const char* k) { return j.contains(k) && j[k].is_number_integer() ? j[k].get<int64_t>() : int64_t(-1); };
  for (int page = 0; page < 100000; ++page) {
    RestReply r = admin.get("/api/v1/jobs?limit=1000&after=" + std::to_string(after));
    if (r.status != 200 || !r.body.is_object() || !r.body.contains("jobs") || !r.body["jobs"].is_array())
      return internal_error("GET /api/v1/jobs: " + (r.status ? "HTTP " + std::to_string(r.status) : r.error));
    for (const Json& j : r.body["jobs"]) {
      if (!j.is_object()) continue;
      ServerJobTimes t;
      t.user = j.value("user", "");
      t.state = j.value("state", "");
      t.submitted_ms = num(j, "submitted_ms");
      t.started_ms = num(j, "started_ms");
      t.finished_ms = num(j, "finished_ms");
      t.attempts = int(std::max<int64_t>(0, num(j, "attempt")));
      out[num(j, "id")] = t;
    }
    if (!r.body.contains("next_after") || !r.body["next_after"].is_number_integer()) return out;
    const int64_t next = r.body["next_after"].get<int64_t>();
    if (next <= after) return internal_error("GET /api/v1/jobs: the cursor did not advance");
    after = next;
  }
  return internal_error("GET /api/v1/jobs: too many pages");
}

OrderAgreement start_order_agreement(const std::vector<double>& arrival, const std::vector<double>& a,
                                     const std::vector<double>& b, bool contended_only, double tie_s) {
  OrderAgreement o;
  const size_t n = std::min({arrival.size(), a.size(), b.size()});
  for (size_t i = 0; i < n; ++i) {
    if (a[i] < 0 || b[i] < 0) continue;
    for (size_t j = i + 1; j < n; ++j) {
      if (a[j] < 0 || b[j] < 0) continue;
      if (contended_only) {
        const double later = std::max(arrival[i], arrival[j]);
        if (later > std::min(a[i], a[j]) && later > std::min(b[i], b[j])) continue;
      }
      const double da = a[i] - a[j], db = b[i] - b[j];
      const bool ta = std::abs(da) <= tie_s, tb = std::abs(db) <= tie_s;
      if (ta && tb) continue;  // one cycle on both sides
      if (ta || tb) {
        ++o.tied;
        continue;
      }
      ++o.pairs;
      if ((da < 0) == (db < 0)) ++o.same;
    }
  }
  return o;
}

Result<SimCompare> compare_live_with_sim(const std::string& cluster_yaml, const std::vector<LiveJob>& jobs_in, const SimModel& model_in,
                                         double submit_lag_ms_p99) {
  if (Status st = validate_sim_model(model_in); !st.ok()) return st.error();
  if (jobs_in.empty()) return invalid_argument("--compare-sim: no job was acknowledged by the server: nothing to compare");
  auto cluster = sim::parse_cluster_yaml(cluster_yaml);
  if (!cluster.ok()) return invalid_argument("--compare-sim: the cluster YAML: " + cluster.error().message);
  scale_config(cluster->config, kUnit);
  std::vector<LiveJob> jobs = jobs_in;
  std::sort(jobs.begin(), jobs.end(), [](const LiveJob& x, const LiveJob& y) { return x.id < y.id; });
  // The workload: each job as the server parsed it (config::JobSpec::gang), its run time as the
  // hollow node reads its command.
  sim::Workload w;
  w.source = "bench cluster (live run)";
  std::set<std::string> teams;
  std::vector<double> run_s;
  for (const LiveJob& j : jobs) {
    auto spec = config::parse_job_spec_json(j.spec);
    if (!spec.ok()) return invalid_argument("--compare-sim: job " + std::to_string(j.id) + ": " + spec.error().message);
    if (spec->max_runtime > 0 || spec->workflow.array || !spec->workflow.dependencies.empty() || spec->workflow.hold ||
        spec->workflow.begin > 0)
      return invalid_argument("--compare-sim: job " + std::to_string(j.id) +
                              ": time limits, arrays, dependencies, holds and begin times are not modelled by the simulator");
    if (!std::isfinite(j.arrival_s) || j.arrival_s < 0) return invalid_argument("--compare-sim: job " + std::to_string(j.id) + ": bad arrival");
    const HollowOutcome out = hollow_outcome(spec->command, 60);
    sim::WorkloadJob wj;
    wj.name = spec->name;
    wj.team = spec->queue;
    wj.user = j.user.empty() ? "admin" : j.user;
    wj.priority_class = spec->priority_class;
    wj.arrival = std::llround(j.arrival_s * kUnit);
    wj.gang = spec->gang();
    wj.work = std::max<Duration>(1, std::llround(out.seconds * kUnit));
    wj.expected_runtime = spec->expected_runtime * kUnit;
    wj.checkpoint.interval = spec->checkpoint.interval * kUnit;
    wj.checkpoint.grace = spec->checkpoint.grace * kUnit;
    wj.checkpoint.save_cost *= kUnit;
    wj.checkpoint.restart_cost *= kUnit;
    teams.insert(wj.team);
    run_s.push_back(out.seconds);
    w.jobs.push_back(std::move(wj));
  }
  w.teams.assign(teams.begin(), teams.end());

  SimCompare c;
  c.submit_lag_ms_p99 = submit_lag_ms_p99;
  // The live side, and its latencies.
  std::vector<double> arrival, live_start, live_finish, submit_lat, start_lat, finish_lat;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const LiveJob& j = jobs[i];
    arrival.push_back(j.arrival_s);
    live_start.push_back(j.start_s);
    const bool done = j.state == "succeeded" && j.finish_s >= 0;
    live_finish.push_back(done ? j.finish_s : -1);
    if (j.attempts > 1) ++c.restarted;
    if (j.submitted_s >= 0) submit_lat.push_back(std::max(0.0, j.submitted_s - j.arrival_s) * 1000);
    if (done && j.attempts == 1 && j.start_s >= 0 && j.work_end_s >= 0) {
      start_lat.push_back((j.work_end_s - run_s[i] - j.start_s) * 1000);
      finish_lat.push_back((j.finish_s - j.work_end_s) * 1000);
    }
  }
  c.live = figures(arrival, live_start, live_finish);
  c.latency_samples = int64_t(start_lat.size());
  c.submit_latency_ms_mean = mean(submit_lat);
  c.submit_latency_ms_p99 = p99(submit_lat);
  c.start_latency_ms_mean = mean(start_lat);
  c.start_latency_ms_p99 = p99(start_lat);
  c.finish_latency_ms_mean = mean(finish_lat);
  c.finish_latency_ms_p99 = p99(finish_lat);
  c.model = model_in;
  if (c.model.submit_latency_ms < 0) c.model.submit_latency_ms = std::max(0.0, std::round(c.submit_latency_ms_mean));
  if (c.model.start_latency_ms < 0) c.model.start_latency_ms = std::max(0.0, std::round(c.start_latency_ms_mean));
  if (c.model.finish_latency_ms < 0) c.model.finish_latency_ms = std::max(0.0, std::round(c.finish_latency_ms_mean));
  // The simulator, with the model and without its latencies.
  const uint64_t seed = cluster->config.seed;
  auto s = simulate(*cluster, w, c.model, seed);
  if (!s.ok()) return invalid_argument("--compare-sim: the simulator: " + s.error().message);
  SimModel bare = c.model;
  bare.submit_latency_ms = bare.start_latency_ms = bare.finish_latency_ms = 0;
  auto s0 = simulate(*cluster, w, bare, seed);
  if (!s0.ok()) return invalid_argument("--compare-sim: the simulator: " + s0.error().message);
  c.sim = figures(arrival, s->start, s->finish);
  c.sim.cycles = s->cycles;
  c.sim_no_latency = figures(arrival, s0->start, s0->finish);
  c.sim_no_latency.cycles = s0->cycles;
  c.jct_diff = relative_diff(c.live.jct_mean_s, c.sim.jct_mean_s);
  c.wait_p99_diff = relative_diff(c.live.wait_p99_s, c.sim.wait_p99_s);
  c.makespan_diff = relative_diff(c.live.makespan_s, c.sim.makespan_s);
  // Ties: starts within 5 ms are one cycle (cycles are at least 20 ms apart).
  c.order_all = start_order_agreement(arrival, live_start, s->start, false, 0.005);
  c.order_contended = start_order_agreement(arrival, live_start, s->start, true, 0.005);
  SimModel nudged = c.model;
  nudged.start_latency_ms += 1;
  auto s1 = simulate(*cluster, w, nudged, seed);
  if (!s1.ok()) return invalid_argument("--compare-sim: the simulator: " + s1.error().message);
  c.order_self_contended = start_order_agreement(arrival, s->start, s1->start, true, 0.005);
  for (size_t i = 0; i < jobs.size(); ++i)
    c.starts.push_back({jobs[i].id, w.jobs[i].team, int(w.jobs[i].gang.total_gpus()), arrival[i], live_start[i],
                        i < s->start.size() ? s->start[i] : -1});
  return c;
}

nlohmann::json SimCompare::to_json() const {
  auto side = [](const SideFigures& f) {
    return Json{{"jobs", f.jobs},           {"started", f.started},         {"finished", f.finished},
                {"jct_mean_s", f.jct_mean_s}, {"wait_mean_s", f.wait_mean_s}, {"wait_p99_s", f.wait_p99_s},
                {"makespan_s", f.makespan_s}, {"cycles", f.cycles >= 0 ? Json(f.cycles) : Json(nullptr)}};
  };
  auto order = [](const OrderAgreement& o) {
    return Json{{"pairs", o.pairs}, {"same_order", o.same}, {"tied_on_one_side", o.tied}, {"fraction", o.fraction()}};
  };
  Json per_job = Json::array();
  for (const JobStarts& j : starts)
    per_job.push_back({{"id", j.id}, {"queue", j.queue}, {"gpus", j.gpus}, {"arrival_s", j.arrival_s},
                       {"live_start_s", j.live_start_s}, {"sim_start_s", j.sim_start_s}});
  return Json{{"jobs", std::move(per_job)},
              {"live", side(live)},
              {"sim", side(sim)},
              {"sim_no_latency", side(sim_no_latency)},
              {"model",
               {{"cycle_interval_ms", model.cycle_interval_ms},
                {"min_cycle_gap_ms", model.min_cycle_gap_ms},
                {"submit_latency_ms", model.submit_latency_ms},
                {"start_latency_ms", model.start_latency_ms},
                {"finish_latency_ms", model.finish_latency_ms}}},
              {"measured",
               {{"submit_latency_ms_mean", submit_latency_ms_mean},
                {"submit_latency_ms_p99", submit_latency_ms_p99},
                {"start_latency_ms_mean", start_latency_ms_mean},
                {"start_latency_ms_p99", start_latency_ms_p99},
                {"finish_latency_ms_mean", finish_latency_ms_mean},
                {"finish_latency_ms_p99", finish_latency_ms_p99},
                {"latency_samples", latency_samples},
                {"submit_lag_ms_p99", submit_lag_ms_p99},
                {"restarted", restarted}}},
              {"diff", {{"jct_mean", jct_diff}, {"wait_p99", wait_p99_diff}, {"makespan", makespan_diff}, {"worst", worst_diff()}}},
              {"order",
               {{"contended", order(order_contended)},
                {"all", order(order_all)},
                {"sim_vs_sim_start_latency_plus_1ms_contended", order(order_self_contended)}}}};
}

std::string SimCompare::table() const {
  std::string out;
  char buf[400];
  auto line = [&](const char* name, double l, double s, double s0, double d) {
    std::snprintf(buf, sizeof buf, "  %-22s %12s %12s %+8.1f%% %14s\n", name, ms(l).c_str(), ms(s).c_str(), 100 * d, ms(s0).c_str());
    out += buf;
  };
  std::snprintf(buf, sizeof buf,
                "live vs simulator (cycle every %.0f ms, event cycles >= %.0f ms apart; latency: submit %.0f ms, start %.0f ms, "
                "finish %.0f ms)\n",
                model.cycle_interval_ms, model.min_cycle_gap_ms, model.submit_latency_ms, model.start_latency_ms, model.finish_latency_ms);
  out += buf;
  std::snprintf(buf, sizeof buf, "  %-22s %12s %12s %9s %14s\n", "", "live", "sim", "sim-live", "sim, no lat.");
  out += buf;
  line("mean JCT", live.jct_mean_s, sim.jct_mean_s, sim_no_latency.jct_mean_s, jct_diff);
  line("p99 wait", live.wait_p99_s, sim.wait_p99_s, sim_no_latency.wait_p99_s, wait_p99_diff);
  line("mean wait", live.wait_mean_s, sim.wait_mean_s, sim_no_latency.wait_mean_s, relative_diff(live.wait_mean_s, sim.wait_mean_s));
  line("makespan", live.makespan_s, sim.makespan_s, sim_no_latency.makespan_s, makespan_diff);
  std::snprintf(buf, sizeof buf, "  %-22s %12lld %12lld %9s %14lld\n", "jobs finished", (long long)live.finished, (long long)sim.finished, "",
                (long long)sim_no_latency.finished);
  out += buf;
  std::snprintf(buf, sizeof buf, "  same start order: %.1f%% of %lld contended pairs (%lld tied on one side), %.2f%% of %lld pairs in all\n",
                100 * order_contended.fraction(), (long long)order_contended.pairs, (long long)order_contended.tied,
                100 * order_all.fraction(), (long long)order_all.pairs);
  out += buf;
  std::snprintf(buf, sizeof buf, "  the simulator against itself with start latency +1 ms: %.1f%% of %lld contended pairs in the same order\n",
                100 * order_self_contended.fraction(), (long long)order_self_contended.pairs);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "  measured live: submit latency mean %.1f ms (p99 %.1f), start latency mean %.1f ms (p99 %.1f), finish latency "
                "mean %.1f ms (p99 %.1f) over %lld jobs; submit lag p99 %.1f ms; %lld restarted\n",
                submit_latency_ms_mean, submit_latency_ms_p99, start_latency_ms_mean, start_latency_ms_p99, finish_latency_ms_mean, finish_latency_ms_p99, (long long)latency_samples,
                submit_lag_ms_p99, (long long)restarted);
  out += buf;
  return out;
}

}  // namespace tessera::bench
