// `tessera sim alloc`: the FGD allocation experiment (see sim/alloc_experiment.h) for one or more
// policies over a range of seeds, on an openb trace or the built-in synthetic workload.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/placement/policy.h"
#include "sim/alloc_bound.h"
#include "sim/alloc_experiment.h"
#include "sim/repack.h"
#include "config/gpu_models.h"

namespace tessera::cli {
namespace {

struct AllocArgs {
  std::string nodes, policy, seeds = "42-51", json, expected, gpu_models, synthetic;
  std::vector<std::string> pods;  // one or more pod lists, run one after the other
  std::string inflate = "1.3";
  bool bound = false;  // also the LP upper bound (sim/alloc_bound.h) and each policy's gap to it
  bool repack = false;  // also each run's packing ceiling (sim/repack.h)
  bool leftover = false;  // also where each run's free GPU capacity is at the end (sim/leftover.h)
};

[[noreturn]] void fail(const std::string& msg, int code) {
  std::cerr << "tessera sim alloc: " << msg << "\n";
  throw CLI::RuntimeError(code);
}

bool parse_u64(const std::string& s, uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) return false;
  out = std::stoull(s);
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  return out;
}

std::vector<uint64_t> parse_seeds(const std::string& s) {
  const std::string err = "--seeds: expected A-B or a comma list of integers, got \"" + s + "\"";
  std::vector<uint64_t> out;
  if (const size_t dash = s.find('-'); dash != std::string::npos) {
    uint64_t a, b;
    if (!parse_u64(s.substr(0, dash), a) || !parse_u64(s.substr(dash + 1), b) || a > b) fail(err, 2);
    if (b - a >= 10000) fail("--seeds: at most 10000 seeds, got \"" + s + "\"", 2);
    for (uint64_t x = a; x <= b; ++x) out.push_back(x);
    return out;
  }
  for (const std::string& item : split(s, ',')) {
    uint64_t x;
    if (!parse_u64(item, x)) fail(err, 2);
    out.push_back(x);
  }
  if (out.empty()) fail(err, 2);
  return out;
}

std::vector<std::string> parse_policies(const std::string& s) {
  if (s == "all") return policy_names();
  std::vector<std::string> out;
  for (const std::string& p : split(s, ',')) {
    if (auto r = make_policy(p); !r) fail("--policy: " + r.error().message, 2);
    out.push_back(p);
  }
  if (out.empty()) fail("--policy: expected a policy name, a comma list or \"all\"", 2);
  return out;
}

std::string stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  return base.substr(0, base.rfind('.'));
}

std::string fmt(double x, const char* f = "%7.2f") {
  char buf[32];
  if (std::isnan(x)) return "     --";
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

constexpr int kPcts[] = {80, 100, 120, 130};  // the arrived % the tables show
constexpr size_t kLevels = std::size(kPcts);

nlohmann::ordered_json num(double v) { return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v); }

// The bound per seed (as `seeds`) and its seed mean at each of kPcts.
struct Bounds {
  std::vector<sim::BoundCurve> seeds;
  std::vector<double> mean = std::vector<double>(kLevels, std::nan(""));
  double wall_s = 0;
};

Bounds solve_bounds(const sim::AllocWorkload& w, const std::vector<uint64_t>& seeds, double inflate) {
  Bounds b;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = sim::alloc_bound_curves(w, seeds, inflate, std::vector<int>(std::begin(kPcts), std::end(kPcts)));
  if (!r) fail("--bound: " + r.error().message, 1);
  b.seeds = std::move(*r);
  b.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t k = 0; k < kLevels; ++k) {
    double sum = 0;
    int n = 0;
    for (const sim::BoundCurve& c : b.seeds)
      if (!std::isnan(c.at[k])) sum += c.at[k], ++n;
    if (n) b.mean[k] = sum / n;
  }
  return b;
}

// Milli-GPU as % of a cluster of `total_gpus` GPUs.
double pct_of(int64_t milli, int64_t total_gpus) { return double(milli) / (double(total_gpus) * 10.0); }

