// `tessera bench cluster`: the real live system at scale. Starts `tessera server` (unchanged: its
// HTTP server, SQLite store and scheduler) as a child process on a generated cluster of N nodes x G
// GPUs, drives it with a fleet of hollow nodes (bench/hollow_nodes.h: the agent protocol over real
// HTTP, fake GPUs, tasks that last their declared time) and loads it through the REST API:
//   storm  C clients submit jobs (`sleep S`, G GPUs) over keep-alive connections, as fast as they are
//          acknowledged (or at --rate), for a count or a time;
//   trace  the Philly trace (sim/workload.h's reader) as a steady stream, arrivals and run times
//          divided by a time scale (a window of it, run times optionally capped); with
//          --compare-sim the same jobs then go through the simulator (bench/sim_compare.h);
//   churn  a storm at a steady rate while nodes go silent past the agent timeout and come back,
//          nodes are drained and resumed, and running jobs are cancelled.
// It reports acknowledged submits/s, submit->start (only jobs that started while capacity was free:
// the GPUs of every acknowledged, unfinished job fit the cluster), the scheduling cycle (estimated
// from the /metrics histogram's buckets), heartbeat round trips, the controller's CPU and peak RSS,
// the store's size, nodes that went NotReady and jobs lost or restarted.
//
// Thread-safety: run_bench_cluster is a plain function; `progress` is called from its thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/sim_compare.h"
#include "core/status.h"

