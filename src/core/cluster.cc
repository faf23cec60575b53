#include "core/cluster.h"

#include <algorithm>
#include <string>

namespace tessera {

int task_class(const TaskRequest& r) {
  if (r.mig()) return 9;
  if (r.gpu_share()) return 0;
  if (r.gpu_count >= 1 && r.gpu_count <= 8) return r.gpu_count;
  return r.gpu_count > 8 ? 9 : 0;
}

const std::string* Node::label(const std::string& key) const {
  auto it = std::lower_bound(labels.begin(), labels.end(), key,
                             [](const auto& kv, const std::string& k) { return kv.first < k; });
  return it != labels.end() && it->first == key ? &it->second : nullptr;
}

ClusterState::ClusterState(const GpuCatalog& catalog, NetworkLevels levels)
    : catalog_(&catalog), levels_(std::move(levels)) {}

Result<PoolId> ClusterState::add_pool(Pool pool) {
  const std::string where = "pool '" + pool.name + "': ";
  if (pool.name.empty()) return invalid_argument("pool.name: must not be empty");
  if (pool.price_micro_per_gpu_hour && *pool.price_micro_per_gpu_hour < 0)
    return invalid_argument(where + "price: must be >= 0");
  if (pool.min_nodes < 0 || pool.max_nodes < 0 || (pool.max_nodes > 0 && pool.min_nodes > pool.max_nodes))
    return invalid_argument(where + "min_nodes/max_nodes: need 0 <= min_nodes <= max_nodes (max_nodes 0 = no bound)");
  if (pool.provisioning_delay_s < 0) return invalid_argument(where + "provisioning_delay: must be >= 0");
  if (pool.interruptions_per_million_hours < 0) return invalid_argument(where + "interruption_rate: must be >= 0");
  if (pool.notice_s < 0) return invalid_argument(where + "notice: must be >= 0");
  if (auto f = find_pool(pool.name); f.ok()) {
    if (f->value != 0 || !nodes_.empty()) return invalid_argument(where + "name: already defined");
    pool.id = PoolId(0);
    pools_[0] = std::move(pool);
    return PoolId(0);
  }
  pool.id = PoolId(uint32_t(pools_.size()));
  pools_.push_back(std::move(pool));
  return pools_.back().id;
}

Result<PoolId> ClusterState::find_pool(const std::string& name) const {
  for (const Pool& p : pools_)
    if (p.name == name) return p.id;
  return not_found("no pool named '" + name + "'");
}

Result<NodeId> ClusterState::add_node(NodeSpec spec) {
  const std::string where = "node '" + spec.name + "': ";
  if (spec.name.empty()) return invalid_argument("node.name: must not be empty");
  if (find_node(spec.name).ok()) return invalid_argument(where + "name: already defined");
  if (spec.cpu.v < 0) return invalid_argument(where + "cpu: must be >= 0 milli-CPU");
  if (spec.memory.v < 0) return invalid_argument(where + "memory: must be >= 0 MiB");
  if (spec.gpu_count < 0 || spec.gpu_count > 16)
    return invalid_argument(where + "gpus: must be in 0..16, got " + std::to_string(spec.gpu_count));
  if (int(spec.path.size()) != levels_.count())
    return invalid_argument(where + "path: needs one domain per network level (" + std::to_string(levels_.count()) +
                            "), got " + std::to_string(spec.path.size()));
  Node n;
  n.id = NodeId(uint32_t(nodes_.size()));
  n.name = spec.name;
  n.cpu_capacity = spec.cpu;
  n.memory_capacity = spec.memory;
  n.labels = std::move(spec.labels);
  std::sort(n.labels.begin(), n.labels.end());
  if (!spec.pool.valid()) spec.pool = PoolId(0);
  if (spec.pool.value >= pools_.size())
    return invalid_argument(where + "pool: no pool with id " + std::to_string(spec.pool.value));
  n.pool = spec.pool;
  n.pool_kind = pools_[spec.pool.value].kind;
  for (int l = 0; l < levels_.count(); ++l) n.path.push_back(levels_.intern(l, spec.path[l]));
  if (spec.gpu_count > 0) {
    auto model = catalog_->find(spec.gpu_model);
    if (!model.ok()) return invalid_argument(where + "gpu_model: " + model.error().message);
    for (int i = 0; i < spec.gpu_count; ++i) {
      Gpu g;
      g.index = uint16_t(i);
      g.model = *model;
      g.mig = MigLayout(*model);
      n.gpus.push_back(std::move(g));
    }
    for (int i : spec.mig_gpus) {
      if (i < 0 || i >= spec.gpu_count)
        return invalid_argument(where + "mig_gpus: index " + std::to_string(i) + " is not a GPU of this node");
      if (!(*model)->mig_capable())
        return invalid_argument(where + "mig_gpus: " + (*model)->name + " does not support MIG");
      n.gpus[i].mig_enabled = true;
    }
    if (spec.topology) {
      if (spec.topology->gpu_count() != spec.gpu_count)
        return invalid_argument(where + "topology: describes " + std::to_string(spec.topology->gpu_count()) +
                                " GPUs but the node has " + std::to_string(spec.gpu_count));
      n.topology = std::move(spec.topology);
    } else if ((*model)->nvlink_generation > 0 && spec.gpu_count > 1) {
      n.topology = std::make_shared<NodeTopology>(NodeTopology::nvswitch(spec.gpu_count, 12));
    } else {
      n.topology = std::make_shared<NodeTopology>(NodeTopology::pcie(spec.gpu_count));
    }
  } else if (!spec.mig_gpus.empty()) {
    return invalid_argument(where + "mig_gpus: node has no GPUs");
  }
  refresh_derived(n);
  n.generation = next_generation();
  total_gpus_ += spec.gpu_count;
  by_name_.emplace(n.name, n.id);
  nodes_.push_back(std::move(n));
  reindex(nodes_.back(), false);
  ++capacity_generation_;
  return nodes_.back().id;
}

Result<NodeId> ClusterState::find_node(const std::string& name) const {
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  return not_found("node '" + name + "' does not exist");
}

void ClusterState::reindex(Node& n, bool remove_old) {
  if (index_keys_.size() <= n.id.value) index_keys_.resize(n.id.value + 1, {-1, -1});
  auto& [idle_key, share_key] = index_keys_[n.id.value];
  if (remove_old) {
    if (idle_key >= 0) by_idle_[idle_key].erase(n.id.value);
    if (share_key >= 0) by_max_share_[share_key].erase(n.id.value);
  }
  idle_key = share_key = -1;
  if (mig_keys_.size() <= n.id.value) {
    mig_keys_.resize(n.id.value + 1);
    mig_idle_keys_.resize(n.id.value + 1);
  }
  auto& mkeys = mig_keys_[n.id.value];
  auto& ikeys = mig_idle_keys_[n.id.value];
  for (auto [shape, k] : mkeys) mig_creatable_[shape][k].erase(n.id.value);
  for (uint8_t shape : ikeys) mig_idle_[shape].erase(n.id.value);
  mkeys.clear();
  ikeys.clear();
  if (!n.schedulable) return;
  for (const Gpu& g : n.gpus) {
    if (!g.mig_enabled || g.health != GpuHealth::kHealthy) continue;
    for (const MigProfile& p : g.model->mig_profiles) {
      if (!g.mig.can_create_anywhere(p) && g.mig.reclaim_start(p, nullptr) < 0) continue;
      const uint8_t shape = uint8_t(mig_shape(p)), k = uint8_t(g.mig.free_memory_slices());
      auto it = std::find_if(mkeys.begin(), mkeys.end(), [&](auto& e) { return e.first == shape; });
      if (it == mkeys.end()) mkeys.push_back({shape, k});
      else it->second = std::min(it->second, k);
    }
    for (const MigInstance& m : g.mig.instances()) {
      if (m.in_use) continue;
      const uint8_t shape = uint8_t(mig_shape(*g.model->find_profile_id(m.profile_id)));
      if (std::find(ikeys.begin(), ikeys.end(), shape) == ikeys.end()) ikeys.push_back(shape);
    }
  }
  for (auto [shape, k] : mkeys) mig_creatable_[shape][k].insert(n.id.value);
  for (uint8_t shape : ikeys) mig_idle_[shape].insert(n.id.value);
  idle_key = int8_t(std::min(n.idle_gpus, 16));
  by_idle_[idle_key].insert(n.id.value);
  int64_t best = -1;
  for (const Gpu& g : n.gpus)
    if (!g.idle() && g.free_milli() > 0) best = std::max(best, g.free_milli());
  if (n.idle_gpus > 0) share_key = 100;
  else if (best > 0) share_key = int8_t(best / 10);
  if (share_key >= 0) by_max_share_[share_key].insert(n.id.value);
}

void ClusterState::refresh_derived(Node& n) {
  n.idle_gpus = 0;
  n.free_gpu_milli = 0;
  for (const Gpu& g : n.gpus) {
    n.idle_gpus += g.idle() ? 1 : 0;
    n.free_gpu_milli += g.free_milli();
  }
}

Status ClusterState::check_on(const Node& n, const TaskPlacement& p) {
  const std::string where = "node '" + n.name + "': ";
  if (p.cpu.v < 0 || p.memory.v < 0) return invalid_argument(where + "negative CPU or memory in placement");
  if (n.cpu_used.v + p.cpu.v > n.cpu_capacity.v)
    return Error{ErrorCode::kResourceExhausted, where + "CPU: needs " + std::to_string(p.cpu.v) + "m, free " +
                                                    std::to_string(n.cpu_free().v) + "m"};
  if (n.memory_used.v + p.memory.v > n.memory_capacity.v)
    return Error{ErrorCode::kResourceExhausted, where + "memory: needs " + std::to_string(p.memory.v) +
                                                    " MiB, free " + std::to_string(n.memory_free().v) + " MiB"};
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    const GpuGrant& gr = p.gpus[i];
    for (size_t j = 0; j < i; ++j)
      if (p.gpus[j].gpu == gr.gpu) return invalid_argument(where + "GPU " + std::to_string(gr.gpu) + " granted twice");
    if (gr.gpu >= n.gpus.size()) return invalid_argument(where + "GPU " + std::to_string(gr.gpu) + " does not exist");
    const Gpu& g = n.gpus[gr.gpu];
    const std::string gw = where + "GPU " + std::to_string(gr.gpu) + ": ";
    if (g.health != GpuHealth::kHealthy) return failed_precondition(gw + "unhealthy");
    switch (gr.kind) {
      case GrantKind::kWhole:
        if (!g.idle()) return Error{ErrorCode::kResourceExhausted, gw + "not idle"};
        break;
      case GrantKind::kShare:
        if (g.mig_enabled || g.whole_held) return Error{ErrorCode::kResourceExhausted, gw + "not shareable now"};
        if (gr.milli.v < 1 || gr.milli.v > 1000) return invalid_argument(gw + "share must be 1..1000 milli");
        if (g.shared_milli.v + gr.milli.v > 1000)
          return Error{ErrorCode::kResourceExhausted, gw + "share of " + std::to_string(gr.milli.v) +
                                                          " milli exceeds the " + std::to_string(g.free_milli()) +
                                                          " left"};
        if (gr.memory.v < 0 || g.shared_memory.v + gr.memory.v > g.model->memory.v)
          return Error{ErrorCode::kResourceExhausted, gw + "GPU memory share exceeds the GPU's memory"};
        break;
      case GrantKind::kMig: {
        if (!g.mig_enabled) return failed_precondition(gw + "not in MIG mode");
        const MigProfile* prof = g.model->find_profile_id(gr.mig_profile);
        if (!prof) return invalid_argument(gw + "unknown MIG profile id " + std::to_string(gr.mig_profile));
        if (gr.mig_create && gr.mig_destroy) {
          MigLayout trial = g.mig;
          for (int st = 0; st < 8; ++st)
            if (gr.mig_destroy >> st & 1)
              if (Status s = trial.destroy(st); !s.ok()) return Error{ErrorCode::kResourceExhausted, gw + s.message()};
          if (!trial.can_create(*prof, gr.mig_start))
            return Error{ErrorCode::kResourceExhausted, gw + prof->name + " cannot be created at slice " +
                                                            std::to_string(gr.mig_start) + " even after reconfiguring"};
        } else if (gr.mig_create) {
          if (!g.mig.can_create(*prof, gr.mig_start))
            return Error{ErrorCode::kResourceExhausted, gw + prof->name + " cannot be created at slice " +
                                                            std::to_string(gr.mig_start)};
        } else {
          auto it = std::find_if(g.mig.instances().begin(), g.mig.instances().end(),
                                 [&](const MigInstance& m) { return m.start == gr.mig_start; });
          if (it == g.mig.instances().end() || it->profile_id != gr.mig_profile || it->in_use)
            return Error{ErrorCode::kResourceExhausted,
                         gw + "no idle " + prof->name + " instance at slice " + std::to_string(gr.mig_start)};
        }
        break;
      }
    }
  }
  return {};
}

