#include "sim/alloc_bound.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "core/placement/fit.h"

namespace tessera::sim {

namespace {

// What makes two nodes alike for every pod: free CPU and memory, usable GPUs and their model, pool,
// pool kind and whether it takes work.
using NodeKey = std::tuple<int64_t, int64_t, int, std::string, uint32_t, int, bool>;
using PodKey = std::tuple<int64_t, int64_t, int, int64_t, int64_t, std::vector<std::string>, std::vector<uint32_t>, int>;

struct NodeType {
  const Node* rep = nullptr;
  int64_t count = 0, cpu = 0, mem = 0, gpus = 0, gpu_mem = 0;
};

struct PodType {
  TaskRequest task;
  int64_t cpu = 0, mem = 0, units = 0, milli = 0, gpu_mem = 0;  // units: GPUs it takes
  bool whole = false;
};

int usable_gpus(const Node& n) {
  int k = 0;
  for (const Gpu& g : n.gpus) k += g.idle() ? 1 : 0;
  return k;
}

}  // namespace

Result<std::unique_ptr<AllocBound>> AllocBound::build(const ClusterState& cluster, const std::vector<TaskRequest>& pods) {
  std::unique_ptr<AllocBound> b(new AllocBound());
  std::map<NodeKey, size_t> node_index;
  std::vector<NodeType> nodes;
  for (const Node& n : cluster.nodes()) {
    for (const Gpu& g : n.gpus)
      if (g.shared_milli.v > 0 || g.whole_held)
        return invalid_argument("bound: node " + n.name + " has GPUs in use; the bound starts from an empty cluster");
    const GpuModel* m = n.gpu_model();
    NodeKey k{n.cpu_free().v, n.memory_free().v, usable_gpus(n), m ? m->name : "", n.pool.value, int(n.pool_kind),
              n.schedulable};
    auto [it, fresh] = node_index.try_emplace(k, nodes.size());
    if (fresh) {
      NodeType t;
      t.rep = &n;
      t.cpu = n.cpu_free().v;
      t.mem = n.memory_free().v;
      t.gpus = usable_gpus(n);
      t.gpu_mem = m ? m->memory.v : 0;
      nodes.push_back(t);
    }
    ++nodes[it->second].count;
    b->capacity_milli_ += int64_t(usable_gpus(n)) * 1000;
  }
  b->node_types_ = int(nodes.size());

  std::map<PodKey, int> pod_index;
  std::vector<PodType> types;
  b->pod_type_.assign(pods.size(), -1);
  for (size_t i = 0; i < pods.size(); ++i) {
    const TaskRequest& t = pods[i];
    if (t.mig()) return invalid_argument("bound: MIG requests are not modelled (pod " + std::to_string(i) + ")");
    if (t.cpu_only() || t.gpu_demand_milli() <= 0) continue;
    std::vector<uint32_t> pools;
    for (PoolId p : t.pools) pools.push_back(p.value);
    PodKey k{t.cpu.v, t.memory.v, t.gpu_count, t.milli_per_gpu.v, t.gpu_memory.v, t.gpu_models, pools, int(t.pool_kinds)};
    auto [it, fresh] = pod_index.try_emplace(std::move(k), int(types.size()));
    if (fresh) {
      PodType p;
      p.task = t;
      p.cpu = t.cpu.v;
      p.mem = t.memory.v;
      p.units = t.gpu_count;
      p.whole = t.whole_gpus();
      p.milli = p.whole ? 1000 : std::min<int64_t>(1000, t.milli_per_gpu.v);
      p.gpu_mem = t.gpu_memory.v;
      types.push_back(std::move(p));
    }
    b->pod_type_[i] = it->second;
  }

  // Columns: y[p][t] where p fits an empty node of type t.
  LinearProgram& lp = b->lp_;
  std::vector<std::vector<std::pair<int, int>>> by_node(nodes.size());  // (pod type, column)
  std::vector<std::vector<int>> by_pod(types.size());
  for (size_t p = 0; p < types.size(); ++p) {
    b->type_demand_.push_back(types[p].units * types[p].milli);
    for (size_t t = 0; t < nodes.size(); ++t) {
      if (check_fit(*nodes[t].rep, types[p].task) != Misfit::kFits) continue;
      const int col = lp.add_column(double(b->type_demand_.back()));
      by_node[t].push_back({int(p), col});
      by_pod[p].push_back(col);
    }
  }
  // Rows per pod type: how many arrived (set by solve).
  for (size_t p = 0; p < types.size(); ++p) {
    std::vector<LinearProgram::Term> row;
    for (int col : by_pod[p]) row.push_back({col, 1.0});
    b->count_row_.push_back(lp.add_row(row, 0));
  }
  // Rows per node type. CPU in cores and memory in GiB keep the coefficients near 1.
  for (size_t t = 0; t < nodes.size(); ++t) {
    const NodeType& n = nodes[t];
    if (by_node[t].empty()) continue;
    const double N = double(n.count);
    auto capacity_row = [&](auto amount, double cap, double scale) {
      std::vector<LinearProgram::Term> row;
      for (auto [p, col] : by_node[t]) row.push_back({col, double(amount(types[size_t(p)])) / scale});
      lp.add_row(row, N * cap / scale);
    };
    capacity_row([](const PodType& p) { return p.cpu; }, double(n.cpu), 1000.0);
    capacity_row([](const PodType& p) { return p.mem; }, double(n.mem), 1024.0);
    capacity_row([](const PodType& p) { return p.units * p.milli; }, double(n.gpus) * 1000, 1000.0);
    // Per node: at most k requests above 1/(k+1) of a capacity (CPU, memory, whole GPUs).
    auto big_rows = [&](auto amount, int64_t cap) {
      for (int k = 1; k <= 3; ++k) {
        std::vector<LinearProgram::Term> row;
        for (auto [p, col] : by_node[t])
          if (amount(types[size_t(p)]) * (k + 1) > cap) row.push_back({col, 1.0});
        if (!row.empty()) lp.add_row(row, N * k);
      }
    };
    big_rows([](const PodType& p) { return p.cpu; }, n.cpu);
    big_rows([](const PodType& p) { return p.mem; }, n.mem);
    big_rows([](const PodType& p) { return p.whole ? p.units : 0; }, n.gpus);  // shares may share a GPU
    // Per GPU: whole-GPU requests hold their GPUs alone; a GPU without one holds at most k shares
    // above 1000/(k+1) milli, and (a separate row: the two may mix on a GPU) at most k above 1/(k+1)
    // of its memory.
    auto share_rows = [&](auto big) {
      for (int k = 1; k <= 4; ++k) {
        std::vector<LinearProgram::Term> row;
        bool any_share = false;
        for (auto [p, col] : by_node[t]) {
          const PodType& pt = types[size_t(p)];
          if (pt.whole) row.push_back({col, double(k * pt.units)});
          else if (big(pt, k)) row.push_back({col, double(pt.units)}), any_share = true;
        }
        if (any_share) lp.add_row(row, N * double(k * n.gpus));
      }
    };
    share_rows([](const PodType& pt, int k) { return pt.milli * (k + 1) > 1000; });
    if (n.gpu_mem > 0) share_rows([&](const PodType& pt, int k) { return pt.gpu_mem * (k + 1) > n.gpu_mem; });
    bool gpu_mem = false;
    for (auto [p, col] : by_node[t]) gpu_mem = gpu_mem || (!types[size_t(p)].whole && types[size_t(p)].gpu_mem > 0);
    if (gpu_mem && n.gpu_mem > 0) {
      std::vector<LinearProgram::Term> row;
      for (auto [p, col] : by_node[t]) {
        const PodType& pt = types[size_t(p)];
        row.push_back({col, double(pt.units * (pt.whole ? n.gpu_mem : pt.gpu_mem)) / 1024.0});
      }
      lp.add_row(row, N * double(n.gpus * n.gpu_mem) / 1024.0);
    }
  }
  return b;
}

Result<int64_t> AllocBound::solve(const std::vector<int64_t>& count) {
  if (count.size() != count_row_.size()) return invalid_argument("bound: one count per pod type expected");
  int64_t demand = 0;
  for (size_t p = 0; p < count.size(); ++p) {
    lp_.set_row_upper(count_row_[p], double(std::max<int64_t>(0, count[p])));
    demand += std::max<int64_t>(0, count[p]) * type_demand_[p];
  }
  if (demand == 0) return int64_t(0);
  auto obj = lp_.solve();
  if (!obj) return obj.error();
  // Every packing holds whole milli, so the LP's optimum rounded down bounds them; the solver's
  // tolerance may leave it a hair low, so a part per million is added first.
  const int64_t up = int64_t(std::floor(*obj + 1e-6 * std::max(1.0, *obj)));
  return std::min({up, demand, capacity_milli_});
}

}  // namespace tessera::sim

