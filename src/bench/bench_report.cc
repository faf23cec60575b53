// The report of `tessera bench cluster`: JSON, the table, and the /metrics histogram reading.
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "bench/bench_cluster.h"

namespace tessera::bench {

std::vector<std::pair<double, double>> parse_histogram(const std::string& text, const std::string& name,
                                                       const std::string& labels) {
  std::vector<std::pair<double, double>> out;
  const std::string prefix = name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t q = line.find('"', prefix.size());
    if (q == std::string::npos) continue;
    const std::string le = line.substr(prefix.size(), q - prefix.size());
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::atof(le.c_str());
    out.emplace_back(bound, std::atof(line.c_str() + sp + 1));
  }
  return out;
}

double histogram_quantile(const std::vector<std::pair<double, double>>& h, double q) {
  if (h.empty() || h.back().second <= 0) return 0;
  const double total = h.back().second, rank = q * total;
  double prev_bound = 0, prev_count = 0;
  for (const auto& [bound, count] : h) {
    if (count >= rank && count > prev_count) {
      if (std::isinf(bound)) return prev_bound;  // beyond the last finite bound: say that bound
      return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count);
    }
    prev_bound = std::isinf(bound) ? prev_bound : bound;
    prev_count = count;
  }
  return prev_bound;
}

nlohmann::json BenchClusterResult::to_json() const {
  nlohmann::json j = nlohmann::json{
      {"workload", workload},
      {"nodes", nodes},
      {"gpus", gpus},
      {"heartbeat_ms", heartbeat_ms},
      {"agent_timeout_ms", agent_timeout_ms},
      {"register_s", register_s},
      {"watch_requested", watch_requested},
      {"priority", priority},
      {"watch_used", watch_used},
      {"submitted", submitted},
      {"acked", acked},
      {"submit_errors", submit_errors},
      {"first_submit_error", first_submit_error},
      {"skipped", skipped},
      {"submit_s", submit_s},
      {"acked_per_s", acked_per_s},
      {"submit_ms_p50", submit_ms_p50},
      {"submit_ms_p99", submit_ms_p99},
      {"started", started},
      {"start_samples", start_samples},
      {"start_ms_p50", start_ms_p50},
      {"start_ms_p99", start_ms_p99},
      {"start_ms_max", start_ms_max},
      {"cycles", cycles},
      {"cycle_ms_p50_bucket_estimate", cycle_ms_p50},
      {"cycle_ms_p99_bucket_estimate", cycle_ms_p99},
      {"heartbeats", heartbeats},
      {"heartbeat_failures", heartbeat_failures},
      {"watch_answers", watch_answers},
      {"watch_wakeups", watch_wakeups},
      {"heartbeat_ms_p50", hb_ms_p50},
      {"heartbeat_ms_p99", hb_ms_p99},
      {"heartbeat_ms_max", hb_ms_max},
      {"heartbeat_server_ms_p50_bucket_estimate", hb_server_ms_p50},
      {"heartbeat_server_ms_p99_bucket_estimate", hb_server_ms_p99},
      {"heartbeat_http_ms_p50_bucket_estimate", hb_http_ms_p50},
      {"heartbeat_http_ms_p99_bucket_estimate", hb_http_ms_p99},
      {"heartbeat_sent_ms_p50_bucket_estimate", hb_sent_ms_p50},
      {"heartbeat_sent_ms_p99_bucket_estimate", hb_sent_ms_p99},
      {"last_fleet_error", last_fleet_error},
      {"controller_cpu_s", controller_cpu_s},
      {"controller_cpu_s_total", controller_cpu_s_total},
      {"wall_s", wall_s},
      {"controller_peak_rss_mb", peak_rss_mb},
      {"controller_rss_mb_end", rss_mb_end},
      {"store_mb", store_mb},
      {"jobs_in_store", jobs_in_store},
      {"nodes_not_ready", nodes_not_ready},
      {"nodes_not_ready_at_end", not_ready_at_end},
      {"jobs_lost", jobs_lost},
      {"jobs_restarted", jobs_restarted},
      {"succeeded", succeeded},
      {"failed", failed},
      {"cancelled", cancelled},
      {"unfinished", unfinished},
      {"other_final", other_final},
      {"silenced", silenced},
      {"drained", drained},
      {"cancels", cancels},
      {"server_exit", server_exit}};
  if (compared) j["compare_sim"] = compare.to_json();
  if (!compare_error.empty()) j["compare_sim_error"] = compare_error;
  return j;
}

