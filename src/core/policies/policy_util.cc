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

void FragModel::build(const WorkloadProfile& profile, int coverage_pct, bool multi_resource) {
  *this = FragModel();
  multi_resource_ = multi_resource;
  // Group by FGD's key; memory is not part of it (the multi-resource model keeps each shape's mean).
  using Key = std::tuple<int64_t, int64_t, int, std::string, std::string>;
  std::map<Key, TypicalShape> keyed;
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
    const Key key{s.cpu, s.milli, s.gpus, model_key, s.mig_profile};
    auto [it, fresh] = keyed.try_emplace(key, s);
    it->second.count += ws.count;
    if (multi_resource_) {
      it->second.mem += t.memory.v * ws.count;  // MiB x count here; the mean after the loop
      // What the whole workload brings per GPU milli (CPU-only tasks included: they compete for CPU).
      cpu_per_ += score_cpu(t) * ws.count;
      mem_per_ += t.memory.v * ws.count;
      milli_per_ += (t.mig() ? 0 : t.gpu_demand_milli()) * ws.count;
    }
    all += ws.count;
  }
  if (multi_resource_)
    for (auto& [key, shape] : keyed) shape.mem /= shape.count;
  std::vector<std::pair<Key, TypicalShape>> order(keyed.begin(), keyed.end());
  // Most frequent first; ties: larger CPU, larger milli, more GPUs, model string descending.
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.first > b.first;
  });
  for (auto& [key, shape] : order) {
    if (total_ * 100 >= all * coverage_pct) break;
    total_ += shape.count;
    for (const std::string& m : shape.models) {
      auto it = std::find(model_names_.begin(), model_names_.end(), m);
      if (it == model_names_.end() && model_names_.size() < 64) it = model_names_.insert(model_names_.end(), m);
      if (it != model_names_.end()) shape.model_mask |= uint64_t(1) << (it - model_names_.begin());
    }
    shapes_.push_back(std::move(shape));
  }
  for (uint32_t i = 0; i < shapes_.size(); ++i) {
    if (shapes_[i].gpus == 0 || !shapes_[i].mig_profile.empty()) always_all_ += shapes_[i].count;
    else by_milli_.push_back(i);
  }
  std::stable_sort(by_milli_.begin(), by_milli_.end(),
                   [&](uint32_t a, uint32_t b) { return shapes_[a].milli < shapes_[b].milli; });
  for (uint32_t k = 0; k < by_milli_.size(); ++k) {
    const int64_t m = shapes_[by_milli_[k]].milli;
    if (groups_.empty() || groups_.back().milli != m) groups_.push_back({m, k, k});
    groups_.back().end = k + 1;
  }
}

int64_t FragModel::stranded(int64_t gpu_free, int64_t cpu_free, int64_t mem_free) const {
  if (!multi_resource_ || milli_per_ <= 0 || gpu_free <= 0) return 0;
  // GPU milli the free CPU (memory) can bring arrivals of the workload's mix to.
  auto reach = [&](int64_t free, int64_t per) {
    return per <= 0 ? gpu_free : int64_t(__int128(std::max<int64_t>(0, free)) * milli_per_ / per);
  };
  return gpu_free - std::min({gpu_free, reach(cpu_free, cpu_per_), reach(mem_free, mem_per_)});
}

uint64_t FragModel::model_bit(const Node& n) const {
  const GpuModel* m = n.gpu_model();
  if (!m) return 0;
  for (size_t i = 0; i < model_names_.size(); ++i)
    if (model_names_[i] == m->name) return uint64_t(1) << i;
  return 0;
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

// What a node has free besides GPUs.
struct Room {
  int64_t cpu = 0, mem = 0;
};

// Fragment seen by a GPU shape (fact 15): the free milli on GPUs below its per-GPU ask if it fits
// (model, CPU, memory when `multi`, enough GPUs with room), else all free milli.
inline int64_t shape_fragment(const TypicalShape& s, bool usable, int fitting, int64_t below, int64_t total, Room room,
                              bool multi) {
  const bool fits = usable && fitting >= s.gpus && room.cpu >= s.cpu && (!multi || room.mem >= s.mem);
  return fits ? below : total;
}

}  // namespace

