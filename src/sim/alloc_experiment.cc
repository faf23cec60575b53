#include "sim/alloc_experiment.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "core/placement/engine.h"

namespace tessera::sim {

int64_t round_half_even(double x) { return int64_t(std::nearbyint(x)); }

double round2(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", x);  // glibc rounds the exact binary value, ties to even
  return std::strtod(buf, nullptr);
}

int64_t pod_demand_milli(const TaskRequest& t) { return t.cpu_only() ? 0 : t.gpu_demand_milli(); }
int64_t pod_milli_per_gpu(const TaskRequest& t) { return t.cpu_only() ? 0 : t.milli_per_gpu.v; }

std::vector<uint32_t> plan_arrivals(const std::vector<OpenbPod>& sorted, int64_t capacity_milli, double inflate,
                                    Rng& rng) {
  const uint32_t n = uint32_t(sorted.size());
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  rng.shuffle(order);
  if (n == 0) return order;
  int64_t demand = 0;
  for (const OpenbPod& p : sorted) demand += pod_demand_milli(p.task);
  const double target = inflate * double(capacity_milli);
  if (double(demand) > target) {
    // Tune down: drop pods at random positions of the shuffled list.
    while (double(demand) > target && !order.empty()) {
      const size_t at = rng.uniform(order.size());
      demand -= pod_demand_milli(sorted[order[at]].task);
      order.erase(order.begin() + at);
    }
  } else if (double(demand) < target) {
    // Tune up: extra copies drawn with replacement; the stop test adds the per-GPU milli (fact 3).
    while (true) {
      const uint32_t i = uint32_t(rng.uniform(n));
      if (double(demand + pod_milli_per_gpu(sorted[i].task)) > target) break;
      demand += pod_demand_milli(sorted[i].task);
      order.push_back(i);
    }
  }
  return order;
}

std::vector<double> alloc_curve(const std::vector<AllocRow>& rows, int64_t total_gpus, int max_pct) {
  // Per rounded arrived %: sum and count of the allocated % rounded to 2 decimals.
  std::vector<double> sum(max_pct + 2, 0.0);
  std::vector<int64_t> cnt(max_pct + 2, 0);
  const double per_pct = double(total_gpus) * 10.0;
  for (const AllocRow& r : rows) {
    const int64_t p = round_half_even(double(r.arrived_milli) / per_pct);
    if (p < 0 || p > max_pct + 1) continue;
    sum[p] += round2(double(r.allocated_milli) / per_pct);
    ++cnt[p];
  }
  std::vector<double> curve(max_pct + 1, std::nan(""));
  for (int p = 0; p <= max_pct; ++p) {
    double s = sum[p];
    int64_t c = cnt[p];
    if (c == 0)
      for (int q = std::max(0, p - 1); q <= p + 1; ++q) s += sum[q], c += cnt[q];
    if (c > 0) curve[p] = round2(s / double(c));
  }
  return curve;
}

WorkloadProfile workload_profile(const std::vector<OpenbPod>& pods) {
  using Key = std::tuple<int64_t, int64_t, int, int64_t, int64_t, std::string, std::vector<std::string>>;
  std::map<Key, size_t> index;
  WorkloadProfile prof;
  for (const OpenbPod& p : pods) {
    const TaskRequest& t = p.task;
    Key k{t.cpu.v, t.memory.v, t.gpu_count, t.milli_per_gpu.v, t.gpu_memory.v, t.mig_profile, t.gpu_models};
    auto [it, fresh] = index.try_emplace(std::move(k), prof.shapes.size());
    if (fresh) prof.shapes.push_back({t, 0});
    ++prof.shapes[it->second].count;
  }
  return prof;
}

std::vector<OpenbPod> pods_by_name(const std::vector<OpenbPod>& pods) {
  std::vector<OpenbPod> s = pods;
  std::stable_sort(s.begin(), s.end(), [](const OpenbPod& a, const OpenbPod& b) { return a.name < b.name; });
  return s;
}

int64_t PlacedShares::milli() const {
  int64_t sum = 0;
  for (const auto& [m, n] : by_milli) sum += m * std::max<int64_t>(n, 0);
  return sum;
}

bool UnfitPods::covers(const TaskRequest& q) const {
  if (kept_.empty()) return false;
  const TaskRequest rq = rest(q);
  for (const Kept& k : kept_)
    if (at_least(q, k.req) && rq == k.rest) return true;
  return false;
}

void UnfitPods::add(const TaskRequest& p) {
  const TaskRequest rp = rest(p);
  std::erase_if(kept_, [&](const Kept& k) { return at_least(k.req, p) && k.rest == rp; });  // p covers them
  if (kept_.size() < max_) kept_.push_back({p, rp});
}

std::vector<TaskRequest> UnfitPods::requests() const {
  std::vector<TaskRequest> out;
  for (const Kept& k : kept_) out.push_back(k.req);
  return out;
}

TaskRequest UnfitPods::rest(TaskRequest t) {
  t.cpu = MilliCpu(0);
  t.memory = MiB(0);
  t.gpu_count = 0;
  t.milli_per_gpu = MilliGpu(0);
  t.gpu_memory = MiB(0);
  return t;
}

bool UnfitPods::at_least(const TaskRequest& q, const TaskRequest& p) {
  return q.whole_gpus() == p.whole_gpus() && q.cpu.v >= p.cpu.v && q.memory.v >= p.memory.v &&
         q.gpu_count >= p.gpu_count && q.milli_per_gpu.v >= p.milli_per_gpu.v && q.gpu_memory.v >= p.gpu_memory.v;
}

namespace {

Result<AllocRun> run_sorted(const AllocWorkload& w, const std::vector<OpenbPod>& sorted, const WorkloadProfile& prof,
                            const std::string& policy_name, uint64_t seed, double inflate) {
  const auto t0 = std::chrono::steady_clock::now();
  auto policy = make_policy(policy_name);
  if (!policy) return policy.error();
  (*policy)->prepare(prof);
  ClusterState cluster = w.cluster;
  const int64_t capacity = cluster.total_gpus() * 1000;
  Rng rng(seed);
  const std::vector<uint32_t> order = plan_arrivals(sorted, capacity, inflate, rng);
  EngineOptions opt;
  opt.node_rank = rng.permutation(uint32_t(cluster.node_count()));
  opt.seed = rng.next();
  PlacementEngine engine(**policy, std::move(opt));

  AllocRun run;
  run.policy = policy_name;
  run.seed = seed;
  std::vector<AllocRow> rows;
  rows.reserve(order.size());
  Gang g;
  UnfitPods unfit;
  // GPU needs (CPU and memory 0) of the pods that failed, for the leftover: the least demanding
  // 1024; past that, capacity held by CPU or memory could count in a band instead.
  UnfitPods failed_needs(1024);
  int64_t arrived = 0;
  for (uint32_t i : order) {
    g.id = JobId(uint32_t(rows.size()));
    g.task = sorted[i].task;
    arrived += pod_demand_milli(g.task);  // counted before placement, failures too
    // The engine is asked only when some node can take the pod now: a pod nothing fits fails
    // either way, and this skips the engine's why-not analysis.
    bool fits_somewhere = false;
    if (!unfit.covers(g.task)) {
      fits_somewhere = std::any_of(cluster.nodes().begin(), cluster.nodes().end(),
                                   [&](const Node& n) { return check_fit(n, g.task) == Misfit::kFits; });
      if (!fits_somewhere) unfit.add(g.task);
    }
    const bool placed = fits_somewhere && engine.place_and_commit(cluster, g).outcome == Outcome::kPlaced;
    run.placed += placed ? 1 : 0;
    if (!placed && g.task.gpu_count > 0) {
      TaskRequest need = g.task;
      need.cpu = MilliCpu(0), need.memory = MiB(0);
      if (!failed_needs.covers(need)) failed_needs.add(need);
    }
    rows.push_back({arrived, cluster.allocated_gpu_milli()});
    if (g.task.gpu_count > 0 && !g.task.cpu_only()) {  // what the packing ceiling reads
      const int64_t m = pod_milli_per_gpu(g.task);
      if (g.task.mig()) {
        run.shares.mig = run.shares.mig || placed;
      } else if (m >= 1000) {  // holds its GPUs whole
        if (!placed) run.shares.failed_whole_gpus += g.task.gpu_count;
      } else if (placed && m > 0) {
        run.shares.by_milli[m] += g.task.gpu_count;
      }
    }
  }
  run.final_allocated_milli = cluster.allocated_gpu_milli();
  run.leftover = leftover_of(cluster, failed_needs.requests());
  run.arrivals = int64_t(rows.size());
  run.curve = alloc_curve(rows, cluster.total_gpus());
  run.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

}  // namespace

Result<AllocRun> run_alloc(const AllocWorkload& w, const std::string& policy, uint64_t seed, double inflate) {
  WorkloadProfile prof = workload_profile(w.pods);
  prof.nodes = node_kinds(w.cluster);
  return run_sorted(w, pods_by_name(w.pods), prof, policy, seed, inflate);
}

Result<std::vector<AllocSummary>> run_alloc_matrix(const AllocWorkload& w, const std::vector<std::string>& policies,
                                                   const std::vector<uint64_t>& seeds, double inflate, int threads,
                                                   const std::function<void(int, int)>& progress) {
  for (const std::string& p : policies)
    if (auto r = make_policy(p); !r) return r.error();
  const std::vector<OpenbPod> sorted = pods_by_name(w.pods);
  WorkloadProfile prof = workload_profile(w.pods);
  prof.nodes = node_kinds(w.cluster);
  const int total = int(policies.size() * seeds.size());
  std::vector<std::optional<Result<AllocRun>>> results(total);
  std::atomic<int> next{0};
  int done = 0;
  std::mutex mu;
  std::condition_variable cv;
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, std::max(total, 1));
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k)
    pool.emplace_back([&] {
      for (int j; (j = next.fetch_add(1)) < total;) {
        auto r = run_sorted(w, sorted, prof, policies[j / seeds.size()], seeds[j % seeds.size()], inflate);
        std::lock_guard lock(mu);
        results[j] = std::move(r);
        ++done;
        cv.notify_one();
      }
    });
  for (int reported = 0; reported < total;) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done > reported; });
    reported = done;
    lock.unlock();
    if (progress) progress(reported, total);
  }
  for (auto& t : pool) t.join();

  std::vector<AllocSummary> out;
  for (size_t pi = 0; pi < policies.size(); ++pi) {
    AllocSummary s;
    s.policy = policies[pi];
    s.seeds = seeds;
    std::vector<double> sum(131, 0.0);
    std::vector<int> cnt(131, 0);
    for (size_t si = 0; si < seeds.size(); ++si) {
      const Result<AllocRun>& r = *results[pi * seeds.size() + si];
      if (!r) return r.error();
      s.elapsed_s += r->elapsed_s;
      s.seed_curves.push_back(r->curve);
      s.seed_final_milli.push_back(r->final_allocated_milli);
      s.seed_shares.push_back(r->shares);
      s.seed_leftover.push_back(r->leftover);
      for (int p = 0; p <= 130 && p < int(r->curve.size()); ++p)
        if (!std::isnan(r->curve[p])) sum[p] += r->curve[p], ++cnt[p];
    }
    s.mean_curve.assign(131, std::nan(""));
    for (int p = 0; p <= 130; ++p)
      if (cnt[p] > 0) s.mean_curve[p] = sum[p] / cnt[p];
    out.push_back(std::move(s));
  }
  return out;
}