// Mean, min and max of the values that are not NaN; n counts them (all NaN: n = 0, the rest NaN).
struct Spread {
  double mean = std::nan(""), lo = std::nan(""), hi = std::nan("");
  size_t n = 0;
};
Spread spread_of(const std::vector<double>& values) {
  Spread s;
  double sum = 0;
  for (double v : values) {
    if (std::isnan(v)) continue;
    s.lo = s.n ? std::min(s.lo, v) : v, s.hi = s.n ? std::max(s.hi, v) : v;
    sum += v, ++s.n;
  }
  if (s.n) s.mean = sum / double(s.n);
  return s;
}

// Per seed at the highest demand: each policy's distribution, its losses to the best other policy
// on the same seed, and (with a bound) its gap to the bound.
void print_per_seed(const std::vector<sim::AllocSummary>& res, size_t seeds, const Bounds* bounds, std::ostream& out) {
  const size_t top = kLevels - 1;
  const size_t tp = size_t(kPcts[top]);
  char line[256];
  std::snprintf(line, sizeof line, "per seed at %zu%%: %-15s %7s %7s %7s %7s %s\n", tp, "policy", "mean", "min", "max",
                "losses", bounds ? "  gap to bound (mean, min, max)" : "");
  out << line;
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& s = res[i];
    int losses = 0;  // seeds where another policy beats it by more than 0.1 pp
    std::vector<double> values, gaps;
    for (size_t k = 0; k < seeds; ++k) {
      const double v = s.seed_curves[k][tp];
      if (std::isnan(v)) continue;
      values.push_back(v);
      double best_other = -INFINITY;
      for (size_t j = 0; j < res.size(); ++j)
        if (j != i && !std::isnan(res[j].seed_curves[k][tp])) best_other = std::max(best_other, res[j].seed_curves[k][tp]);
      losses += best_other > v + 0.1 + 1e-9 ? 1 : 0;
      if (bounds) gaps.push_back(bounds->seeds[k].at[top] - v);
    }
    const Spread sv = spread_of(values);
    std::snprintf(line, sizeof line, "              %-15s %s %s %s %4d/%-2zu", s.policy.c_str(), fmt(s.mean_curve[tp]).c_str(),
                  fmt(sv.lo).c_str(), fmt(sv.hi).c_str(), losses, seeds);
    out << line;
    if (const Spread g = spread_of(gaps); g.n) out << "  " << fmt(g.mean) << fmt(g.lo) << fmt(g.hi);
    out << "\n";
  }
  out << "losses: seeds where another policy allocates more than 0.1 pp more\n";
}

// Per policy and seed (as res): the allocation after the last arrival and the run's packing ceiling
// (sim/repack.h), in % of GPU capacity rounded to 2 decimals; NaN where a run placed MIG tasks.
struct Repack {
  std::vector<std::vector<double>> final_pct, ceiling_pct;
};

Repack solve_repack(const std::vector<sim::AllocSummary>& res, int64_t total_gpus) {
  if (!sim::lp_available()) fail("--repack: no LP solver: " + sim::lp_solver_name(), 1);
  Repack r;
  for (const auto& s : res) {
    r.final_pct.emplace_back();
    r.ceiling_pct.emplace_back();
    for (size_t k = 0; k < s.seed_shares.size(); ++k) {
      r.final_pct.back().push_back(sim::round2(pct_of(s.seed_final_milli[k], total_gpus)));
      auto c = sim::repack_ceiling_milli(s.seed_shares[k], s.seed_final_milli[k], total_gpus);
      if (!c && c.error().code != ErrorCode::kInvalidArgument) fail("--repack: " + c.error().message, 1);
      r.ceiling_pct.back().push_back(c ? sim::round2(pct_of(*c, total_gpus)) : std::nan(""));
    }
  }
  return r;
}