namespace tessera::sim {

Result<std::vector<BoundCurve>> alloc_bound_curves(const AllocWorkload& w, const std::vector<uint64_t>& seeds,
                                                   double inflate, const std::vector<int>& pcts) {
  const std::vector<OpenbPod> sorted = pods_by_name(w.pods);
  std::vector<TaskRequest> tasks;
  for (const OpenbPod& p : sorted) tasks.push_back(p.task);
  const int64_t total_gpus = w.cluster.total_gpus();
  const double per_pct = double(total_gpus) * 10.0;
  auto bound = AllocBound::build(w.cluster, tasks);  // every seed draws from the same pods
  if (!bound) return bound.error();
  std::vector<BoundCurve> out;
  for (uint64_t seed : seeds) {
    const auto t0 = std::chrono::steady_clock::now();
    Rng rng(seed);
    const std::vector<uint32_t> order = plan_arrivals(sorted, total_gpus * 1000, inflate, rng);
    std::vector<int64_t> rounded;  // per arrival: arrived % as alloc_curve rounds it
    int64_t arrived = 0;
    for (uint32_t i : order) {
      arrived += pod_demand_milli(sorted[i].task);
      rounded.push_back(round_half_even(double(arrived) / per_pct));
    }
    BoundCurve c;
    c.seed = seed;
    for (int p : pcts) {
      // The last arrival alloc_curve counts at p: rounded to p, else within p +- 1.
      std::optional<size_t> last;
      for (size_t i = 0; i < rounded.size(); ++i)
        if (rounded[i] == p) last = i;
      if (!last)
        for (size_t i = 0; i < rounded.size(); ++i)
          if (rounded[i] >= p - 1 && rounded[i] <= p + 1) last = i;
      if (!last) {
        c.at.push_back(std::nan(""));
        continue;
      }
      std::vector<int64_t> count(size_t((*bound)->pod_types()), 0);
      for (size_t i = 0; i <= *last; ++i)
        if (const int t = (*bound)->type_of(order[i]); t >= 0) ++count[size_t(t)];
      auto milli = (*bound)->solve(count);
      if (!milli) return milli.error();
      c.at.push_back(std::ceil(double(*milli) / per_pct * 100 - 1e-9) / 100);
    }
    c.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tessera::sim