// ---- synthetic openb-like workload ----

namespace {

template <class T>
struct Weighted {
  T value;
  int weight;
};

template <class T, size_t N>
const T& draw(Rng& rng, const Weighted<T> (&table)[N]) {
  int total = 0;
  for (const auto& e : table) total += e.weight;
  int x = int(rng.uniform(uint64_t(total)));
  for (const auto& e : table) {
    if (x < e.weight) return e.value;
    x -= e.weight;
  }
  return table[N - 1].value;
}

struct NodeShape {
  int64_t cpu, mem;
  int gpus;
  const char* model;
};
// The openb GPU-node mix (per mille of nodes).
constexpr Weighted<NodeShape> kNodeShapes[] = {
    {{96000, 393216, 8, "G2"}, 453},      {{104000, 524288, 2, "T4"}, 319},   {{16000, 122880, 2, "P100"}, 88},
    {{128000, 786432, 8, "G3"}, 32},      {{32000, 131072, 4, "V100M16"}, 23}, {{64000, 262144, 2, "P100"}, 18},
    {{96000, 786432, 8, "V100M32"}, 17},  {{8000, 32768, 1, "V100M16"}, 16},   {{96000, 393216, 4, "T4"}, 14},
    {{48000, 376832, 4, "V100M32"}, 7},   {{64000, 262144, 8, "V100M16"}, 6},  {{8000, 61440, 1, "P100"}, 3},
    {{128000, 1048576, 1, "A10"}, 2},     {{8000, 61440, 2, "P100"}, 2},
};
constexpr Weighted<int64_t> kCpuOnlyCpu[] = {{12500, 34}, {32000, 27}, {8000, 17}, {15400, 11}, {16500, 9}, {4000, 2}};
constexpr Weighted<int64_t> kShareCpu[] = {{3152, 36}, {11908, 20}, {4000, 17}, {8000, 16}, {4152, 5}, {6000, 5}, {1000, 1}};
constexpr Weighted<int64_t> kShareMilli[] = {{810, 35}, {470, 24}, {320, 11}, {650, 8}, {230, 5}, {460, 4}, {590, 3},
                                             {160, 3},  {550, 2},  {220, 2},  {370, 2}, {110, 1}, {50, 1}};
constexpr Weighted<int64_t> kOneGpuCpu[] = {{11300, 22}, {11400, 15}, {3152, 12}, {12000, 8}, {18708, 7}, {9810, 5},
                                            {8000, 4},   {4000, 4},   {16000, 8}, {6000, 8},  {24000, 5}, {32000, 2}};
constexpr Weighted<int> kMultiGpus[] = {{2, 20}, {4, 20}, {8, 60}};

}  // namespace