std::string bench_cluster_table(const BenchClusterResult& r) {
  std::string out;
  auto row = [&](const std::string& k, const std::string& v) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "  %-38s %s\n", k.c_str(), v.c_str());
    out += buf;
  };
  auto f = [](const char* fmt, auto... a) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, a...);
    return std::string(buf);
  };
  out += f("bench cluster: %s, %d hollow nodes x %lld GPUs, heartbeat %lld ms, agent timeout %lld ms, watch %s\n",
           r.workload.c_str(), r.nodes, (long long)(r.nodes ? r.gpus / r.nodes : 0), (long long)r.heartbeat_ms,
           (long long)r.agent_timeout_ms, r.watch_used ? "on" : (r.watch_requested ? "asked, not served (404)" : "off"));
  if (r.priority > 0) out += f("  (the benchmark's threads ran %d nice levels above the server)\n", r.priority);
  row("all nodes registered after", f("%.1f s", r.register_s));
  row("submits acknowledged", f("%lld of %lld (%lld errors%s%s)", (long long)r.acked, (long long)r.submitted,
                                 (long long)r.submit_errors, r.first_submit_error.empty() ? "" : ": ",
                                 r.first_submit_error.substr(0, 120).c_str()));
  row("acknowledged submits/s", f("%.0f over %.1f s (ack p50 %.1f ms, p99 %.1f ms)", r.acked_per_s, r.submit_s,
                                  r.submit_ms_p50, r.submit_ms_p99));
  row("submit->start (capacity free)", f("p50 %.0f ms, p99 %.0f ms, max %.0f ms (%lld jobs; %lld started in all)",
                                         r.start_ms_p50, r.start_ms_p99, r.start_ms_max, (long long)r.start_samples,
                                         (long long)r.started));
  row("scheduling cycle (bucket-estimated)", f("p50 %.1f ms, p99 %.1f ms (%lld cycles)", r.cycle_ms_p50, r.cycle_ms_p99,
                                               (long long)r.cycles));
  row("heartbeat round trip", f("p50 %.1f ms, p99 %.1f ms, max %.1f ms (%lld beats, %lld failed)", r.hb_ms_p50, r.hb_ms_p99,
                                r.hb_ms_max, (long long)r.heartbeats, (long long)r.heartbeat_failures));
  row("heartbeat in the controller", f("p50 %.1f ms, p99 %.1f ms (bucket-estimated; received to answered)",
                                       r.hb_server_ms_p50, r.hb_server_ms_p99));
  row("heartbeat in the HTTP server", f("p50 %.1f ms, p99 %.1f ms (bucket-estimated; headers in to answer ready)",
                                        r.hb_http_ms_p50, r.hb_http_ms_p99));
  row("heartbeat until its answer sent", f("p50 %.1f ms, p99 %.1f ms (bucket-estimated; headers in to answer sent)",
                                           r.hb_sent_ms_p50, r.hb_sent_ms_p99));
  if (r.watch_requested) row("watch answers / wakeups", f("%lld / %lld", (long long)r.watch_answers, (long long)r.watch_wakeups));
  row("controller CPU", f("%.1f s in the workload's %.1f s (%.1f s since start)", r.controller_cpu_s, r.wall_s,
                          r.controller_cpu_s_total));
  row("controller peak RSS (VmHWM)", f("%.0f MB (%.0f MB at the end)", r.peak_rss_mb, r.rss_mb_end));
  row("store on disk", f("%.1f MB, %lld jobs", r.store_mb, (long long)r.jobs_in_store));
  row("nodes that went NotReady", f("%lld (%lld at the end)", (long long)r.nodes_not_ready, (long long)r.not_ready_at_end));
  row("jobs lost / restarted", f("%lld / %lld", (long long)r.jobs_lost, (long long)r.jobs_restarted));
  row("final states", f("%lld succeeded, %lld failed, %lld cancelled, %lld unfinished, %lld other", (long long)r.succeeded,
                        (long long)r.failed, (long long)r.cancelled, (long long)r.unfinished, (long long)r.other_final));
  if (r.workload == "churn")
    row("churn", f("%lld nodes silenced, %lld drained, %lld jobs cancelled", (long long)r.silenced, (long long)r.drained,
                   (long long)r.cancels));
  if (r.workload == "trace" && r.skipped > 0) row("trace jobs skipped (too big)", f("%lld", (long long)r.skipped));
  if (!r.last_fleet_error.empty()) row("last hollow-node error", r.last_fleet_error.substr(0, 160));
  row("server stopped", r.server_exit);
  if (r.compared) out += r.compare.table();
  if (!r.compare_error.empty()) out += "  --compare-sim failed: " + r.compare_error + "\n";
  return out;
}

}  // namespace tessera::bench