void ClusterState::apply_on(Node& n, const TaskPlacement& p) {
  n.cpu_used += p.cpu;
  n.memory_used += p.memory;
  for (const GpuGrant& gr : p.gpus) {
    Gpu& g = n.gpus[gr.gpu];
    switch (gr.kind) {
      case GrantKind::kWhole: g.whole_held = true; break;
      case GrantKind::kShare:
        g.shared_milli += gr.milli;
        g.shared_memory += gr.memory;
        ++g.share_count;
        break;
      case GrantKind::kMig: {
        for (int st = 0; st < 8; ++st)
          if (gr.mig_destroy >> st & 1) {
            Status s = g.mig.destroy(st);
            assert(s.ok());
            (void)s;
          }
        if (gr.mig_create) {
          Status s = g.mig.create(*g.model->find_profile_id(gr.mig_profile), gr.mig_start);
          assert(s.ok());
          (void)s;
        }
        Status s = g.mig.set_in_use(gr.mig_start, true);
        assert(s.ok());
        (void)s;
        break;
      }
    }
  }
  if (!p.gpus.empty()) ++n.task_classes[p.task_class];
  refresh_derived(n);
}

void ClusterState::release_on(Node& n, const TaskPlacement& p) {
  n.cpu_used -= p.cpu;
  n.memory_used -= p.memory;
  for (const GpuGrant& gr : p.gpus) {
    Gpu& g = n.gpus[gr.gpu];
    switch (gr.kind) {
      case GrantKind::kWhole: g.whole_held = false; break;
      case GrantKind::kShare:
        g.shared_milli -= gr.milli;
        g.shared_memory -= gr.memory;
        --g.share_count;
        break;
      case GrantKind::kMig: {
        Status s = g.mig.set_in_use(gr.mig_start, false);
        assert(s.ok());
        (void)s;
        break;
      }
    }
  }
  if (!p.gpus.empty()) --n.task_classes[p.task_class];
  refresh_derived(n);
}

