// tessera bench place: placement speed at scale (see sim/bench_place.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "sim/bench_place.h"

namespace tessera::cli {

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto* place = bench->add_subcommand("place", "Placement speed on a large synthetic cluster under a mixed request stream");
  auto o = std::make_shared<sim::BenchPlaceOptions>();
  auto json_path = std::make_shared<std::string>();
  place->add_option("--nodes", o->nodes, "Nodes in the synthetic cluster")->capture_default_str();
  place->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node (1..16)")->capture_default_str();
  place->add_option("--requests", o->requests, "Requests in the stream")->capture_default_str();
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
}

}  // namespace tessera::cli
