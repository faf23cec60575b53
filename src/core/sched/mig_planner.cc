#include "core/sched/mig_planner.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

namespace tessera {
namespace {

// A MIG GPU as the demand simulation sees it: a copy of its layout that is consumed in place.
struct SimGpu {
  GpuRef ref;
  const GpuModel* model = nullptr;
  MigLayout layout;
  bool all_idle = true;  // no instance in use in the real cluster
  bool served = false;   // the simulation gave it some pending request
  bool reconfiguring = false;  // its new layout is not ready yet: never changed again now
};

// A candidate for a change.
struct Candidate {
  GpuRef ref;
  const GpuModel* model = nullptr;
  bool was_mig = false;
  int node_idle_whole = 0;
};

// The "N" of "Ng" / "Ng.xxgb": used to order requests largest first, independently of the model.
int leading_compute(const std::string& s) {
  int n = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') break;
    n = n * 10 + (ch - '0');
    if (n > 1000) break;
  }
  return n;
}

// May request d use GPU g (of model m)? Its node's pool kind and the model must be allowed.
bool gpu_allowed(const ClusterState& c, const MigDemand& d, GpuRef g, const GpuModel* m) {
  if (!(d.pool_kinds & pool_kind_bit(c.node(g.node).pool_kind))) return false;
  if (d.gpu_model.empty()) return true;
  auto r = c.catalog().find(d.gpu_model);
  return r.ok() && *r == m;
}

bool all_instances_idle(const MigLayout& l) {
  return std::none_of(l.instances().begin(), l.instances().end(), [](const MigInstance& m) { return m.in_use; });
}

std::string gpu_words(const ClusterState& c, GpuRef g) {
  return "GPU " + std::to_string(g.index) + " of node " + c.node(g.node).name;
}

std::string layout_words(const GpuModel& model, const std::vector<MigInstance>& l) {
  if (l.empty()) return "no instances";
  std::string s;
  for (const MigInstance& m : l) {
    if (!s.empty()) s += ", ";
    const MigProfile* p = model.find_profile_id(m.profile_id);
    s += (p ? p->name : "profile " + std::to_string(m.profile_id)) + "@" + std::to_string(m.start);
  }
  return s;
}

std::string plural(int n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// Wants merged by profile id on one model, with the demand entries (indices) each serves.
struct Want {
  const MigProfile* profile = nullptr;
  int count = 0;
  std::vector<size_t> entries;
};

}  // namespace

std::vector<MigInstance> design_mig_layout(const GpuModel& model,
                                           const std::vector<std::pair<const MigProfile*, int>>& wants,
                                           bool fill) {
  if (!model.mig_capable()) return {};
  // Largest first: memory slices, then compute slices, then id. Counts capped by max_instances.
  std::vector<std::pair<const MigProfile*, int>> w;
  for (const auto& [p, n] : wants) {
    if (!p || n <= 0) continue;
    w.emplace_back(p, std::min(n, std::max(p->max_instances, 0)));
  }
  std::sort(w.begin(), w.end(), [](const auto& a, const auto& b) {
    return std::tuple(-a.first->memory_slices, -a.first->compute_slices, a.first->id) <
           std::tuple(-b.first->memory_slices, -b.first->compute_slices, b.first->id);
  });

  MigLayout best(&model);
  std::pair<int, int> best_score{0, 0};  // (compute slices placed, instances placed)
  std::vector<int> left(w.size());
  for (size_t i = 0; i < w.size(); ++i) left[i] = w[i].second;

  // Enumerates every layout once: profiles in list order, instances of one profile in start order.
  auto dfs = [&](auto& self, const MigLayout& l, size_t from, int min_start, int compute, int count) -> void {
    if (std::pair(compute, count) > best_score) {
      best_score = {compute, count};
      best = l;
    }
    for (size_t i = from; i < w.size(); ++i) {
      if (left[i] == 0) continue;
      const MigProfile& p = *w[i].first;
      for (int s : l.feasible_starts(p)) {
        if (i == from && s < min_start) continue;
        MigLayout next = l;
        if (!next.create(p, s).ok()) continue;
        --left[i];
        self(self, next, i, s + 1, compute + p.compute_slices, count + 1);
        ++left[i];
      }
    }
  };
  dfs(dfs, MigLayout(&model), 0, 0, 0, 0);

  if (fill && best_score.second > 0) {
    // Most demanded, then smallest, then id: free slices get instances that stay useful.
    std::vector<std::pair<const MigProfile*, int>> f = w;
    for (auto& e : f)
      for (const auto& [p, n] : wants)
        if (p == e.first) e.second = n;  // the uncapped demand
    std::sort(f.begin(), f.end(), [](const auto& a, const auto& b) {
      return std::tuple(-a.second, a.first->memory_slices, a.first->id) <
             std::tuple(-b.second, b.first->memory_slices, b.first->id);
    });
    for (const auto& [p, n] : f) {
      for (std::vector<int> st = best.feasible_starts(*p); !st.empty(); st = best.feasible_starts(*p)) {
        if (!best.create(*p, st.front()).ok()) break;
      }
    }
  }
  return best.instances();
}

std::vector<GpuLayoutChange> plan_mig_layouts(const MigPlanInput& in, const MigPlannerConfig& cfg) {
  std::vector<GpuLayoutChange> out;
  if (!in.cluster || cfg.max_gpus_per_cycle <= 0) return out;
  const ClusterState& c = *in.cluster;
  const std::vector<MigDemand>& demand = in.mig_demand;

  auto too_recent = [&](GpuRef g) {
    auto it = in.last_changed.find(g);
    return it != in.last_changed.end() && in.now - it->second < cfg.min_layout_age;
  };

  // Idle whole GPUs per node and in total; the MIG GPUs the simulation may use.
  std::vector<int> node_idle_whole(c.node_count(), 0);
  int idle_whole_all = 0;
  int idle_whole_capable = 0;
  std::vector<SimGpu> sim;
  for (const Node& n : c.nodes()) {
    if (!n.schedulable) continue;
    for (const Gpu& g : n.gpus) {
      // A GPU still reconfiguring counts as what it is becoming (so a change in progress is not
      // planned twice), but is never a candidate for another change.
      const bool reconfiguring = g.health == GpuHealth::kReconfiguring;
      if (g.idle()) {
        ++node_idle_whole[n.id.value];
        ++idle_whole_all;
        if (g.model && g.model->mig_capable()) ++idle_whole_capable;
      } else if (reconfiguring && !g.mig_enabled) {
        ++idle_whole_all;
      }
      if (g.mig_enabled && (g.health == GpuHealth::kHealthy || reconfiguring) && g.model && g.model->mig_capable()) {
        sim.push_back(SimGpu{GpuRef{n.id, g.index}, g.model, g.mig, all_instances_idle(g.mig), false, reconfiguring});
      }
    }
  }

  // 1. Unmet MIG demand, requests largest first.
  std::vector<size_t> order(demand.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tuple(-leading_compute(demand[a].profile), demand[a].profile, a) <
           std::tuple(-leading_compute(demand[b].profile), demand[b].profile, b);
  });
  std::vector<int> unmet(demand.size(), 0);
  for (size_t i : order) {
    const MigDemand& d = demand[i];
    int& need = unmet[i];
    need = std::max(d.count, 0);
    // idle instances of the profile
    for (SimGpu& s : sim) {
      if (need == 0) break;
      const MigProfile* p = gpu_allowed(c, d, s.ref, s.model) ? s.model->find_profile(d.profile) : nullptr;
      if (!p) continue;
      const std::vector<MigInstance> inst = s.layout.instances();
      for (const MigInstance& m : inst) {
        if (need == 0) break;
        if (m.in_use || m.profile_id != p->id) continue;
        if (!s.layout.set_in_use(m.start, true).ok()) continue;
        --need;
        s.served = true;
      }
    }
    // created on free slices
    for (SimGpu& s : sim) {
      const MigProfile* p = gpu_allowed(c, d, s.ref, s.model) ? s.model->find_profile(d.profile) : nullptr;
      while (p && need > 0) {
        Result<int> at = s.layout.create_first_fit(*p);
        if (!at.ok()) break;
        (void)s.layout.set_in_use(*at, true);
        --need;
        s.served = true;
      }
    }
    // reconfiguration the engine does by itself on GPUs with work running (idle instances destroyed)
    for (SimGpu& s : sim) {
      if (s.all_idle) continue;
      const MigProfile* p = gpu_allowed(c, d, s.ref, s.model) ? s.model->find_profile(d.profile) : nullptr;
      while (p && need > 0) {
        uint8_t destroy = 0;
        const int at = s.layout.reclaim_start(*p, &destroy);
        if (at < 0) break;
        for (int b = 0; b < 8; ++b)
          if (destroy & (1u << b)) (void)s.layout.destroy(b);
        if (!s.layout.create(*p, at).ok()) break;
        (void)s.layout.set_in_use(at, true);
        --need;
        s.served = true;
      }
    }
  }