void print_repack(const std::vector<sim::AllocSummary>& res, const Repack& r, std::ostream& out) {
  out << "repack: each run's GPU shares packed on the fewest GPUs that hold them (configuration LP, GPU milli only),\n"
         "the GPUs so freed given to whole-GPU requests that failed: what better packing alone could reach on\n"
         "that run (not a bound on other policies, which place other pods); seed means, after the last arrival\n";
  char line[256];
  std::snprintf(line, sizeof line, "repack        %-15s %7s %7s %7s %7s %s\n", "policy", "final", "ceiling", "min", "max",
                "packing loss");
  out << line;
  for (size_t i = 0; i < res.size(); ++i) {
    std::vector<double> fin, ceil;  // runs the ceiling models
    for (size_t k = 0; k < r.ceiling_pct[i].size(); ++k)
      if (!std::isnan(r.ceiling_pct[i][k])) fin.push_back(r.final_pct[i][k]), ceil.push_back(r.ceiling_pct[i][k]);
    const Spread f = spread_of(fin), c = spread_of(ceil);
    if (c.n == 0) {
      std::snprintf(line, sizeof line, "              %-15s (MIG tasks placed: not modelled)\n", res[i].policy.c_str());
      out << line;
      continue;
    }
    std::snprintf(line, sizeof line, "              %-15s %s %s %s %s %s\n", res[i].policy.c_str(), fmt(f.mean).c_str(),
                  fmt(c.mean).c_str(), fmt(c.lo).c_str(), fmt(c.hi).c_str(), fmt(c.mean - f.mean).c_str());
    out << line;
  }
}

// Where the free GPU capacity is after the last arrival, seed means in % of the cluster's GPUs.
void print_leftover(const std::vector<sim::AllocSummary>& res, int64_t total_gpus, std::ostream& out) {
  out << "leftover: free GPU capacity after the last arrival, % of the cluster's GPUs, seed means: on nodes where a\n"
         "pod that failed would fit but for CPU or memory (cpu/mem), else by each GPU's free milli\n";
  char line[256];
  std::snprintf(line, sizeof line, "leftover      %-15s %7s %7s", "policy", "free", "cpu/mem");
  out << line;
  for (const char* b : sim::Leftover::kBandName) {
    std::snprintf(line, sizeof line, " %7s", b);
    out << line;
  }
  out << "\n";
  for (const auto& s : res) {
    std::vector<double> free, cpu_memory;
    std::vector<std::vector<double>> band(sim::Leftover::kBandMax.size());
    for (const sim::Leftover& l : s.seed_leftover) {
      free.push_back(pct_of(l.total(), total_gpus)), cpu_memory.push_back(pct_of(l.cpu_memory, total_gpus));
      for (size_t b = 0; b < band.size(); ++b) band[b].push_back(pct_of(l.by_band[b], total_gpus));
    }
    std::snprintf(line, sizeof line, "              %-15s %s %s", s.policy.c_str(), fmt(spread_of(free).mean).c_str(),
                  fmt(spread_of(cpu_memory).mean).c_str());
    out << line;
    for (const auto& v : band) out << " " << fmt(spread_of(v).mean);
    out << "\n";
  }
}