int64_t mig_milli(const GpuModel& model, int profile_id) {
  const MigProfile* p = model.find_profile_id(profile_id);
  return p && model.compute_slices > 0 ? int64_t(p->compute_slices) * 1000 / model.compute_slices : 0;
}

Status ClusterState::can_apply(const TaskPlacement& p) const {
  if (p.node.value >= nodes_.size()) return invalid_argument("placement names a node that does not exist");
  return check_on(nodes_[p.node.value], p);
}

Status ClusterState::apply(const TaskPlacement& p) {
  if (Status s = can_apply(p); !s.ok()) return s;
  Node& n = nodes_[p.node.value];
  apply_on(n, p);
  n.generation = next_generation();
  reindex(n, true);
  allocated_milli_ += milli_held(p);
  return {};
}

Status ClusterState::each_or_none(const std::vector<TaskPlacement>& ps, Status (ClusterState::*step)(const TaskPlacement&),
                                  Status (ClusterState::*undo)(const TaskPlacement&)) {
  for (size_t done = 0; done < ps.size(); ++done) {
    if (Status s = (this->*step)(ps[done]); !s.ok()) {
      while (done > 0) {
        Status r = (this->*undo)(ps[--done]);
        assert(r.ok());
        (void)r;
      }
      return s;
    }
  }
  return {};
}