namespace tessera::bench {

struct BenchClusterOptions {
  int nodes = 100;
  int gpus_per_node = 8;
  std::string gpu_model = "H100-80GB-SXM";
  int64_t heartbeat_ms = 5000;
  int64_t agent_timeout_ms = 0;  // 0 = 3 heartbeats
  int64_t task_lease_ms = 0;     // 0 = the server's default (max(60 s, 4 x agent timeout))
  std::string workload = "storm";  // storm | trace | churn
  int clients = 8;
  int64_t jobs = 1000;          // storm, churn: jobs to submit (0 = until --duration)
  double duration_s = 0;        // storm: stop submitting after this (0 = no limit); trace: seconds of
                                // compressed trace; churn: how long (0 = until the jobs are in)
  double rate = 0;              // submissions per second in all (0 = as fast as acknowledged)
  int job_gpus = 1;
  double job_seconds = 10;      // storm/churn jobs run `sleep job_seconds`
  std::string trace_dir = "../shared/data/philly-gavel";
  double time_scale = 1000;     // trace: arrivals and run times divided by this
  double trace_from_s = 0;      // trace: the window starts this many trace seconds after its first arrival
  double max_job_seconds = 0;   // trace: compressed run times longer than this are cut to it (0 = none)
  std::string preset;           // the scheduler preset the server runs (cluster YAML `config.preset`; "" = its default)
  // After the run, the same jobs through the simulator (bench/sim_compare.h): live vs sim.
  bool compare_sim = false;
  SimModel sim_model;
  double churn_every_s = 5;     // churn: one silence, one drain and one cancel this often
  double drain_s = 120;         // after submitting, wait at most this long for every job to end
  bool watch = false;           // hollow nodes hold a watch open (when the server has it)
  int loops = 2;                // hollow-node event-loop threads
  // The benchmark's own threads (hollow nodes, clients) run this many nice levels above the server
  // (0: alike). The hollow nodes stand for machines of their own; a higher priority keeps their waits
  // for the shared cores out of what they measure. Needs root or CAP_SYS_NICE.
  int priority = 0;
  std::vector<std::string> server_args;  // passed to `tessera server` as they are
  std::string store;                      // `tessera server --data` (empty: SQLite in the work directory)
  std::string server_binary = "/proc/self/exe";  // tessera-bench-cluster sets the tessera beside it
  std::string work_dir;         // kept when given; default a temporary directory, removed at the end
  uint64_t seed = 1;
};

// Checks every option, naming the flag at fault.
Status validate_bench_cluster(const BenchClusterOptions& o);

// The cluster YAML the server is started with: one entry per node, named hollow-00000 ..., in leaves
// of 32 under spines of 16, the queues `default` plus `teams`, and `config: {preset: P}` when given.
std::string bench_cluster_yaml(const BenchClusterOptions& o, const std::vector<std::string>& teams);

struct BenchClusterResult {
  std::string workload;
  int nodes = 0;
  int64_t gpus = 0;
  int64_t heartbeat_ms = 0, agent_timeout_ms = 0;
  double register_s = 0;  // until every node was registered
  bool watch_requested = false, watch_used = false;
  int priority = 0;  // nice levels the benchmark ran above the server (0 when not asked or refused)
  // Submissions.
  int64_t submitted = 0, acked = 0, submit_errors = 0, skipped = 0;
  double submit_s = 0, acked_per_s = 0, submit_ms_p50 = 0, submit_ms_p99 = 0;
  std::string first_submit_error;
  // Submit -> start (the last task's assignment arriving at its node), capacity-free jobs only.
  int64_t started = 0, start_samples = 0;
  double start_ms_p50 = 0, start_ms_p99 = 0, start_ms_max = 0;
  // The scheduling cycle over the workload (bucket-estimated from /metrics).
  int64_t cycles = 0;
  double cycle_ms_p50 = 0, cycle_ms_p99 = 0;
  // Heartbeats over the workload.
  int64_t heartbeats = 0, heartbeat_failures = 0, watch_answers = 0, watch_wakeups = 0;
  double hb_ms_p50 = 0, hb_ms_p99 = 0, hb_ms_max = 0;
  // The controller's own part of a heartbeat (received to answered, applied and durable), from its
  // tessera_agent_heartbeat_seconds histogram over the workload (bucket-estimated): the round trip
  // less this is the HTTP server's, the network's and the hollow nodes' share.
  double hb_server_ms_p50 = 0, hb_server_ms_p99 = 0;
  // The same beats in the controller's HTTP server: from their headers' arrival to the answer being
  // ready (tessera_api_request_duration_seconds of the heartbeat route; bucket-estimated).
  double hb_http_ms_p50 = 0, hb_http_ms_p99 = 0;
  // ... and to their answer sent (tessera_api_request_sent_seconds of the route).
  double hb_sent_ms_p50 = 0, hb_sent_ms_p99 = 0;
  std::string last_fleet_error;
  // The controller.
  double controller_cpu_s = 0, controller_cpu_s_total = 0, wall_s = 0;
  double peak_rss_mb = 0, rss_mb_end = 0, store_mb = 0;
  int64_t jobs_in_store = 0;
  // Health.
  int64_t nodes_not_ready = 0, not_ready_at_end = 0, jobs_lost = 0, jobs_restarted = 0;
  int64_t succeeded = 0, failed = 0, cancelled = 0, unfinished = 0, other_final = 0;
  // Churn.
  int64_t silenced = 0, drained = 0, cancels = 0;
  std::string server_exit;
  // --compare-sim: live vs the simulator (compared = false: not asked, or it failed: compare_error).
  bool compared = false;
  SimCompare compare;
  std::string compare_error;

  nlohmann::json to_json() const;
};

Result<BenchClusterResult> run_bench_cluster(const BenchClusterOptions& o, const std::function<void(const std::string&)>& progress);
// The report as an aligned two-column table.
std::string bench_cluster_table(const BenchClusterResult& r);

// Quantile q (0..1) of a Prometheus histogram given as cumulative counts per upper bound (the +Inf
// bucket last, bound = infinity), by linear interpolation inside the bucket; 0 when empty.
double histogram_quantile(const std::vector<std::pair<double, double>>& cumulative, double q);
// The cumulative buckets of histogram `name` in a /metrics text (no labels besides le).
// `labels`: the series' labels before `le`, as rendered (e.g. route="/api/v1/agent/heartbeat"); empty
// for a histogram without labels.
std::vector<std::pair<double, double>> parse_histogram(const std::string& metrics_text, const std::string& name,
                                                       const std::string& labels = "");

}  // namespace tessera::bench