// The JSON entries: one per policy (mean curve and per-seed values), then the bound's.
void append_json(const sim::AllocWorkload& w, const std::vector<sim::AllocSummary>& res, const std::vector<uint64_t>& seeds,
                 const Bounds* bounds, const Repack* repack, bool leftover, nlohmann::ordered_json& json) {
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& s = res[i];
    nlohmann::ordered_json curve = nlohmann::ordered_json::array();
    for (int p = 0; p <= 130; ++p) curve.push_back({{"arrived_pct", p}, {"allocated_pct", num(std::round(s.mean_curve[p] * 100) / 100)}});
    nlohmann::ordered_json per_seed = nlohmann::ordered_json::array();
    for (size_t k = 0; k < s.seed_curves.size(); ++k) {
      nlohmann::ordered_json at = nlohmann::ordered_json::object();
      for (int p : kPcts) at[std::to_string(p)] = num(s.seed_curves[k][size_t(p)]);
      per_seed.push_back({{"seed", s.seeds[k]}, {"allocated_pct", at}});
      if (leftover) {
        const sim::Leftover& l = s.seed_leftover[k];
        const int64_t gpus = w.cluster.total_gpus();
        nlohmann::ordered_json lo = {{"free", num(sim::round2(pct_of(l.total(), gpus)))},
                                     {"cpu_memory", num(sim::round2(pct_of(l.cpu_memory, gpus)))}};
        for (size_t b = 0; b < l.by_band.size(); ++b)
          lo[sim::Leftover::kBandName[b]] = num(sim::round2(pct_of(l.by_band[b], gpus)));
        per_seed.back()["leftover_pct"] = lo;
      }
      if (repack) {
        per_seed.back()["final_pct"] = num(repack->final_pct[i][k]);
        per_seed.back()["repack_ceiling_pct"] = num(repack->ceiling_pct[i][k]);
      }
    }
    json.push_back({{"policy", s.policy}, {"workload", w.name}, {"seeds", s.seeds}, {"curve", curve},
                    {"per_seed", per_seed}, {"elapsed_s", s.elapsed_s}});
  }
  if (!bounds) return;
  nlohmann::ordered_json per_seed = nlohmann::ordered_json::array();
  double solve_s = 0;
  for (const sim::BoundCurve& c : bounds->seeds) {
    nlohmann::ordered_json at = nlohmann::ordered_json::object();
    for (size_t k = 0; k < kLevels; ++k) at[std::to_string(kPcts[k])] = num(c.at[k]);
    per_seed.push_back({{"seed", c.seed}, {"bound_pct", at}, {"solve_s", c.solve_s}});
    solve_s += c.solve_s;
  }
  nlohmann::ordered_json mean = nlohmann::ordered_json::object();
  for (size_t k = 0; k < kLevels; ++k) mean[std::to_string(kPcts[k])] = num(std::round(bounds->mean[k] * 100) / 100);
  json.push_back({{"bound", sim::lp_solver_name()}, {"workload", w.name}, {"seeds", seeds}, {"bound_pct", mean},
                  {"per_seed", per_seed}, {"solve_s", solve_s}});
}