void FragModel::deltas(const Node& n, const Candidate* cands, int ncand, int64_t* out) const {
  const NodeGpus g(n);
  const Room room{n.cpu_free().v, n.memory_free().v};
  const uint64_t node_bit = model_bit(n);
  const int64_t stranded_before = stranded(g.total, room.cpu, room.mem);
  std::array<int64_t, kMaxGpusPerNode> tot{};
  for (int c = 0; c < ncand; ++c) {
    tot[c] = g.total;
    for (int k = 0; k < cands[c].count; ++k) tot[c] += cands[c].changes[k].free_after - g.free[cands[c].changes[k].gpu];
    out[c] = always_all_ * (g.total - tot[c]);  // CPU-only and MIG shapes count all idle milli
    // Stranded milli: a fragment every typical task sees.
    out[c] += total_ * (stranded_before - stranded(tot[c], room.cpu - cands[c].cpu, room.mem - cands[c].mem));
  }
  std::array<int, kMaxGpusPerNode> fit{};
  std::array<int64_t, kMaxGpusPerNode> below{};
  for (const Group& grp : groups_) {
    const int64_t m = grp.milli;
    int fitting = 0;
    int64_t below0 = 0;
    for (int i = 0; i < g.count; ++i) {
      if (g.free[i] >= m) ++fitting;
      else below0 += g.free[i];
    }
    for (int c = 0; c < ncand; ++c) {
      fit[c] = fitting;
      below[c] = below0;
      for (int k = 0; k < cands[c].count; ++k) {
        const int64_t fb = g.free[cands[c].changes[k].gpu], fa = cands[c].changes[k].free_after;
        if (fb >= m) --fit[c];
        else below[c] -= fb;
        if (fa >= m) ++fit[c];
        else below[c] += fa;
      }
    }
    for (uint32_t k = grp.begin; k < grp.end; ++k) {
      const TypicalShape& s = shapes_[by_milli_[k]];
      const bool usable = s.models.empty() || (s.model_mask & node_bit) != 0;
      const int64_t before = shape_fragment(s, usable, fitting, below0, g.total, room, multi_resource_);
      for (int c = 0; c < ncand; ++c) {
        const Room after_room{room.cpu - cands[c].cpu, room.mem - cands[c].mem};
        const int64_t after = shape_fragment(s, usable, fit[c], below[c], tot[c], after_room, multi_resource_);
        out[c] += s.count * (before - after);
      }
    }
  }
}

int64_t FragModel::fragment(const Node& n) const {
  const NodeGpus g(n);
  const Room room{n.cpu_free().v, n.memory_free().v};
  const uint64_t node_bit = model_bit(n);
  int64_t sum = always_all_ * g.total;
  sum += total_ * stranded(g.total, room.cpu, room.mem);
  for (const Group& grp : groups_) {
    int fitting = 0;
    int64_t below = 0;
    for (int i = 0; i < g.count; ++i) {
      if (g.free[i] >= grp.milli) ++fitting;
      else below += g.free[i];
    }
    for (uint32_t k = grp.begin; k < grp.end; ++k) {
      const TypicalShape& s = shapes_[by_milli_[k]];
      const bool usable = s.models.empty() || (s.model_mask & node_bit) != 0;
      sum += s.count * shape_fragment(s, usable, fitting, below, g.total, room, multi_resource_);
    }
  }
  return sum;
}

bool fits_kind(const TypicalShape& s, const NodeKind& k) {
  if (s.gpus > k.gpus || s.cpu > k.cpu.v || s.mem > k.memory.v) return false;
  return s.models.empty() || std::find(s.models.begin(), s.models.end(), k.gpu_model) != s.models.end();
}

void Scarcity::build(const std::vector<TypicalShape>& shapes, const std::vector<NodeKind>& nodes) {
  kinds_ = nodes;
  pressure_.assign(kinds_.size(), 0);
  int64_t capacity = 0, demand = 0;  // milli-GPU: the cluster's, and the workload's
  for (const NodeKind& k : kinds_) capacity += k.count * k.gpus * 1000;
  for (const TypicalShape& s : shapes)
    if (s.mig_profile.empty()) demand += s.count * s.gpus * s.milli;
  if (capacity <= 0 || demand <= 0) return;
  for (const TypicalShape& s : shapes) {
    if (s.gpus == 0 || !s.mig_profile.empty()) continue;
    int64_t eligible = 0;
    for (const NodeKind& k : kinds_)
      if (fits_kind(s, k)) eligible += k.count * k.gpus * 1000;
    if (eligible == 0 || eligible * 2 > capacity) continue;  // fits nowhere, or not restricted
    // Its demand scaled to the cluster's capacity, per mille of each eligible GPU.
    const int64_t per_mille = int64_t(__int128(s.count * s.gpus * s.milli) * capacity * 1000 / (__int128(demand) * eligible));
    for (size_t i = 0; i < kinds_.size(); ++i)
      if (fits_kind(s, kinds_[i])) pressure_[i] += per_mille;
  }
  if (std::all_of(pressure_.begin(), pressure_.end(), [](int64_t p) { return p == 0; })) kinds_.clear(), pressure_.clear();
}

int64_t Scarcity::pressure(const Node& n) const {
  const GpuModel* m = n.gpu_model();
  for (size_t i = 0; i < kinds_.size(); ++i) {
    const NodeKind& k = kinds_[i];
    if (k.gpus == int(n.gpus.size()) && k.cpu == n.cpu_capacity && k.memory == n.memory_capacity &&
        k.gpu_model == (m ? std::string_view(m->name) : std::string_view()))
      return pressure_[i];
  }
  return 0;
}

}  // namespace tessera::policies