Status ClusterState::apply_all(const std::vector<TaskPlacement>& ps) {
  const MigLayouts before = mig_layouts_changed_by(ps);
  Status s = each_or_none(ps, &ClusterState::apply, &ClusterState::release);
  if (!s.ok()) restore_mig(before);  // nothing the tasks applied before the failure created stays
  return s;
}

ClusterState::MigLayouts ClusterState::mig_layouts_changed_by(const std::vector<TaskPlacement>& ps) const {
  MigLayouts out;
  for (const TaskPlacement& p : ps)
    for (const GpuGrant& gr : p.gpus) {
      if (gr.kind != GrantKind::kMig || (!gr.mig_create && gr.mig_destroy == 0)) continue;
      if (p.node.value >= nodes_.size() || gr.gpu >= nodes_[p.node.value].gpus.size()) continue;
      const GpuRef ref{p.node, gr.gpu};
      if (std::none_of(out.begin(), out.end(), [&](const auto& o) { return o.first == ref; }))
        out.emplace_back(ref, nodes_[p.node.value].gpus[gr.gpu].mig);
    }
  return out;
}

Status ClusterState::undo_all(const std::vector<TaskPlacement>& ps, const MigLayouts& before) {
  if (Status s = release_all(ps); !s.ok()) return s;
  restore_mig(before);
  return {};
}

