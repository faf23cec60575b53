// tessera bench place: placement speed at scale (see sim/bench_place.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "sim/bench_cycle.h"
#include "sim/bench_place.h"

namespace tessera::cli {

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  register_bench_cluster(*bench);  // tessera bench cluster: hollow nodes against a real server (cmd_bench_cluster.cc)
  auto* place = bench->add_subcommand("place", "Placement speed on a large synthetic cluster under a mixed request stream");
  auto o = std::make_shared<sim::BenchPlaceOptions>();
  auto json_path = std::make_shared<std::string>();
  place->add_option("--nodes", o->nodes, "Nodes in the synthetic cluster")->capture_default_str();
  place->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node (1..16)")->capture_default_str();
  place->add_option("--requests", o->requests, "Requests in the stream")->capture_default_str();
  place->add_flag("--profile", o->profile,
                  "prepare the policy with the stream's shapes and the cluster's node kinds (as sim alloc does), so "
                  "fragmentation is scored");
  place->add_option("--score-nodes", o->score_nodes,
                    "Fitting nodes scored per single-task request, tightest first (0 = all)")
      ->capture_default_str();
  place->add_option("--policy", o->policy, "Scoring policy")->capture_default_str();
  place->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  place->add_option("--json", *json_path, "Write results as JSON to PATH, or - for stdout");
  place->callback([o, json_path] {
    auto progress = [](int64_t done, int64_t total) {
      std::fprintf(stderr, "\r  bench place: %lld/%lld requests", (long long)done, (long long)total);
      if (done == total) std::fprintf(stderr, "\n");
    };
    auto r = sim::run_bench_place(*o, progress);
    if (!r.ok()) {
      std::cerr << "tessera bench place: " << r.error().message << "\n";
      throw CLI::RuntimeError(2);
    }
    nlohmann::json j;
    j["nodes"] = r->nodes;
    j["gpus"] = r->gpus;
    j["policy"] = o->policy;
    j["score_nodes"] = o->score_nodes;
    j["requests"] = o->requests;
    j["seconds_in_engine"] = r->seconds;
    j["placements_per_s"] = r->placements_per_s;
    j["final_gpu_allocated_pct"] = r->final_gpu_allocated_pct;
    for (auto& [kind, s] : r->by_kind) {
      j[kind + "_count"] = s.count;
      j[kind + "_placed"] = s.placed;
      j[kind + "_p50_us"] = s.p50_us;
      j[kind + "_p99_us"] = s.p99_us;
      j[kind + "_max_us"] = s.max_us;
    }
    if (*json_path == "-") {
      std::cout << j.dump(2) << "\n";
      return;
    }
    if (!json_path->empty()) {
      std::ofstream f(*json_path);
      if (!f) {
        std::cerr << "tessera bench place: --json: cannot write " << *json_path << "\n";
        throw CLI::RuntimeError(2);
      }
      f << j.dump(2) << "\n";
    }
    std::printf("bench place: %d nodes, %lld GPUs, policy %s, score-nodes %d, %d requests\n", r->nodes,
                (long long)r->gpus, o->policy.c_str(), o->score_nodes, o->requests);
    std::printf("  single-task placements/s: %.0f   GPUs allocated at end: %.1f%%\n", r->placements_per_s,
                r->final_gpu_allocated_pct);
    std::printf("  %-8s %8s %8s %10s %10s %10s\n", "kind", "count", "placed", "p50 us", "p99 us", "max us");
    for (auto& [kind, s] : r->by_kind)
      std::printf("  %-8s %8lld %8lld %10.1f %10.1f %10.1f\n", kind.c_str(), (long long)s.count, (long long)s.placed,
                  s.p50_us, s.p99_us, s.max_us);
  });

