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

void FragModel::build(const WorkloadProfile& profile, int coverage_pct, bool multi_resource, bool excluded_fragments) {
  *this = FragModel();
  multi_resource_ = multi_resource;
  excluded_fragments_ = excluded_fragments;
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
  std::vector<uint32_t> gpu_shapes;
  for (uint32_t i = 0; i < shapes_.size(); ++i) {
    if (shapes_[i].gpus == 0 || !shapes_[i].mig_profile.empty()) always_all_ += shapes_[i].count;
    else gpu_shapes.push_back(i);
  }
  std::stable_sort(gpu_shapes.begin(), gpu_shapes.end(),
                   [&](uint32_t a, uint32_t b) { return shapes_[a].milli < shapes_[b].milli; });
  views_.assign(model_names_.size() + 1, View{});
  unusable_count_.assign(model_names_.size() + 1, 0);
  for (size_t v = 0; v < views_.size(); ++v) {
    const uint64_t bit = v < model_names_.size() ? uint64_t(1) << v : 0;
    View& view = views_[v];
    for (uint32_t i : gpu_shapes) {
      if (!shapes_[i].models.empty() && (shapes_[i].model_mask & bit) == 0) {
        unusable_count_[v] += shapes_[i].count;
        continue;
      }
      const TypicalShape& s = shapes_[i];
      const ViewShape vs{s.cpu, multi_resource_ ? s.mem : 0, s.gpus, s.count};
      const uint32_t k = uint32_t(view.by_milli.size());
      if (view.groups.empty() || view.groups.back().milli != s.milli) view.groups.push_back({s.milli, k, k});
      Group& grp = view.groups.back();
      auto same = std::find_if(view.by_milli.begin() + grp.begin, view.by_milli.end(), [&](const ViewShape& o) {
        return o.cpu == vs.cpu && o.mem == vs.mem && o.gpus == vs.gpus;
      });
      if (same != view.by_milli.end()) {
        same->count += vs.count;
        continue;
      }
      view.by_milli.push_back(vs);
      grp.end = k + 1;
    }
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

int64_t FragModel::unusable(uint64_t node_bit) const {
  if (!excluded_fragments_ || unusable_count_.empty()) return 0;
  return node_bit == 0 ? unusable_count_.back() : unusable_count_[size_t(__builtin_ctzll(node_bit))];
}

const FragModel::View& FragModel::view(uint64_t node_bit) const {
  static const View kNone;
  if (views_.empty()) return kNone;
  return node_bit == 0 ? views_.back() : views_[size_t(__builtin_ctzll(node_bit))];
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

// Fragment seen by a GPU shape the node's model allows (fact 15): the free milli on GPUs below its
// per-GPU ask if it fits (CPU, memory when `multi`, enough GPUs with room), else all free milli.
template <class Shape>
inline int64_t shape_fragment(const Shape& s, int fitting, int64_t below, int64_t total, Room room, bool multi) {
  const bool fits = fitting >= s.gpus && room.cpu >= s.cpu && (!multi || room.mem >= s.mem);
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
    // CPU-only and MIG shapes, and (as FGD has it) GPU shapes that exclude this node's model, count
    // all idle milli.
    out[c] = (always_all_ + unusable(node_bit)) * (g.total - tot[c]);
    // Stranded milli: a fragment every typical task sees.
    out[c] += total_ * (stranded_before - stranded(tot[c], room.cpu - cands[c].cpu, room.mem - cands[c].mem));
  }
  std::array<int, kMaxGpusPerNode> fit{};
  std::array<int64_t, kMaxGpusPerNode> below{};
  const View& shapes = view(node_bit);
  bool same_room = ncand > 0;
  for (int c = 1; c < ncand; ++c) same_room = same_room && cands[c].cpu == cands[0].cpu && cands[c].mem == cands[0].mem;
  const Room after_room{room.cpu - (ncand > 0 ? cands[0].cpu : 0), room.mem - (ncand > 0 ? cands[0].mem : 0)};
  for (const Group& grp : shapes.groups) {
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
    if (same_room && ncand > 2) {
      // Every candidate leaves the same CPU and memory: a shape's fragment is `below` where it fits
      // and `total` elsewhere, so the group's sum needs only the count of shapes that fit, by the
      // GPUs with room they need (one pass, whatever the number of candidates).
      std::array<int64_t, kMaxGpusPerNode + 2> fits_before{}, fits_after{};
      int64_t count = 0;
      for (uint32_t k = grp.begin; k < grp.end; ++k) {
        const ViewShape& s = shapes.by_milli[k];
        const size_t need = size_t(std::min(s.gpus, kMaxGpusPerNode + 1));
        count += s.count;
        if (room.cpu >= s.cpu && (!multi_resource_ || room.mem >= s.mem)) fits_before[need] += s.count;
        if (after_room.cpu >= s.cpu && (!multi_resource_ || after_room.mem >= s.mem)) fits_after[need] += s.count;
      }
      for (size_t i = 1; i < fits_before.size(); ++i) fits_before[i] += fits_before[i - 1], fits_after[i] += fits_after[i - 1];
      const int64_t before = g.total * count - (g.total - below0) * fits_before[size_t(fitting)];
      for (int c = 0; c < ncand; ++c) out[c] += before - (tot[c] * count - (tot[c] - below[c]) * fits_after[size_t(fit[c])]);
      continue;
    }
    for (uint32_t k = grp.begin; k < grp.end; ++k) {
      const ViewShape& s = shapes.by_milli[k];
      const int64_t before = shape_fragment(s, fitting, below0, g.total, room, multi_resource_);
      for (int c = 0; c < ncand; ++c) {
        const Room after{room.cpu - cands[c].cpu, room.mem - cands[c].mem};
        out[c] += s.count * (before - shape_fragment(s, fit[c], below[c], tot[c], after, multi_resource_));
      }
    }
  }
}

int64_t FragModel::fragment(const Node& n) const {
  const NodeGpus g(n);
  const Room room{n.cpu_free().v, n.memory_free().v};
  const uint64_t node_bit = model_bit(n);
  int64_t sum = (always_all_ + unusable(node_bit)) * g.total;
  sum += total_ * stranded(g.total, room.cpu, room.mem);
  const View& shapes = view(node_bit);
  for (const Group& grp : shapes.groups) {
    int fitting = 0;
    int64_t below = 0;
    for (int i = 0; i < g.count; ++i) {
      if (g.free[i] >= grp.milli) ++fitting;
      else below += g.free[i];
    }
    for (uint32_t k = grp.begin; k < grp.end; ++k) {
      const ViewShape& s = shapes.by_milli[k];
      sum += s.count * shape_fragment(s, fitting, below, g.total, room, multi_resource_);
    }
  }
  return sum;
}

namespace {
// True if an ask of `gpus`, `cpu` and `mem`, limited to `models` (empty: any), fits an empty node of
// kind `k`.
bool kind_holds(int gpus, int64_t cpu, int64_t mem, const std::vector<std::string>& models, const NodeKind& k) {
  if (gpus > k.gpus || cpu > k.cpu.v || mem > k.memory.v) return false;
  return models.empty() || std::find(models.begin(), models.end(), k.gpu_model) != models.end();
}
}  // namespace

bool fits_kind(const TypicalShape& s, const NodeKind& k) { return kind_holds(s.gpus, s.cpu, s.mem, s.models, k); }

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
  for (size_t i = 0; i < kinds_.size(); ++i)
    if (same_kind(kinds_[i], n)) return pressure_[i];
  return 0;
}

namespace {
// True if a task like `t` fits an empty node of kind `k` (as fits_kind, with the task's own memory).
bool task_fits_kind(const TaskRequest& t, const NodeKind& k) {
  return kind_holds(t.gpu_count, t.cpu.v, t.memory.v, t.gpu_models, k);
}
}  // namespace

void Reserve::build(const WorkloadProfile& profile, const Scarcity& scarcity) {
  *this = Reserve();
  const std::vector<NodeKind>& nodes = profile.nodes;
  int64_t capacity = 0, demand = 0;  // milli-GPU: the cluster's, and the workload's
  for (const NodeKind& k : nodes) capacity += k.count * k.gpus * 1000;
  for (const WorkloadShape& s : profile.shapes)
    if (s.count > 0 && !s.task.mig()) demand += s.count * s.task.gpu_demand_milli();
  if (capacity <= 0 || demand <= 0) return;
  std::vector<int64_t> whole(nodes.size(), 0), restricted(nodes.size(), 0);
  for (const WorkloadShape& s : profile.shapes) {
    if (s.count <= 0 || !s.task.whole_gpus()) continue;
    int64_t eligible = 0;  // nodes
    bool whole_node = true;
    for (const NodeKind& k : nodes)
      if (task_fits_kind(s.task, k)) eligible += k.count, whole_node = whole_node && k.gpus == s.task.gpu_count;
    if (eligible == 0 || !whole_node) continue;
    // Its pods at the cluster's capacity (count x capacity / demand), per mille of the nodes it fits.
    const int64_t per_mille = int64_t(__int128(s.count) * capacity * 1000 / (__int128(demand) * eligible));
    for (size_t i = 0; i < nodes.size(); ++i)
      if (task_fits_kind(s.task, nodes[i])) whole[i] += per_mille;
  }
  const std::vector<int64_t>& pressure = scarcity.by_kind();
  bool any = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    whole[i] = std::min<int64_t>(whole[i], 1000);
    if (pressure.size() == nodes.size()) restricted[i] = std::min<int64_t>(pressure[i], 1000);
    any = any || whole[i] > 0 || restricted[i] > 0;
  }
  if (!any) return;
  kinds_ = nodes;
  whole_ = std::move(whole);
  restricted_ = std::move(restricted);
}

int64_t Reserve::slot(NodeId id) {
  // splitmix64's finaliser: neighbouring ids land far apart.
  uint64_t z = uint64_t(id.value) + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return int64_t((z ^ (z >> 31)) % 1000);
}

bool Reserve::keeps(const Node& n, const TaskRequest& t) const {
  if (kinds_.empty() || n.cpu_used.v != 0 || n.memory_used.v != 0 || n.gpus.empty() ||
      n.idle_gpus != int(n.gpus.size()))
    return false;  // touched (or without GPUs to keep)
  for (size_t i = 0; i < kinds_.size(); ++i) {
    if (!same_kind(kinds_[i], n)) continue;
    const int64_t at = slot(n.id);
    if (at < restricted_[i]) return true;
    const bool takes_node = t.whole_gpus() && t.gpu_count == int(n.gpus.size());
    return at < whole_[i] && !takes_node;
  }
  return false;
}

}  // namespace tessera::policies
