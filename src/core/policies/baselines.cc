// The FGD paper's baseline policies (Random, DotProd, GpuPacking, GpuClustering, BestFit) exactly as
// PROTOCOL.md facts 18-23 give them, plus "spread" (Kubernetes' LeastAllocated). Integer scores,
// truncated toward zero; ties are left to the engine's node rank.
#include <algorithm>

#include "core/policies/policies.h"
#include "core/policies/policy_util.h"

namespace tessera::policies {
namespace {

// A uniformly random feasible node; a sharing task goes to a uniformly random GPU with room.
class RandomPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "random"; }
  bool cacheable() const override { return false; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext& ctx) const override {
    NodeChoice out;
    if (t.gpu_share() && t.gpu_count == 1) {
      std::array<uint16_t, kMaxGpusPerNode> fit{};
      int k = 0;
      for (const Gpu& g : n.gpus)
        if (g.index < kMaxGpusPerNode && gpu_fits_share(g, t)) fit[k++] = g.index;
      if (k == 0) return std::nullopt;
      out.pick.add(fit[ctx.rng.uniform(uint64_t(k))]);
    } else if (!t.cpu_only() && !pick_default(n, t, out.pick)) {
      return std::nullopt;
    }
    out.score = int64_t(ctx.rng.uniform(uint64_t(1) << 40));
    return out;
  }
};

// Tetris-style dot product with "merge" and "norm max" (fact 18): the node with the smallest dot
// product of (CPU, GPU) request and free vectors wins.
class DotProdPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "dotprod"; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    NodeChoice out;
    if (!t.cpu_only() && !pick_best_fit(n, t, out.pick)) return std::nullopt;
    double dot = 0;
    dot += double(n.cpu_free().v) / kCpuNorm * (double(score_cpu(t)) / kCpuNorm);
    dot += double(n.free_gpu_milli) / kGpuNorm * (double(gpu_ask_milli(n, t)) / kGpuNorm);
    dot /= 2;
    out.score = int64_t(100.0 * (1.0 - dot));
    return out;
  }
};

// Least free CPU and GPU left after placement (fact 19). The artifact's min-max rescaling to 0-100
// is omitted: with scores already in 0..100 it never changes the winner or the ties.
class BestFitPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "best-fit"; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    NodeChoice out;
    if (!t.cpu_only() && !pick_best_fit(n, t, out.pick)) return std::nullopt;
    double s = 0;
    s += double(n.cpu_free().v - score_cpu(t)) / kCpuNorm * 0.5;
    s += double(n.free_gpu_milli - gpu_ask_milli(n, t)) / kGpuNorm * 0.5;
    out.score = int64_t((1.0 - s) * 100.0);
    return out;
  }
};

// Prefer partly used GPUs, then used nodes, then idle nodes (fact 21).
class GpuPackingPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "gpu-packing"; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    NodeChoice out;
    if (!t.cpu_only() && !pick_best_fit(n, t, out.pick)) return std::nullopt;
    out.score = packing_score(n, t);
    return out;
  }

 private:
  static int64_t packing_score(const Node& n, const TaskRequest& t) {
    if (t.cpu_only() || t.mig()) return 0;
    const int gpus = int(n.gpus.size());
    if (n.idle_gpus == gpus) return std::max<int64_t>(33 - gpus, gpus);
    // The task's GPUs from the smallest sufficient free amounts upward.
    std::array<int64_t, kMaxGpusPerNode> free{};
    int k = 0;
    for (const Gpu& g : n.gpus)
      if (k < kMaxGpusPerNode && (t.whole_gpus() ? g.idle() : gpu_fits_share(g, t))) free[k++] = g.free_milli();
    std::sort(free.begin(), free.begin() + k);
    const int want = std::min(t.gpu_count, k);
    int idle_used = 0;
    int64_t free_pct = 0;
    for (int i = 0; i < want; ++i) {
      if (free[i] == 1000) ++idle_used;
      free_pct += free[i] * 100 / 1000;
    }
    if (idle_used > 0) return std::max<int64_t>(50 - idle_used, 33);
    return std::max<int64_t>(100 - free_pct / 10, 50);
  }
};

// Keep tasks of one kind together via per-node affinity tags (fact 22).
class GpuClusteringPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "gpu-clustering"; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    NodeChoice out;
    if (t.cpu_only()) return out;  // score 0 everywhere
    if (!pick_best_fit(n, t, out.pick)) return std::nullopt;
    const int64_t base = 25 * (kGpuNorm - n.free_gpu_milli) / kGpuNorm;
    const int tag = task_class(t);
    int tags = 0;
    for (uint16_t c : n.task_classes) tags += c > 0;
    if (n.task_classes[tag] > 0) out.score = base + (tags == 1 ? 75 : 50);
    else out.score = base + (tags == 0 ? 25 : 0);
    return out;
  }
};

// Kubernetes' default LeastAllocated: mean over CPU and GPU of the share left free after placement.
// First fit: every feasible node scores the same, so the engine's tie-break (rank, then node id)
// picks the first one; GPUs by the default pickers. The classic gang-FIFO baseline's placement.
class FirstFitPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "first-fit"; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    NodeChoice out;
    if (!t.cpu_only() && !pick_default(n, t, out.pick)) return std::nullopt;
    return out;
  }
  bool packs_gangs() const override { return true; }
};

class SpreadPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "spread"; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    NodeChoice out;
    if (!t.cpu_only() && !pick_default(n, t, out.pick)) return std::nullopt;
    const int64_t cpu_cap = std::max<int64_t>(n.cpu_capacity.v, 1);
    const int64_t cpu = std::max<int64_t>(n.cpu_free().v - score_cpu(t), 0) * 100 / cpu_cap;
    const int64_t gpu_cap = int64_t(n.gpus.size()) * 1000;
    if (gpu_cap == 0) {
      out.score = cpu;
    } else {
      const int64_t gpu = std::max<int64_t>(n.free_gpu_milli - gpu_ask_milli(n, t), 0) * 100 / gpu_cap;
      out.score = (cpu + gpu) / 2;
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ScoringPolicy> make_random() { return std::make_unique<RandomPolicy>(); }
std::unique_ptr<ScoringPolicy> make_dotprod() { return std::make_unique<DotProdPolicy>(); }
std::unique_ptr<ScoringPolicy> make_best_fit() { return std::make_unique<BestFitPolicy>(); }
std::unique_ptr<ScoringPolicy> make_gpu_packing() { return std::make_unique<GpuPackingPolicy>(); }
std::unique_ptr<ScoringPolicy> make_gpu_clustering() { return std::make_unique<GpuClusteringPolicy>(); }
std::unique_ptr<ScoringPolicy> make_spread() { return std::make_unique<SpreadPolicy>(); }
std::unique_ptr<ScoringPolicy> make_first_fit() { return std::make_unique<FirstFitPolicy>(); }

}  // namespace tessera::policies
