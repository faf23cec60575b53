// tessera sim run --cluster FILE --workload SPEC --policy NAME[,NAME...]: replays a workload through
// the scheduling core (or a baseline) and reports the metrics of docs/simulator.md per policy, as a
// table, JSON (--json) and a self-contained HTML report (--html). Progress on stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "sim/cluster_config.h"
#include "sim/report.h"
#include "sim/sim_run.h"
#include "sim/workload.h"

namespace tessera::cli {
namespace {

struct RunArgs {
  std::string cluster, workload, policy = "tessera", json, html, jobs_csv;
  uint64_t seed = 1;
  int64_t mtbf = 0, repair = 4 * 3600, horizon = 0, stall_limit = 7 * 86400;
  // The controller's cadence and the delays of a live system (sim::SimRunOptions), in seconds of
  // the workload's time.
  int64_t cycle_interval = sim::SimRunOptions{}.cycle_interval, min_cycle_gap = sim::SimRunOptions{}.min_cycle_gap;
  int64_t submit_latency = 0, start_latency = 0, finish_latency = 0;
};

[[noreturn]] void fail(const std::string& msg, int code) {
  std::cerr << "tessera sim run: " << msg << "\n";
  throw CLI::RuntimeError(code);
}

void run(const RunArgs& a) {
  if (a.cluster.empty()) fail("--cluster FILE is required (YAML as in examples/cluster-2048.yaml, or an openb node CSV)", 2);
  if (a.workload.empty()) fail("--workload SPEC is required: philly:DIR, openb:FILE or synthetic:KEY=VALUE,...", 2);
  std::vector<std::string> policies;
  {
    std::stringstream ss(a.policy);
    for (std::string p; std::getline(ss, p, ',');)
      if (!p.empty()) policies.push_back(p);
  }
  if (policies.size() == 1 && policies[0] == "all") policies = sim::sim_policy_names();
  const auto known = sim::sim_policy_names();
  for (const std::string& p : policies)
    if (std::find(known.begin(), known.end(), p) == known.end()) {
      std::string k;
      for (const std::string& n : known) k += (k.empty() ? "" : ", ") + n;
      fail("--policy: unknown policy '" + p + "' (known: " + k + ", or all)", 2);
    }
  if (a.mtbf < 0) fail("--mtbf: must be >= 0 seconds", 2);
  if (a.stall_limit < 0) fail("--stall-limit: must be >= 0 seconds", 2);
  if (a.repair <= 0) fail("--repair: must be > 0 seconds", 2);
  if (a.cycle_interval <= 0) fail("--cycle-interval: must be > 0 seconds", 2);
  if (a.min_cycle_gap < 0) fail("--min-cycle-gap: must be >= 0 seconds", 2);
  if (a.submit_latency < 0) fail("--submit-latency: must be >= 0 seconds", 2);
  if (a.start_latency < 0) fail("--start-latency: must be >= 0 seconds", 2);
  if (a.finish_latency < 0) fail("--finish-latency: must be >= 0 seconds", 2);
  auto cluster = sim::load_cluster_file(a.cluster);
  if (!cluster.ok()) fail(cluster.error().message, 2);
  auto wl = sim::load_workload(a.workload);
  if (!wl.ok()) fail("--workload: " + wl.error().message, 2);
  std::cerr << "tessera sim run: " << wl->jobs.size() << " jobs from " << a.workload << " on "
            << cluster->cluster.total_gpus() << " GPUs\n";

  std::vector<sim::SimReport> reports;
  const bool tty = isatty(2);
  for (const std::string& p : policies) {
    sim::SimRunOptions o;
    o.policy = p;
    o.seed = a.seed;
    o.node_mtbf = a.mtbf;
    o.node_repair = a.repair;
    o.horizon = a.horizon;
    o.stall_limit = a.stall_limit;
    o.cycle_interval = a.cycle_interval;
    o.min_cycle_gap = a.min_cycle_gap;
    o.submit_latency = a.submit_latency;
    o.start_latency = a.start_latency;
    o.finish_latency = a.finish_latency;
    int last_pct = -1;
    o.progress = [&](int64_t done, int64_t total) {
      const int pct = total ? int(done * 100 / total) : 100;
      if (pct == last_pct) return;
      last_pct = pct;
      if (tty) std::fprintf(stderr, "\r  %-12s %3d%% of jobs finished", p.c_str(), pct);
      else if (pct % 25 == 0) std::fprintf(stderr, "  %s: %d%% of jobs finished\n", p.c_str(), pct);
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto r = sim::run_simulation(*cluster, *wl, o);
    if (!r.ok()) fail(r.error().message, 2);
    r->metrics.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r->metrics.capacity_gpus = cluster->cluster.total_gpus();  // for `tessera plan buy-vs-rent --from-usage`
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
    std::fprintf(stderr, "  %s: done in %.1f s (%lld cycles)\n", p.c_str(), r->metrics.elapsed_s,
                 (long long)r->metrics.cycles);
    if (r->metrics.stalled_at >= 0)
      std::fprintf(stderr,
                   "  %s: stopped stalled at %.1f h: every job had arrived, none ran, and none started for %.1f h; "
                   "%lld never started (--jobs-csv says why each waited)\n",
                   p.c_str(), double(r->metrics.stalled_at) / 3600, double(a.stall_limit) / 3600,
                   (long long)r->metrics.unstarted);
    reports.push_back(std::move(*r));
  }

  std::printf("%-12s %9s %9s %9s %9s %9s %9s %8s %8s %6s %9s %9s %6s %8s %6s\n", "policy", "finished", "JCT mean",
              "JCT p99", "wait p99", "1st-start", "makespan", "alloc%", "effect%", "Jain", "below-g", "unmet-max",
              "preem", "lostGPUh", "defrag");
  for (const sim::SimReport& r : reports) {
    const sim::SimMetrics& m = r.metrics;
    std::printf("%-12s %9lld %8.2fh %8.2fh %8.2fh %8.2fh %8.1fh %8.1f %8.1f %6.3f %8.1fh %8.2fh %6lld %8.1f %6lld\n",
                m.policy.c_str(), (long long)m.finished, m.jct_mean_s / 3600, m.jct_p99_s / 3600, m.wait_p99_s / 3600,
                m.first_start_p99_s / 3600, m.makespan_s / 3600, m.allocation_pct, m.effective_util_pct, m.jain_fairness,
                m.below_guarantee_s / 3600, m.max_guarantee_unmet_s / 3600, (long long)m.preemptions,
                m.lost_gpu_hours, (long long)m.defrag_moves);
  }
  // Cost, when any pool is billed (priced pools; docs/simulator.md).
  for (const sim::SimReport& r : reports) {
    const sim::SimMetrics& m = r.metrics;
    if (m.pools.empty() || m.cost <= 0) continue;
    std::printf("\n%s: cost %.0f for %.0f billed GPU-h; jobs other than services: mean JCT %.2fh, p99 wait %.2fh",
                m.policy.c_str(), m.cost, m.billed_gpu_hours, m.batch_jct_mean_s / 3600, m.batch_wait_p99_s / 3600);
    if (m.spot_reclaims > 0)
      std::printf("; %lld spot reclaims hit %lld running jobs, %.1f GPU-h lost to them", (long long)m.spot_reclaims,
                  (long long)m.job_interruptions, m.interruption_lost_gpu_hours);
    std::printf("; inference on spot %.1f GPU-h\n", m.inference_spot_gpu_hours);
    std::printf("  %-16s %-10s %12s %12s %12s\n", "pool", "kind", "billed GPU-h", "used GPU-h", "cost");
    for (const sim::SimMetrics::PoolCost& p : m.pools)
      std::printf("  %-16s %-10s %12.0f %12.0f %12.0f\n", p.pool.c_str(), p.kind.c_str(), p.billed_gpu_hours,
                  p.used_gpu_hours, p.cost);
  }
  if (!a.json.empty()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const sim::SimReport& r : reports) arr.push_back(sim::metrics_json(r.metrics));
    if (a.json == "-") {
      std::cout << arr.dump(2) << "\n";
    } else {
      std::ofstream f(a.json);
      if (!f) fail("--json: cannot write " + a.json, 1);
      f << arr.dump(2) << "\n";
    }
  }
  if (!a.jobs_csv.empty()) {
    std::ofstream f(a.jobs_csv);
    if (!f) fail("--jobs-csv: cannot write " + a.jobs_csv, 1);
    sim::write_jobs_csv(f, reports);
  }
  if (!a.html.empty()) {
    std::ofstream f(a.html);
    if (!f) fail("--html: cannot write " + a.html, 1);
    f << sim::render_html_report(reports, "Tessera simulation: " + a.workload + " on " + a.cluster);
  }
}

}  // namespace

void register_sim_run(CLI::App& sim) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = sim.add_subcommand("run", "Replay a workload through the scheduler and baselines; report metrics");
  cmd->add_option("--cluster", a->cluster, "cluster YAML (nodes, queues, config) or openb node CSV");
  cmd->add_option("--workload", a->workload, "philly:DIR | openb:FILE | synthetic:KEY=VALUE,...");
  cmd->add_option("--policy", a->policy, "tessera, k8s-default, fifo-gang, slurm, tiresias, drf; a comma list or all");
  cmd->add_option("--seed", a->seed, "random seed (failures, tie-breaks; default 1)");
  cmd->add_option("--mtbf", a->mtbf, "mean time between failures per node, seconds (default 0 = none)");
  cmd->add_option("--repair", a->repair, "time to repair a failed node, seconds (default 14400)");
  cmd->add_option("--horizon", a->horizon, "stop the simulation at this time, seconds (default: when all finish)");
  cmd->add_option("--stall-limit", a->stall_limit,
                  "stop once every job has arrived, none runs and none has started for this long, seconds "
                  "(default 604800 = 7 days; 0 = never); waits and allocation count to the stop, as with --horizon");
  cmd->add_option("--cycle-interval", a->cycle_interval, "while work waits, a cycle at least this often, seconds (default 300)");
  cmd->add_option("--min-cycle-gap", a->min_cycle_gap, "cycles on events at most this often, seconds (default 10)");
  cmd->add_option("--submit-latency", a->submit_latency, "a job reaches the scheduler this long after it arrives, seconds (default 0)");
  cmd->add_option("--start-latency", a->start_latency,
                  "a started job holds its GPUs this long before its work begins, seconds (default 0)");
  cmd->add_option("--finish-latency", a->finish_latency,
                  "a finished job holds its GPUs this long after its work ends, seconds (default 0)");
  cmd->add_option("--json", a->json, "write metrics as a JSON array to PATH ('-' = stdout)");
  cmd->add_option("--jobs-csv", a->jobs_csv, "write one row per job (arrival, first start, finish, preemptions, why it waited) to PATH");
  cmd->add_option("--html", a->html, "write a self-contained HTML report to PATH");
  cmd->callback([a] { run(*a); });
}

}  // namespace tessera::cli