// Runs every policy x seed on one workload, prints the tables and appends the JSON entries.
void run_workload(const AllocArgs& a, const sim::AllocWorkload& w, const std::vector<std::string>& policies,
                  const std::vector<uint64_t>& seeds, double inflate,
                  const std::vector<sim::PublishedCurve>& published, std::ostream& out,
                  nlohmann::ordered_json& json) {
  out << "workload: " << w.name
      << (a.nodes.empty() && a.synthetic.empty() ? " (built-in synthetic openb-like workload; give --nodes/--pods for a trace)" : "")
      << ": " << w.cluster.node_count() << " nodes, " << w.cluster.total_gpus() << " GPUs, " << w.pods.size()
      << " pods; inflate " << inflate << "; seeds " << a.seeds << "\n";

  const bool tty = isatty(fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();
  auto res = sim::run_alloc_matrix(w, policies, seeds, inflate, 0, [&](int done, int total) {
    if (tty) std::fprintf(stderr, "\r[%d/%d runs]%s", done, total, done == total ? "\n" : "");
  });
  if (!res) fail(res.error().message, 1);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  bool any_pub = false;
  std::vector<std::vector<double>> pubs;
  for (const auto& s : *res) {
    pubs.push_back(sim::published_mean(published, w.name, s.policy, seeds));
    any_pub |= !pubs.back().empty();
  }
  if (!a.expected.empty() && !any_pub)
    out << "(--expected: no published curves for workload \"" << w.name << "\" and these policies)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-15s", "policy");
  out << line;
  for (int p : kPcts) {
    std::snprintf(line, sizeof line, any_pub ? "  %4d%% ours    pub   diff" : " %6d%%", p);
    out << line;
  }
  out << "   run-s\n";  // run-s: this policy's run times summed over seeds
  for (size_t i = 0; i < res->size(); ++i) {
    const auto& s = (*res)[i];
    std::snprintf(line, sizeof line, "%-15s", s.policy.c_str());
    out << line;
    for (int p : kPcts) {
      out << " " << fmt(s.mean_curve[p]);
      if (any_pub) {
        const bool has = int(pubs[i].size()) > p && !std::isnan(pubs[i][p]);
        out << (has ? fmt(pubs[i][p]) + fmt(s.mean_curve[p] - pubs[i][p], "%+7.2f") : fmt(NAN) + fmt(NAN));
      }
    }
    std::snprintf(line, sizeof line, " %7.1f\n", s.elapsed_s);
    out << line;
  }
  std::snprintf(line, sizeof line, "%zu runs in %.1f s wall (%u threads); allocation %% of GPU capacity at arrived %% of capacity\n",
                res->size() * seeds.size(), wall, std::max(1u, std::thread::hardware_concurrency()));
  out << line;

  std::optional<Bounds> bounds;
  if (a.bound) {
    bounds = solve_bounds(w, seeds, inflate);
    std::snprintf(line, sizeof line, "%-15s", "bound (LP)");
    out << line;
    for (size_t k = 0; k < kLevels; ++k) out << " " << fmt(bounds->mean[k]) << (any_pub ? "               " : "");
    std::snprintf(line, sizeof line, " %7.1f\n", bounds->wall_s);
    out << line;
    out << "bound: an upper bound on what any placement of the same arrivals allocates (" << sim::lp_solver_name()
        << "; seed mean; run-s: solver wall time); the best policy's result is a placement that exists, so\n"
           "the optimum lies between it and the bound\n";
  }
  if (seeds.size() > 1 || bounds) print_per_seed(*res, seeds.size(), bounds ? &*bounds : nullptr, out);
  std::optional<Repack> repack;
  if (a.repack) {
    repack = solve_repack(*res, w.cluster.total_gpus());
    print_repack(*res, *repack, out);
  }
  if (a.leftover) print_leftover(*res, w.cluster.total_gpus(), out);
  append_json(w, *res, seeds, bounds ? &*bounds : nullptr, repack ? &*repack : nullptr, a.leftover, json);
}

void run_alloc_command(const AllocArgs& a) {
  if (a.policy.empty()) fail("--policy: required: a policy name, a comma list or \"all\"", 2);
  if (a.nodes.empty() != a.pods.empty())
    fail(a.nodes.empty() ? "--nodes: required with --pods" : "--pods: required with --nodes", 2);
  const std::vector<std::string> policies = parse_policies(a.policy);
  const std::vector<uint64_t> seeds = parse_seeds(a.seeds);
  char* end = nullptr;
  const double inflate = std::strtod(a.inflate.c_str(), &end);
  if (a.inflate.empty() || *end || !(inflate > 0 && inflate <= 10))
    fail("--inflate: expected a number in (0, 10], got \"" + a.inflate + "\"", 2);
  std::vector<sim::PublishedCurve> published;
  if (!a.expected.empty()) {
    auto r = sim::load_published_curves(a.expected);
    if (!r) fail("--expected: " + r.error().message, 1);
    published = std::move(*r);
  }
  std::ofstream json_file;
  if (!a.json.empty() && a.json != "-") {
    json_file.open(a.json);
    if (!json_file) fail("--json: cannot write " + a.json, 1);
  }

  // With --json -, stdout carries only JSON; the table goes to stderr.
  std::ostream& out = a.json == "-" ? std::cerr : std::cout;
  nlohmann::ordered_json json = nlohmann::ordered_json::array();
  if (!a.synthetic.empty()) {
    if (!a.nodes.empty()) fail("--synthetic: give either --synthetic or --nodes/--pods", 2);
    std::vector<sim::SyntheticMix> mixes;
    for (const std::string& m : a.synthetic == "all" ? sim::synthetic_mix_names() : split(a.synthetic, ',')) {
      auto mix = sim::parse_synthetic_mix(m);
      if (!mix) fail("--synthetic: " + mix.error().message, 2);
      mixes.push_back(*mix);
    }
    for (size_t i = 0; i < mixes.size(); ++i) {
      if (i > 0) out << "\n";
      run_workload(a, sim::synthetic_workload(1, 1200, mixes[i]), policies, seeds, inflate, published, out, json);
    }
  } else if (a.nodes.empty()) {
    run_workload(a, sim::synthetic_workload(), policies, seeds, inflate, published, out, json);
  } else {
    std::shared_ptr<const GpuCatalog> catalog(&GpuCatalog::builtin(), [](const GpuCatalog*) {});
    if (!a.gpu_models.empty()) {
      auto c = config::load_catalog_with(a.gpu_models);
      if (!c) fail("--gpu-models: " + c.error().message, 1);
      catalog = *c;
    }
    auto nodes = sim::load_openb_nodes(a.nodes, *catalog);
    if (!nodes) fail("--nodes: " + nodes.error().message, 1);
    for (size_t i = 0; i < a.pods.size(); ++i) {
      auto pods = sim::load_openb_pods(a.pods[i], *catalog);
      if (!pods) fail("--pods: " + pods.error().message, 1);
      if (i > 0) out << "\n";
      run_workload(a, sim::AllocWorkload{stem(a.pods[i]), *nodes, std::move(*pods)}, policies, seeds, inflate,
                   published, out, json);
    }
  }
  if (a.json == "-") std::cout << json.dump(2) << "\n";
  else if (json_file.is_open()) json_file << json.dump(2) << "\n";
}

}  // namespace

