#include "core/placement/fit.h"

#include <algorithm>

namespace tessera {

const char* misfit_name(Misfit m) {
  switch (m) {
    case Misfit::kFits: return "fits";
    case Misfit::kUnschedulable: return "node unschedulable";
    case Misfit::kGpuModel: return "GPU model not allowed";
    case Misfit::kPool: return "pool not allowed for this job";
    case Misfit::kDataPool: return "the job's datasets or volumes are not on this node's pool";
    case Misfit::kNeverCpu: return "CPU capacity too small";
    case Misfit::kNeverMemory: return "memory capacity too small";
    case Misfit::kNeverGpus: return "too few (MIG-capable) GPUs";
    case Misfit::kCpu: return "not enough free CPU";
    case Misfit::kMemory: return "not enough free memory";
    case Misfit::kGpus: return "not enough free GPU";
  }
  return "?";
}

bool model_named(const GpuModel* m, const TaskRequest& t) {
  if (!m) return false;
  for (const std::string& want : t.gpu_models) {
    if (want == m->name) return true;
    for (const std::string& a : m->aliases)
      if (want == a) return true;
  }
  return false;
}

namespace {
bool mig_slot_available(const Gpu& g, const MigProfile& p) {
  if (!g.mig_enabled || g.health != GpuHealth::kHealthy) return false;
  for (const MigInstance& m : g.mig.instances())
    if (!m.in_use && m.profile_id == p.id) return true;
  return g.mig.can_create_anywhere(p) || g.mig.reclaim_start(p, nullptr) >= 0;
}
}  // namespace

const MigProfile* resolve_mig_profile(const Node& n, const TaskRequest& t) {
  const GpuModel* m = n.gpu_model();
  return m ? m->find_profile(t.mig_profile) : nullptr;
}

bool gpu_fits_share(const Gpu& g, const TaskRequest& t) {
  return g.free_milli() >= t.milli_per_gpu.v && (t.gpu_memory.v == 0 || g.free_memory() >= t.gpu_memory);
}

int gpu_count_fitting(const Node& n, const TaskRequest& t) {
  if (t.whole_gpus()) return n.idle_gpus;
  int c = 0;
  if (t.mig()) {
    const MigProfile* p = resolve_mig_profile(n, t);
    if (!p) return 0;
    for (const Gpu& g : n.gpus) c += mig_slot_available(g, *p) ? 1 : 0;
    return c;
  }
  for (const Gpu& g : n.gpus) c += gpu_fits_share(g, t) ? 1 : 0;
  return c;
}

Misfit check_fit(const Node& n, const TaskRequest& t) {
  if (!n.schedulable) return Misfit::kUnschedulable;
  if (!t.cpu_only() && (n.gpus.empty() || !model_allowed(n.gpu_model(), t))) return Misfit::kGpuModel;
  if (!(t.pool_kinds & pool_kind_bit(n.pool_kind))) return Misfit::kPool;
  if (!t.data_pool_allowed(n.pool)) return Misfit::kDataPool;
  if (n.cpu_capacity < t.cpu) return Misfit::kNeverCpu;
  if (n.memory_capacity < t.memory) return Misfit::kNeverMemory;
  if (t.mig()) {
    const MigProfile* p = resolve_mig_profile(n, t);
    if (!p || std::none_of(n.gpus.begin(), n.gpus.end(), [](const Gpu& g) { return g.mig_enabled; }))
      return Misfit::kNeverGpus;
  } else if (t.gpu_count > 0) {
    const int usable = int(std::count_if(n.gpus.begin(), n.gpus.end(), [](const Gpu& g) { return !g.mig_enabled; }));
    if (usable < t.gpu_count || (t.gpu_memory.v > 0 && n.gpu_model()->memory < t.gpu_memory))
      return Misfit::kNeverGpus;
  }
  if (n.cpu_free() < t.cpu) return Misfit::kCpu;
  if (n.memory_free() < t.memory) return Misfit::kMemory;
  if (t.mig()) {
    const MigProfile* p = resolve_mig_profile(n, t);
    return std::any_of(n.gpus.begin(), n.gpus.end(), [&](const Gpu& g) { return mig_slot_available(g, *p); })
               ? Misfit::kFits
               : Misfit::kGpus;
  }
  if (t.gpu_count > 0 && gpu_count_fitting(n, t) < t.gpu_count) return Misfit::kGpus;
  return Misfit::kFits;
}

bool pick_lowest_idle(const Node& n, const TaskRequest& t, GpuPick& out) {
  out = GpuPick{};
  for (const Gpu& g : n.gpus) {
    if (out.count == t.gpu_count) break;
    if (g.idle()) out.add(g.index);
  }
  return out.count == t.gpu_count;
}

bool pick_best_fit_share(const Node& n, const TaskRequest& t, GpuPick& out) {
  out = GpuPick{};
  // gpu_count shares: take the tightest-fitting GPUs one by one (lowest index on ties).
  std::array<bool, kMaxGpusPerNode> used{};
  for (int k = 0; k < t.gpu_count; ++k) {
    int best = -1;
    for (const Gpu& g : n.gpus) {
      if (used[g.index] || !gpu_fits_share(g, t)) continue;
      if (best < 0 || g.free_milli() < n.gpus[best].free_milli()) best = g.index;
    }
    if (best < 0) return false;
    used[best] = true;
    out.add(uint16_t(best));
  }
  return true;
}

bool pick_mig_first_fit(const Node& n, const TaskRequest& t, GpuPick& out) {
  out = GpuPick{};
  const MigProfile* p = resolve_mig_profile(n, t);
  if (!p) return false;
  for (const Gpu& g : n.gpus) {
    if (!g.mig_enabled || g.health != GpuHealth::kHealthy) continue;
    for (const MigInstance& m : g.mig.instances()) {
      if (!m.in_use && m.profile_id == p->id) {
        out.add(g.index);
        out.mig_start = int8_t(m.start);
        return true;
      }
    }
  }
  for (const Gpu& g : n.gpus) {
    if (!g.mig_enabled || g.health != GpuHealth::kHealthy) continue;
    MigLayout trial = g.mig;
    if (auto s = trial.create_first_fit(*p); s.ok()) {
      out.add(g.index);
      out.mig_start = int8_t(*s);
      out.mig_create = true;
      return true;
    }
  }
  for (const Gpu& g : n.gpus) {
    if (!g.mig_enabled || g.health != GpuHealth::kHealthy) continue;
    uint8_t destroy = 0;
    if (const int s = g.mig.reclaim_start(*p, &destroy); s >= 0) {
      out.add(g.index);
      out.mig_start = int8_t(s);
      out.mig_create = true;
      out.mig_destroy = destroy;
      return true;
    }
  }
  return false;
}

bool pick_default(const Node& n, const TaskRequest& t, GpuPick& out) {
  if (t.cpu_only()) {
    out = GpuPick{};
    return true;
  }
  if (t.mig()) return pick_mig_first_fit(n, t, out);
  if (t.whole_gpus()) return pick_lowest_idle(n, t, out);
  return pick_best_fit_share(n, t, out);
}

TaskPlacement make_placement(const Node& n, const TaskRequest& t, const GpuPick& pick) {
  TaskPlacement p;
  p.node = n.id;
  p.cpu = t.cpu;
  p.memory = t.memory;
  p.task_class = task_class(t);
  for (int i = 0; i < pick.count; ++i) {
    GpuGrant g;
    g.gpu = pick.gpus[i];
    if (t.mig()) {
      const MigProfile* prof = resolve_mig_profile(n, t);
      g.kind = GrantKind::kMig;
      g.mig_profile = prof->id;
      g.mig_start = uint8_t(pick.mig_start);
      g.mig_create = pick.mig_create;
      g.mig_destroy = pick.mig_destroy;
      g.milli = MilliGpu(mig_milli(*n.gpus[g.gpu].model, prof->id));
    } else if (t.whole_gpus()) {
      g.kind = GrantKind::kWhole;
    } else {
      g.kind = GrantKind::kShare;
      g.milli = t.milli_per_gpu;
      g.memory = t.gpu_memory;
    }
    p.gpus.push_back(g);
  }
  return p;
}

}  // namespace tessera
