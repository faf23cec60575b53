#include "core/policies/policy_util.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tessera::policies {

int64_t gpu_ask_milli(const Node& n, const TaskRequest& t) {
  if (t.mig()) {
    const MigProfile* p = resolve_mig_profile(n, t);
    const GpuModel* m = n.gpu_model();
    if (!p || !m || m->compute_slices == 0) return 0;
    return int64_t(p->compute_slices) * 1000 / m->compute_slices;
  }
  return t.gpu_demand_milli();
}

bool model_allowed(const Node& n, const std::vector<std::string>& models) {
  if (models.empty()) return true;
  const GpuModel* m = n.gpu_model();
  if (!m) return false;
  return std::find(models.begin(), models.end(), m->name) != models.end();
}

void FragModel::build(const WorkloadProfile& profile, int coverage_pct) {
  shapes_.clear();
  total_ = 0;
  // Group by FGD's key; memory is not part of it.
  using Key = std::tuple<int64_t, int64_t, int, std::string, std::string>;
  std::map<Key, TypicalShape> groups;
  int64_t all = 0;
  for (const WorkloadShape& ws : profile.shapes) {
    if (ws.count <= 0) continue;
    const TaskRequest& t = ws.task;
    TypicalShape s;
    s.cpu = score_cpu(t);
    s.gpus = t.mig() ? 0 : t.gpu_count;
    s.milli = s.gpus == 0 ? 0 : std::min<int64_t>(t.milli_per_gpu.v, 1000);
    s.models = t.gpu_models;
    s.mig_profile = t.mig_profile;
    std::string model_key;
    for (const std::string& m : t.gpu_models) model_key += (model_key.empty() ? "" : "|") + m;
    auto [it, fresh] = groups.try_emplace(Key{s.cpu, s.milli, s.gpus, model_key, s.mig_profile}, s);
    it->second.count += ws.count;
    all += ws.count;
  }
  std::vector<std::pair<Key, TypicalShape>> order(groups.begin(), groups.end());
  // Most frequent first; ties: larger CPU, larger milli, more GPUs, model string descending.
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.first > b.first;
  });
  for (auto& [key, shape] : order) {
    if (total_ * 100 >= all * coverage_pct) break;
    total_ += shape.count;
    shapes_.push_back(std::move(shape));
  }
}

namespace {

struct NodeGpus {
  std::array<int64_t, kMaxGpusPerNode> free{};
  int count = 0;
  int64_t total = 0;
  explicit NodeGpus(const Node& n) {
    count = std::min<int>(int(n.gpus.size()), kMaxGpusPerNode);
    for (int i = 0; i < count; ++i) {
      free[i] = n.gpus[i].free_milli();
      total += free[i];
    }
  }
};

// Fragment seen by shape s (fact 15) from aggregates: GPUs with >= s.milli free, the free milli
// on the others, all free milli, and whether CPU fits.
inline int64_t shape_fragment(const TypicalShape& s, bool usable, int fitting, int64_t below, int64_t total,
                              bool cpu_fits) {
  if (!usable || !cpu_fits || fitting < s.gpus) return total;
  return below;
}

}  // namespace

void FragModel::deltas(const Node& n, const Candidate* cands, int ncand, int64_t* out) const {
  const NodeGpus g(n);
  const int64_t cpu_free = n.cpu_free().v;
  for (int c = 0; c < ncand; ++c) out[c] = 0;
  for (const TypicalShape& s : shapes_) {
    const bool usable = s.gpus > 0 && s.mig_profile.empty() && model_allowed(n, s.models);
    int fitting = 0;
    int64_t below = 0;
    if (usable) {
      for (int i = 0; i < g.count; ++i) {
        if (g.free[i] >= s.milli) ++fitting;
        else below += g.free[i];
      }
    }
    const int64_t before = shape_fragment(s, usable, fitting, below, g.total, cpu_free >= s.cpu);
    for (int c = 0; c < ncand; ++c) {
      const Candidate& cd = cands[c];
      int f = fitting;
      int64_t b = below, tot = g.total;
      for (int k = 0; k < cd.count; ++k) {
        const int64_t fb = g.free[cd.changes[k].gpu], fa = cd.changes[k].free_after;
        tot += fa - fb;
        if (usable) {
          if (fb >= s.milli) --f;
          else b -= fb;
          if (fa >= s.milli) ++f;
          else b += fa;
        }
      }
      const int64_t after = shape_fragment(s, usable, f, b, tot, cpu_free - cd.cpu >= s.cpu);
      out[c] += s.count * (before - after);
    }
  }
}

int64_t FragModel::fragment(const Node& n) const {
  const NodeGpus g(n);
  const int64_t cpu_free = n.cpu_free().v;
  int64_t sum = 0;
  for (const TypicalShape& s : shapes_) {
    const bool usable = s.gpus > 0 && s.mig_profile.empty() && model_allowed(n, s.models);
    int fitting = 0;
    int64_t below = 0;
    if (usable)
      for (int i = 0; i < g.count; ++i) {
        if (g.free[i] >= s.milli) ++fitting;
        else below += g.free[i];
      }
    sum += s.count * shape_fragment(s, usable, fitting, below, g.total, cpu_free >= s.cpu);
  }
  return sum;
}

}  // namespace tessera::policies
