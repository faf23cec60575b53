// FGD (Fragmentation Gradient Descent, ATC'23) exactly as the artifact scores: node score =
// int(100 x sigmoid(delta / 1000)), delta = fragment before - after in milli-GPU over the typical
// shapes (PROTOCOL.md facts 13-17); a sharing task goes to the first GPU reaching the best score.
#include <cmath>

#include "core/policies/policies.h"
#include "core/policies/policy_util.h"

namespace tessera::policies {
namespace {

class FgdPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "fgd"; }
  void prepare(const WorkloadProfile& profile) override { model_.build(profile); }

  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    std::array<FragModel::Candidate, kMaxGpusPerNode> cands;
    std::array<uint16_t, kMaxGpusPerNode> cand_gpu{};
    int ncand = 0;
    GpuPick base;
    const int64_t cpu = score_cpu(t);
    if (t.gpu_share() && t.gpu_count == 1) {
      for (const Gpu& g : n.gpus) {
        if (g.index >= kMaxGpusPerNode || !gpu_fits_share(g, t)) continue;
        FragModel::Candidate& c = cands[ncand];
        c.cpu = cpu;
        c.set(g.index, g.free_milli() - t.milli_per_gpu.v);
        cand_gpu[ncand++] = g.index;
      }
      if (ncand == 0) return std::nullopt;
    } else {
      if (!t.cpu_only() && !pick_default(n, t, base)) return std::nullopt;
      FragModel::Candidate& c = cands[ncand++];
      c.cpu = cpu;
      if (!t.mig())
        for (int k = 0; k < base.count; ++k) {
          const Gpu& g = n.gpus[base.gpus[k]];
          c.set(g.index, g.free_milli() - t.milli_per_gpu.v);
        }
    }
    std::array<int64_t, kMaxGpusPerNode> delta{};
    model_.deltas(n, cands.data(), ncand, delta.data());
    const double total = model_.empty() ? 1.0 : double(model_.total());
    int best = -1;
    int64_t best_score = 0;
    for (int c = 0; c < ncand; ++c) {
      const double x = double(delta[c]) / total / 1000.0;
      const int64_t s = int64_t(100.0 * (1.0 / (1.0 + std::exp(-x))));
      if (best < 0 || s > best_score) best = c, best_score = s;
    }
    NodeChoice out;
    out.score = best_score;
    if (t.gpu_share() && t.gpu_count == 1) out.pick.add(cand_gpu[best]);
    else out.pick = base;
    return out;
  }

 private:
  FragModel model_;
};

}  // namespace

std::unique_ptr<ScoringPolicy> make_fgd() { return std::make_unique<FgdPolicy>(); }

}  // namespace tessera::policies