  auto* cycle = bench->add_subcommand("cycle", "One full scheduling cycle at scale (fair share, gangs, topology, preemption)");
  auto co = std::make_shared<sim::BenchCycleOptions>();
  auto cjson = std::make_shared<std::string>();
  cycle->add_option("--nodes", co->nodes, "Nodes")->capture_default_str();
  cycle->add_option("--gpus-per-node", co->gpus_per_node, "GPUs per node (1..16)")->capture_default_str();
  cycle->add_option("--pending", co->pending, "Pending jobs")->capture_default_str();
  cycle->add_option("--queues", co->queues, "Leaf queues")->capture_default_str();
  cycle->add_option("--cycles", co->cycles, "Cycles to time")->capture_default_str();
  cycle->add_option("--score-nodes", co->score_nodes, "Fitting nodes scored per task (0 = all)")->capture_default_str();
  cycle->add_option("--json", *cjson, "Write results as JSON to PATH, or - for stdout");
  cycle->callback([co, cjson] {
    auto r = sim::run_bench_cycle(*co, [](int done, int total) {
      std::fprintf(stderr, "\r  bench cycle: %d/%d cycles", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    });
    if (!r.ok()) {
      std::cerr << "tessera bench cycle: " << r.error().message << "\n";
      throw CLI::RuntimeError(2);
    }
    nlohmann::json j{{"nodes", co->nodes},
                     {"gpus", int64_t(co->nodes) * co->gpus_per_node},
                     {"pending", co->pending},
                     {"queues", co->queues},
                     {"cycles", co->cycles},
                     {"running_before", r->running_before},
                     {"cycle_ms_p50", r->cycle_ms_p50},
                     {"cycle_ms_p99", r->cycle_ms_p99},
                     {"cycle_ms_max", r->cycle_ms_max},
                     {"decisions_per_s", r->decisions_per_s},
                     {"starts", r->starts},
                     {"preemptions", r->preemptions},
                     {"reserved", r->reserved},
                     {"backfill_held", r->backfill_held},
                     {"pending_after", r->pending},
                     {"small_ms_p50", r->small_ms_p50},
                     {"small_ms_p99", r->small_ms_p99},
                     {"small_ms_max", r->small_ms_max},
                     {"small_starts", r->small_starts},
                     {"small_preemptions", r->small_preemptions},
                     {"small_pending_after", r->small_pending},
                     {"cycle_cpu_ms_p50", r->cycle_cpu_ms_p50},
                     {"small_cpu_ms_p50", r->small_cpu_ms_p50}};
    if (*cjson == "-") {
      std::cout << j.dump(2) << "\n";
      return;
    }
    if (!cjson->empty()) std::ofstream(*cjson) << j.dump(2) << "\n";
    std::printf("bench cycle: %d nodes, %d pending, %d queues, %lld running before\n", co->nodes, co->pending,
                co->queues, (long long)r->running_before);
    std::printf("  full cycle p50 %.1f ms, p99 %.1f ms, max %.1f ms; %.0f decisions/s\n", r->cycle_ms_p50, r->cycle_ms_p99,
                r->cycle_ms_max, r->decisions_per_s);
    std::printf("  after a small change (%d arrivals, %d ends): p50 %.1f ms, p99 %.1f ms, max %.1f ms; %lld starts, "
                "%lld preemptions, %lld pending after\n", co->small_arrivals, co->small_finishes, r->small_ms_p50,
                r->small_ms_p99, r->small_ms_max, (long long)r->small_starts, (long long)r->small_preemptions,
                (long long)r->small_pending);
    std::printf("  CPU time per cycle (p50): full %.1f ms, after a small change %.1f ms\n", r->cycle_cpu_ms_p50,
                r->small_cpu_ms_p50);
    std::printf("  first cycle: %lld starts, %lld preemptions, %lld pending (%lld holding a reservation, %lld held back "
                "by it)\n",
                (long long)r->starts, (long long)r->preemptions, (long long)r->pending, (long long)r->reserved,
                (long long)r->backfill_held);
  });
}

}  // namespace tessera::cli