namespace {
constexpr std::pair<SyntheticMix, const char*> kMixNames[] = {
    {SyntheticMix::kOpenb, "openb"},           {SyntheticMix::kCpuHeavy, "cpu-heavy"},
    {SyntheticMix::kMemoryHeavy, "memory-heavy"}, {SyntheticMix::kShareHeavy, "share-heavy"},
    {SyntheticMix::kMultiGpu, "multi-gpu"},    {SyntheticMix::kModelConstrained, "model-constrained"}};
constexpr Weighted<int64_t> kGibPerCore[] = {{4, 50}, {6, 30}, {8, 20}};  // memory-heavy
}  // namespace

const char* synthetic_mix_name(SyntheticMix m) {
  for (auto [k, name] : kMixNames)
    if (k == m) return name;
  return "?";
}

std::vector<std::string> synthetic_mix_names() {
  std::vector<std::string> out;
  for (auto [k, name] : kMixNames) out.push_back(name);
  return out;
}

Result<SyntheticMix> parse_synthetic_mix(const std::string& name) {
  for (auto [k, n] : kMixNames)
    if (name == n) return k;
  std::string known;
  for (const std::string& n : synthetic_mix_names()) known += (known.empty() ? "" : ", ") + n;
  return invalid_argument("unknown synthetic mix '" + name + "' (known: " + known + ")");
}