  // Entirely idle MIG GPUs that no pending request can use as they are.
  std::vector<Candidate> idle_mig;
  for (const SimGpu& s : sim) {
    if (s.all_idle && !s.served && !s.reconfiguring && !too_recent(s.ref))
      idle_mig.push_back(Candidate{s.ref, s.model, true, node_idle_whole[s.ref.node.value]});
  }
  std::vector<bool> taken(idle_mig.size(), false);

  // 2. Training waits: turn idle, useless MIG GPUs back to whole GPUs.
  const int deficit = in.whole_gpu_demand - idle_whole_all;
  if (deficit > 0) {
    std::vector<size_t> idx(idle_mig.size());
    std::iota(idx.begin(), idx.end(), size_t{0});
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return std::tuple(-idle_mig[a].node_idle_whole, idle_mig[a].ref) <
             std::tuple(-idle_mig[b].node_idle_whole, idle_mig[b].ref);
    });
    int turned = 0;
    for (size_t k : idx) {
      if (turned == deficit || int(out.size()) == cfg.max_gpus_per_cycle) break;
      const Candidate& cand = idle_mig[k];
      const Gpu& g = c.node(cand.ref.node).gpus[cand.ref.index];
      GpuLayoutChange ch;
      ch.gpu = cand.ref;
      ch.enable_mig = false;
      ch.reason = plural(in.whole_gpu_demand, "pending whole GPU") + " and only " + std::to_string(idle_whole_all) +
                  " idle; " + gpu_words(c, cand.ref) + " was in MIG mode (" + layout_words(*cand.model, g.mig.instances()) +
                  ") with every instance idle and no pending MIG request it can serve; turned back to a whole GPU";
      ch.ready_at = in.now + cfg.reconfigure_cost;
      out.push_back(std::move(ch));
      taken[k] = true;
      ++turned;
    }
  }

  // 3. Unmet MIG demand: re-layout idle MIG GPUs, then convert spare idle whole GPUs.
  auto any_unmet = [&] { return std::any_of(unmet.begin(), unmet.end(), [](int u) { return u > 0; }); };
  if (!any_unmet()) return out;

  std::vector<Candidate> cands;
  for (size_t k = 0; k < idle_mig.size(); ++k)
    if (!taken[k]) cands.push_back(idle_mig[k]);
  std::vector<Candidate> whole;
  for (const Node& n : c.nodes()) {
    if (!n.schedulable) continue;
    for (const Gpu& g : n.gpus) {
      const GpuRef ref{n.id, g.index};
      if (g.idle() && g.model && g.model->mig_capable() && !too_recent(ref))
        whole.push_back(Candidate{ref, g.model, false, node_idle_whole[n.id.value]});
    }
  }
  std::sort(whole.begin(), whole.end(), [](const Candidate& a, const Candidate& b) {
    return std::tuple(a.node_idle_whole, a.ref) < std::tuple(b.node_idle_whole, b.ref);
  });
  cands.insert(cands.end(), whole.begin(), whole.end());
  int spare_whole = std::max(0, idle_whole_capable - std::max(in.whole_gpu_demand, 0));

  for (const Candidate& cand : cands) {
    if (int(out.size()) == cfg.max_gpus_per_cycle || !any_unmet()) break;
    if (!cand.was_mig && spare_whole == 0) continue;
    // What this model could serve, merged by profile id, in request order.
    std::vector<Want> wants;
    for (size_t i : order) {
      if (unmet[i] == 0 || !gpu_allowed(c, demand[i], cand.ref, cand.model)) continue;
      const MigProfile* p = cand.model->find_profile(demand[i].profile);
      if (!p) continue;
      auto it = std::find_if(wants.begin(), wants.end(), [&](const Want& x) { return x.profile->id == p->id; });
      if (it == wants.end()) {
        wants.push_back(Want{p, 0, {}});
        it = std::prev(wants.end());
      }
      it->count += unmet[i];
      it->entries.push_back(i);
    }
    if (wants.empty()) continue;
    std::vector<std::pair<const MigProfile*, int>> w;
    for (const Want& x : wants) w.emplace_back(x.profile, x.count);
    std::vector<MigInstance> layout = design_mig_layout(*cand.model, w, true);

    // Serve the requests with the new instances.
    std::string served_words;
    int served_total = 0;
    for (Want& x : wants) {
      int have = int(std::count_if(layout.begin(), layout.end(),
                                   [&](const MigInstance& m) { return m.profile_id == x.profile->id; }));
      const int used = std::min(have, x.count);
      if (used == 0) continue;
      if (!served_words.empty()) served_words += ", ";
      served_words += std::to_string(x.count) + " pending " + x.profile->name;
      served_total += used;
      for (size_t i : x.entries) {
        const int take = std::min(have, unmet[i]);
        unmet[i] -= take;
        have -= take;
      }
    }
    if (served_total == 0) continue;

    const Gpu& g = c.node(cand.ref.node).gpus[cand.ref.index];
    GpuLayoutChange ch;
    ch.gpu = cand.ref;
    ch.enable_mig = true;
    ch.layout = std::move(layout);
    ch.reason = served_words + (served_total == 1 ? " instance without room; " : " instances without room; ") +
                gpu_words(c, cand.ref) +
                (cand.was_mig ? " was in MIG mode with only idle instances no pending request can use (" +
                                    layout_words(*cand.model, g.mig.instances()) + ")"
                              : " was idle whole") +
                "; new layout " + layout_words(*cand.model, ch.layout) + ", serving " +
                plural(served_total, "pending instance") + "; out of service for " +
                std::to_string(cfg.reconfigure_cost) + " s";
    ch.ready_at = in.now + cfg.reconfigure_cost;
    out.push_back(std::move(ch));
    if (!cand.was_mig) --spare_whole;
  }
  return out;
}

}  // namespace tessera