void ClusterState::restore_mig(const MigLayouts& before) {
  for (const auto& [ref, layout] : before) {
    Node& n = nodes_[ref.node.value];
    n.gpus[ref.index].mig = layout;
    refresh_derived(n);
    n.generation = next_generation();
    reindex(n, true);
  }
}

Status ClusterState::release_all(const std::vector<TaskPlacement>& ps) {
  return each_or_none(ps, &ClusterState::release, &ClusterState::apply);
}

Status ClusterState::release(const TaskPlacement& p) {
  if (p.node.value >= nodes_.size()) return invalid_argument("placement names a node that does not exist");
  Node& n = nodes_[p.node.value];
  if (p.cpu.v > n.cpu_used.v || p.memory.v > n.memory_used.v)
    return failed_precondition("node '" + n.name + "': release of more CPU/memory than is in use");
  for (const GpuGrant& gr : p.gpus) {
    if (gr.gpu >= n.gpus.size()) return invalid_argument("release names a GPU that does not exist");
    const Gpu& g = n.gpus[gr.gpu];
    bool held = gr.kind == GrantKind::kWhole   ? g.whole_held
                : gr.kind == GrantKind::kShare ? g.shared_milli.v >= gr.milli.v && g.share_count > 0
                                               : std::any_of(g.mig.instances().begin(), g.mig.instances().end(),
                                                             [&](const MigInstance& m) {
                                                               return m.start == gr.mig_start && m.in_use;
                                                             });
    if (!held)
      return failed_precondition("node '" + n.name + "' GPU " + std::to_string(gr.gpu) +
                                 ": release of a grant that is not held");
  }
  release_on(n, p);
  n.generation = next_generation();
  reindex(n, true);
  allocated_milli_ -= milli_held(p);
  return {};
}

Status ClusterState::set_health(GpuRef gpu, GpuHealth h) {
  if (gpu.node.value >= nodes_.size() || gpu.index >= nodes_[gpu.node.value].gpus.size())
    return invalid_argument("set_health: no such GPU");
  Node& n = nodes_[gpu.node.value];
  n.gpus[gpu.index].health = h;
  ++capacity_generation_;
  refresh_derived(n);
  n.generation = next_generation();
  reindex(n, true);
  return {};
}

Status ClusterState::set_schedulable(NodeId id, bool schedulable) {
  if (id.value >= nodes_.size()) return invalid_argument("set_schedulable: no such node");
  nodes_[id.value].schedulable = schedulable;  // not a capacity change: see capacity_generation()
  nodes_[id.value].generation = next_generation();
  reindex(nodes_[id.value], true);
  return {};
}

Status ClusterState::destroy_mig_instance(GpuRef gpu, int start) {
  if (gpu.node.value >= nodes_.size() || gpu.index >= nodes_[gpu.node.value].gpus.size())
    return invalid_argument("destroy_mig_instance: no such GPU");
  Node& n = nodes_[gpu.node.value];
  if (Status s = n.gpus[gpu.index].mig.destroy(start); !s.ok()) return s;
  n.generation = next_generation();
  reindex(n, true);
  return {};
}

