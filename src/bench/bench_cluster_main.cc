// `tessera bench cluster` (its own executable, tessera-bench-cluster, which `tessera bench cluster`
// runs: the hollow nodes' HTTP client, libcurl, stays out of the main binary and its start time).
// The live system at scale (bench/bench_cluster.h): a real `tessera server` child process (the
// `tessera` beside this executable) driven by hollow nodes and REST clients. Progress goes to stderr,
// the table to stdout, `--json FILE` (or -) writes the record. Outside churn, a NotReady node or a
// job lost or restarted makes it exit 1 (after the report).
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench/bench_cluster.h"

namespace {

using namespace tessera;

void add_cluster_options(CLI::App* cmd) {
  auto o = std::make_shared<bench::BenchClusterOptions>();
  // The server is the tessera binary installed beside this one.
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) o->server_binary = (self.parent_path() / "tessera").string();
  auto json_path = std::make_shared<std::string>();
  cmd->add_option("--nodes", o->nodes, "Hollow nodes")->capture_default_str();
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node")->capture_default_str();
  cmd->add_option("--gpu-model", o->gpu_model, "GPU model of every node (catalog name)")->capture_default_str();
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, "Heartbeat interval the server tells agents")->capture_default_str();
  cmd->add_option("--agent-timeout-ms", o->agent_timeout_ms, "NotReady after this much silence (0: 3 heartbeats)")->capture_default_str();
  cmd->add_option("--task-lease-ms", o->task_lease_ms, "The server's --task-lease-ms (0: its default)")->capture_default_str();
  cmd->add_option("--workload", o->workload, "storm, trace or churn")->capture_default_str();
  cmd->add_option("--clients", o->clients, "REST clients submitting (keep-alive connections)")->capture_default_str();
  cmd->add_option("--jobs", o->jobs, "storm/churn: jobs to submit (0: until --duration)")->capture_default_str();
  cmd->add_option("--duration", o->duration_s,
                  "Seconds: storm stops submitting after it; trace: compressed trace seconds to replay; churn: how long")
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "Submissions per second in all (0: as fast as acknowledged)")->capture_default_str();
  cmd->add_option("--job-gpus", o->job_gpus, "storm/churn: GPUs per job")->capture_default_str();
  cmd->add_option("--job-seconds", o->job_seconds, "storm/churn: each job runs `sleep S`")->capture_default_str();
  cmd->add_option("--trace", o->trace_dir, "trace: the Philly trace directory (Gavel's)")->capture_default_str();
  cmd->add_option("--time-scale", o->time_scale, "trace: arrivals and run times divided by this")->capture_default_str();
  cmd->add_option("--trace-from", o->trace_from_s, "trace: start the window this many trace seconds after its first arrival")
      ->capture_default_str();
  cmd->add_option("--max-job-seconds", o->max_job_seconds, "trace: cut compressed run times longer than this (0: no cap)")
      ->capture_default_str();
  cmd->add_option("--preset", o->preset, "Scheduler preset the server runs (tessera, fifo-gang, slurm, tiresias, drf; default: its own)");
  cmd->add_flag("--compare-sim", o->compare_sim,
                "After the run, the same jobs through the simulator: live vs sim mean JCT, p99 wait, makespan, start order");
  cmd->add_option("--sim-cycle-interval-ms", o->sim_model.cycle_interval_ms, "compare-sim: a cycle at least this often (the controller's)")
      ->capture_default_str();
  cmd->add_option("--sim-min-cycle-gap-ms", o->sim_model.min_cycle_gap_ms, "compare-sim: event-driven cycles at least this far apart")
      ->capture_default_str();
  cmd->add_option("--sim-submit-latency-ms", o->sim_model.submit_latency_ms,
                  "compare-sim: a job reaches the scheduler this long after it is sent (-1: the live run's measured mean)")
      ->capture_default_str();
  cmd->add_option("--sim-start-latency-ms", o->sim_model.start_latency_ms,
                  "compare-sim: GPUs held before work begins (-1: the live run's measured mean)")
      ->capture_default_str();
  cmd->add_option("--sim-finish-latency-ms", o->sim_model.finish_latency_ms,
                  "compare-sim: GPUs held after work ends (-1: the live run's measured mean)")
      ->capture_default_str();
  auto tolerance = std::make_shared<double>(0);
  cmd->add_option("--compare-tolerance", *tolerance,
                  "compare-sim: exit 1 when mean JCT, p99 wait or makespan differ by more than this fraction (0: report only)")
      ->capture_default_str();
  cmd->add_option("--churn-every", o->churn_every_s, "churn: a node silenced, one drained, a job cancelled this often (s)")
      ->capture_default_str();
  cmd->add_option("--drain", o->drain_s, "After submitting, wait at most this many seconds for every job to end")->capture_default_str();
  cmd->add_flag("--watch", o->watch, "Hollow nodes hold a watch (long poll) open, when the server answers it");
  cmd->add_option("--loops", o->loops, "Hollow-node event-loop threads")->capture_default_str();
  cmd->add_option("--priority", o->priority,
                  "Run the hollow nodes and clients this many nice levels above the server (0..19; needs root): "
                  "they stand for machines of their own")
      ->capture_default_str();
  cmd->add_option("--store", o->store,
                  "The controller's store: empty for SQLite in the work directory, or postgres://... (an empty database)");
  cmd->add_option("--server-arg", o->server_args, "A flag for `tessera server`, passed as it is (repeat; e.g. --server-arg=--threads=128)")
      ->allow_extra_args(false);
  cmd->add_option("--server-binary", o->server_binary, "The tessera binary to run as the server")->capture_default_str();
  cmd->add_option("--work-dir", o->work_dir, "Keep the server's data and log here (default: a temporary directory, removed)");
  cmd->add_option("--seed", o->seed, "Random seed (heartbeat phases, churn)")->capture_default_str();
  cmd->add_option("--json", *json_path, "Write the record as JSON to FILE, or - for stdout");
  cmd->callback([o, json_path, tolerance] {
    if (!(*tolerance >= 0) || *tolerance > 100) {
      std::cerr << "tessera bench cluster: --compare-tolerance: must be 0 (report only)..100 (a fraction: 0.05 = 5%)\n";
      throw CLI::RuntimeError(2);
    }
    if (*tolerance > 0 && !o->compare_sim) {
      std::cerr << "tessera bench cluster: --compare-tolerance needs --compare-sim\n";
      throw CLI::RuntimeError(2);
    }
    auto r = bench::run_bench_cluster(*o, [](const std::string& s) { std::fprintf(stderr, "  bench cluster: %s\n", s.c_str()); });
    if (!r.ok()) {
      std::cerr << "tessera bench cluster: " << r.error().message << "\n";
      throw CLI::RuntimeError(2);
    }
    const nlohmann::json j = r->to_json();
    if (*json_path == "-") {
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << bench::bench_cluster_table(*r);
      if (!json_path->empty()) {
        std::ofstream f(*json_path);
        f << j.dump(2) << "\n";
        if (!f) {
          std::cerr << "tessera bench cluster: --json: cannot write " << *json_path << "\n";
          throw CLI::RuntimeError(2);
        }
      }
    }
    if (o->compare_sim && !r->compared) {
      std::cerr << "tessera bench cluster: --compare-sim failed: " << r->compare_error << "\n";
      throw CLI::RuntimeError(2);
    }
    if (*tolerance > 0 && r->compare.worst_diff() > *tolerance) {
      std::cerr << "tessera bench cluster: FAILED: live and simulator differ by " << 100 * r->compare.worst_diff()
                << "% (more than --compare-tolerance " << 100 * *tolerance << "%)\n";
      throw CLI::RuntimeError(1);
    }
    // Outside churn nothing may be lost or restarted and no node may go NotReady: exit 1 when it did.
    if (o->workload != "churn" && (r->jobs_lost > 0 || r->jobs_restarted > 0 || r->nodes_not_ready > 0)) {
      std::cerr << "tessera bench cluster: FAILED: " << r->nodes_not_ready << " nodes went NotReady, " << r->jobs_lost
                << " jobs lost, " << r->jobs_restarted << " restarted (all must be 0 outside --workload churn)\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"tessera bench cluster: the real controller driven by hollow nodes (agent protocol over HTTP, fake GPUs) "
               "and REST clients: submits/s, submit->start, heartbeats, CPU, RSS"};
  app.name("tessera bench cluster");
  add_cluster_options(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