void register_sim(CLI::App& app) {
  CLI::App* sim = app.add_subcommand("sim", "Simulations and experiments");
  sim->require_subcommand(1);
  auto args = std::make_shared<AllocArgs>();
  CLI::App* alloc = sim->add_subcommand("alloc", "FGD allocation experiment: allocated GPU % as demand arrives");
  alloc->add_option("--nodes", args->nodes, "openb node list CSV (sn,cpu_milli,memory_mib,gpu,model)");
  alloc->add_option("--pods", args->pods,
                    "openb pod list CSV(s) (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]); several run in turn");
  alloc->add_option("--policy", args->policy, "policy name, comma list, or 'all' (required)");
  alloc->add_option("--seeds", args->seeds, "seeds: A-B or a comma list (default 42-51)");
  alloc->add_option("--inflate", args->inflate, "arrived demand as a multiple of GPU capacity (default 1.3)");
  alloc->add_option("--json", args->json, "write the seed-mean curves as JSON to PATH ('-' = stdout)");
  alloc->add_option("--gpu-models", args->gpu_models,
                    "JSON file declaring GPU models the built-in catalog lacks (see src/config/gpu_models.h)");
  alloc->add_option("--expected", args->expected, "fgd_expected_allocation.csv: show the published seed means");
  alloc->add_option("--synthetic", args->synthetic,
                    "built-in synthetic mixes instead of a trace: a comma list of openb, cpu-heavy, memory-heavy, "
                    "share-heavy, multi-gpu, model-constrained, or 'all'");
  alloc->add_flag("--bound", args->bound,
                  "also an upper bound on what any placement could allocate (LP, GLPK) and each policy's gap to it");
  alloc->add_flag("--repack", args->repack,
                  "also each run's packing ceiling: its GPU shares packed on the fewest GPUs (LP, GLPK), the GPUs "
                  "freed given to failed whole-GPU requests");
  alloc->add_flag("--leftover", args->leftover,
                  "also where the free GPU capacity is after the last arrival: on nodes whose CPU or memory kept a "
                  "failed pod out, else by each GPU's free milli");
  alloc->allow_extras();  // reported below with exit code 2, like every bad argument
  alloc->callback([args, alloc] {
    if (!alloc->remaining().empty()) fail("unknown argument \"" + alloc->remaining().front() + "\"; see --help", 2);
    run_alloc_command(*args);
  });
  register_scenario(*sim);
  register_sim_run(*sim);
}

}  // namespace tessera::cli