AllocWorkload synthetic_workload(uint64_t seed, int nodes, SyntheticMix mix) {
  Rng rng(seed);
  AllocWorkload w{mix == SyntheticMix::kOpenb ? "synthetic" : std::string("synthetic-") + synthetic_mix_name(mix),
                  ClusterState(GpuCatalog::builtin()), {}};
  char name[32];
  std::vector<std::pair<std::string, int>> models;  // GPU models and their node counts
  for (int i = 0; i < nodes; ++i) {
    const NodeShape& s = draw(rng, kNodeShapes);
    NodeSpec spec;
    std::snprintf(name, sizeof name, "syn-node-%04d", i);
    spec.name = name;
    spec.cpu = MilliCpu(s.cpu);
    spec.memory = MiB(s.mem);
    spec.gpu_model = s.model;
    spec.gpu_count = s.gpus;
    auto r = w.cluster.add_node(std::move(spec));
    (void)r;  // the table only holds valid shapes
  }
  for (const Node& n : w.cluster.nodes()) {
    const std::string m = n.gpu_model() ? n.gpu_model()->name : "";
    auto it = std::find_if(models.begin(), models.end(), [&](const auto& e) { return e.first == m; });
    if (it == models.end()) models.push_back({m, 1});
    else ++it->second;
  }
  // Pod-class thresholds (percent): CPU-only below `cpu_only`, shares below `share`, one GPU below
  // `one`, multi-GPU above.
  int cpu_only = 13, share = 51, one = 99;
  if (mix == SyntheticMix::kCpuHeavy) cpu_only = 27, share = 59, one = 99;
  if (mix == SyntheticMix::kShareHeavy) cpu_only = 13, share = 88, one = 99;
  if (mix == SyntheticMix::kMultiGpu) cpu_only = 13, share = 40, one = 70;
  // About as many GPU pods per GPU as openb's default list (8152 pods on 6212 GPUs, 87% with GPUs).
  const int64_t pods = w.cluster.total_gpus() * 8152 / 6212 * 87 / (100 - cpu_only);
  for (int64_t i = 0; i < pods; ++i) {
    OpenbPod p;
    std::snprintf(name, sizeof name, "syn-pod-%05lld", static_cast<long long>(i));
    p.name = name;
    TaskRequest& t = p.task;
    const int64_t cls = int64_t(rng.uniform(100));
    if (cls < cpu_only) {
      t.cpu = MilliCpu(draw(rng, kCpuOnlyCpu));
    } else if (cls < share) {
      t.cpu = MilliCpu(draw(rng, kShareCpu));
      t.gpu_count = 1;
      t.milli_per_gpu = MilliGpu(draw(rng, kShareMilli));
    } else if (cls < one) {
      t.cpu = MilliCpu(draw(rng, kOneGpuCpu));
      t.gpu_count = 1;
    } else {
      t.gpu_count = draw(rng, kMultiGpus);
      t.cpu = MilliCpu(8000 * t.gpu_count + 200);
    }
    const int64_t gib_per_core = mix == SyntheticMix::kMemoryHeavy ? draw(rng, kGibPerCore) : 4;
    t.memory = MiB(t.cpu.v / 1000 * gib_per_core * 1024 + 1024);
    if (mix == SyntheticMix::kModelConstrained && !t.cpu_only() && rng.uniform(3) == 0) {
      // One model, or two, drawn in proportion to their nodes.
      const int k = 1 + int(rng.uniform(2));
      for (int j = 0; j < k; ++j) {
        int x = int(rng.uniform(uint64_t(nodes)));
        for (const auto& [m, c] : models) {
          if (x < c) {
            if (std::find(t.gpu_models.begin(), t.gpu_models.end(), m) == t.gpu_models.end() && !m.empty())
              t.gpu_models.push_back(m);
            break;
          }
          x -= c;
        }
      }
    }
    w.pods.push_back(std::move(p));
  }
  return w;
}

}  // namespace tessera::sim