Status ClusterState::set_mig_layout(GpuRef gpu, bool enable_mig, const std::vector<MigInstance>& layout) {
  if (gpu.node.value >= nodes_.size() || gpu.index >= nodes_[gpu.node.value].gpus.size())
    return invalid_argument("set_mig_layout: no such GPU");
  Node& n = nodes_[gpu.node.value];
  Gpu& g = n.gpus[gpu.index];
  const std::string gw = "node '" + n.name + "' GPU " + std::to_string(gpu.index) + ": ";
  if (g.whole_held || g.share_count > 0) return failed_precondition(gw + "not idle (held whole or shared)");
  for (const MigInstance& m : g.mig.instances())
    if (m.in_use)
      return failed_precondition(gw + "not idle (MIG instance at slice " + std::to_string(m.start) + " in use)");
  if (!enable_mig && !layout.empty()) return invalid_argument(gw + "a whole GPU takes no MIG layout");
  if (enable_mig && (!g.model || !g.model->mig_capable()))
    return invalid_argument(gw + (g.model ? g.model->name : std::string("GPU")) + " does not support MIG");
  MigLayout next(g.model);
  for (const MigInstance& m : layout) {
    const MigProfile* p = g.model->find_profile_id(m.profile_id);
    if (!p) return invalid_argument(gw + "unknown MIG profile id " + std::to_string(m.profile_id));
    if (m.in_use) return invalid_argument(gw + "instances of a new layout must be idle");
    if (Status s = next.create(*p, m.start); !s.ok()) return invalid_argument(gw + s.message());
  }
  g.mig_enabled = enable_mig;
  g.mig = std::move(next);
  ++capacity_generation_;
  refresh_derived(n);
  n.generation = next_generation();
  reindex(n, true);
  return {};
}

Status ClusterState::check_invariants() const {
  int64_t milli = 0;
  for (const Node& n : nodes_) {
    const std::string where = "node '" + n.name + "': ";
    if (n.cpu_used.v < 0 || n.cpu_used.v > n.cpu_capacity.v) return failed_precondition(where + "CPU over-allocated");
    if (n.memory_used.v < 0 || n.memory_used.v > n.memory_capacity.v)
      return failed_precondition(where + "memory over-allocated");
    int idle = 0;
    int64_t free = 0;
    for (const Gpu& g : n.gpus) {
      const std::string gw = where + "GPU " + std::to_string(g.index) + ": ";
      if (g.shared_milli.v < 0 || g.shared_milli.v > 1000) return failed_precondition(gw + "shares exceed 1000 milli");
      if (g.shared_memory.v < 0 || g.shared_memory.v > g.model->memory.v)
        return failed_precondition(gw + "shares exceed the GPU's memory");
      if ((g.share_count == 0) != (g.shared_milli.v == 0 && g.shared_memory.v == 0))
        return failed_precondition(gw + "share count disagrees with shared amounts");
      if (g.whole_held && (g.share_count > 0 || g.mig_enabled))
        return failed_precondition(gw + "held whole while shared or in MIG mode");
      if (g.mig_enabled && g.share_count > 0) return failed_precondition(gw + "shared while in MIG mode");
      if (!g.mig_enabled && !g.mig.instances().empty())
        return failed_precondition(gw + "MIG instances on a GPU not in MIG mode");
      if (Status s = g.mig.check(); !s.ok()) return failed_precondition(gw + s.message());
      idle += g.idle() ? 1 : 0;
      free += g.free_milli();
      milli += g.whole_held ? 1000 : g.shared_milli.v;
      for (const MigInstance& m : g.mig.instances())
        if (m.in_use) milli += mig_milli(*g.model, m.profile_id);
    }
    if (idle != n.idle_gpus || free != n.free_gpu_milli) return failed_precondition(where + "derived counters stale");
    const auto [ik, sk] = index_keys_[n.id.value];
    if (n.schedulable != (ik >= 0) || (ik >= 0 && (ik != std::min(n.idle_gpus, 16) || !by_idle_[ik].count(n.id.value))) ||
        (sk >= 0 && !by_max_share_[sk].count(n.id.value)))
      return failed_precondition(where + "candidate index stale");
    for (auto [shape, k] : mig_keys_[n.id.value])
      if (!mig_creatable_[shape][k].count(n.id.value)) return failed_precondition(where + "MIG candidate index stale");
  }
  if (milli != allocated_milli_) return failed_precondition("cluster allocated GPU milli counter is stale");
  return {};
}

}  // namespace tessera