namespace tessera::sim {

std::string artifact_policy_name(const std::string& policy) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"random", "01-Random"},       {"dotprod", "02-DotProd"}, {"gpu-clustering", "03-GpuClustering"},
      {"gpu-packing", "04-GpuPacking"}, {"best-fit", "05-BestFit"}, {"fgd", "06-FGD"}};
  for (auto [ours, theirs] : kNames)
    if (policy == ours) return theirs;
  return "";
}

Result<std::vector<PublishedCurve>> load_published_curves(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument(path + ": cannot open file");
  std::string line;
  if (!std::getline(in, line)) return invalid_argument(path + ": empty file, expected a header line");
  auto cells = [](const std::string& l) {
    std::vector<std::string> v;
    size_t s = 0;
    for (size_t p; (p = l.find(',', s)) != std::string::npos; s = p + 1) v.push_back(l.substr(s, p - s));
    v.push_back(l.substr(s));
    for (auto& c : v)
      while (!c.empty() && (c.back() == '\r' || c.back() == ' ')) c.pop_back();
    return v;
  };
  const std::vector<std::string> head = cells(line);
  auto col = [&](const std::string& name) {
    for (size_t i = 0; i < head.size(); ++i)
      if (head[i] == name) return int(i);
    return -1;
  };
  const int cw = col("workload"), cp = col("sc_policy"), cs = col("seed"), c0 = col("0");
  if (cw < 0 || cp < 0 || cs < 0 || c0 < 0)
    return invalid_argument(path + ":1: expected columns workload, sc_policy, seed and 0..130");
  std::vector<PublishedCurve> out;
  for (int line_no = 2; std::getline(in, line); ++line_no) {
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> v = cells(line);
    if (v.size() < head.size())
      return invalid_argument(path + ":" + std::to_string(line_no) + ": has " + std::to_string(v.size()) +
                              " fields, the header has " + std::to_string(head.size()));
    PublishedCurve c{v[cw], v[cp], 0, {}};
    char* end = nullptr;
    c.seed = std::strtoull(v[cs].c_str(), &end, 10);
    if (v[cs].empty() || *end) return invalid_argument(path + ":" + std::to_string(line_no) + ": field 'seed': expected an integer, got \"" + v[cs] + "\"");
    for (size_t i = size_t(c0); i < head.size(); ++i) {
      const double x = v[i].empty() ? std::nan("") : std::strtod(v[i].c_str(), &end);
      if (!v[i].empty() && *end)
        return invalid_argument(path + ":" + std::to_string(line_no) + ": field '" + head[i] + "': expected a number, got \"" + v[i] + "\"");
      c.curve.push_back(x);
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<double> published_mean(const std::vector<PublishedCurve>& all, const std::string& workload,
                                   const std::string& policy, const std::vector<uint64_t>& seeds) {
  const std::string theirs = artifact_policy_name(policy);
  std::vector<double> sum;
  std::vector<int> cnt;
  for (const PublishedCurve& c : all) {
    if (c.workload != workload || c.policy != theirs) continue;
    if (std::find(seeds.begin(), seeds.end(), c.seed) == seeds.end()) continue;
    if (sum.size() < c.curve.size()) sum.resize(c.curve.size(), 0.0), cnt.resize(c.curve.size(), 0);
    for (size_t p = 0; p < c.curve.size(); ++p)
      if (!std::isnan(c.curve[p])) sum[p] += c.curve[p], ++cnt[p];
  }
  for (size_t p = 0; p < sum.size(); ++p) sum[p] = cnt[p] ? sum[p] / cnt[p] : std::nan("");
  return sum;
}

}  // namespace tessera::sim
