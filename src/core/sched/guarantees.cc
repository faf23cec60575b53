// The cycle's side of what queues are owed: which pending jobs could start on the free GPUs now
// (their leaf's usable demand, GuaranteeLedger::add_usable) and which nodes could host a task. The
// guarantee questions themselves are the GuaranteeLedger's (guarantee_ledger.h).
#include "core/sched/cycle.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tessera::sched {

bool could_host(const CycleState& cs, const Node& n, const TaskRequest& t) {
  if (!n.schedulable || n.gpus.empty() || n.cpu_capacity < t.cpu || n.memory_capacity < t.memory) return false;
  if (!t.pool_kind_allowed(n.pool_kind) || !t.data_pool_allowed(n.pool)) return false;
  const GpuModel* m = n.gpu_model();
  return m && (t.gpu_models.empty() || std::any_of(t.gpu_models.begin(), t.gpu_models.end(), [&](const std::string& x) {
                 auto f = cs.work.catalog().find(x);
                 return f.ok() && f.value() == m;
               }));
}

// Could the pending job start on the free GPUs, with those of jobs already leaving (ignoring other jobs)? MIG requests count
// as able (the MIG planner turns idle GPUs into the slices they need); whole-GPU and shared tasks
// when the nodes they fit on hold enough of them.
bool fits_free_now(const CycleState& cs, const Entry& e, int64_t* room) {
  const Gang g = gang_of(cs, e);
  const TaskRequest& t = g.task;
  if (t.mig()) return true;
  // Asked before anything is placed: the answer depends on the shape alone (one scan per shape).
  const std::string key = shape_key(g);
  if (auto it = cs.fits_free_memo.find(key); it != cs.fits_free_memo.end()) {
    if (room) *room = it->second.room;
    return it->second.fits;
  }
  CycleState::FreeFit& f = cs.fits_free_memo[key];
  f.fits = fits_free_scan(cs, g, &f.room);
  if (room) *room = f.room;
  return f.fits;
}

const std::vector<std::string>* usable_classes(CycleState& cs, const Entry& e) {
  if (!e.classes || e.classes->empty() || e.mig || e.job->gang.varied()) return e.classes;
  auto [it, fresh] = cs.usable_classes_memo.try_emplace(e.shape);
  if (fresh) {
    // A gang may span classes: a class is usable where its free GPUs hold one of its tasks.
    Gang g = gang_of(cs, e);
    g.tasks = 1;
    g.min_tasks = 0;
    g.topology = TopologyConstraint{};
    const std::vector<std::string> models = allowed_models(cs, g.task);
    for (const std::string& c : *e.classes) {
      g.task.gpu_models.clear();
      for (const std::string& m : models)
        if (model_class_of(cs, m) == c) g.task.gpu_models.push_back(m);
      if (!g.task.gpu_models.empty() && fits_free_scan(cs, g)) it->second.push_back(c);
    }
  }
  return &it->second;
}

bool fits_free_scan(const CycleState& cs, const Gang& g, int64_t* room_out, const std::vector<NodeId>* only) {
  const TaskRequest& t = g.task;
  if (room_out) *room_out = -1;
  // A gang bound to one domain (a node, a leaf) counts the room of one domain at a time.
  const NetworkLevels& net = cs.work.network();
  int level = -1;
  if (g.topology.mode == TopologyMode::kRequired && g.tasks > 1) {
    auto li = net.level_index(g.topology.level);
    if (!li.ok()) return false;
    level = *li;
  }
  auto domain = [&](const Node& n) -> uint32_t {
    if (level < 0) return 0;
    return level == net.count() || size_t(level) >= n.path.size() ? n.id.value : n.path[size_t(level)];
  };
  // Room per domain: tasks (milli-GPU for tasks that differ); one counter without a domain.
  std::unordered_map<uint32_t, int64_t> by_domain;
  int64_t anywhere = 0;
  auto room = [&](const Node& n) -> int64_t& { return level < 0 ? anywhere : by_domain[domain(n)]; };
  // Visits every node, or those of `only` (their room alone), until `f` says the shape fits.
  auto any_node = [&](auto&& f) {
    if (only) {
      for (NodeId n : *only)
        if (f(cs.work.node(n))) return true;
    } else {
      for (const Node& n : cs.work.nodes())
        if (f(n)) return true;
    }
    return false;
  };
  // Without a domain, a shape that does not fit leaves its whole room counted (`room_out`).
  auto done = [&](bool fits) {
    if (room_out && level < 0) *room_out = anywhere;
    return fits;
  };
  if (g.varied()) {  // tasks that differ: the free whole GPUs of the models it may use cover all of them
    if (g.total_gpu_milli() == 0) return done(true);
    return done(any_node([&](const Node& n) {
      const int64_t leaving = n.id.value < cs.leaving_milli.size() ? cs.leaving_milli[n.id.value] : 0;
      if (!n.schedulable || !model_allowed(n.gpu_model(), t) || !t.pool_kind_allowed(n.pool_kind) ||
          !t.data_pool_allowed(n.pool))
        return false;
      return (room(n) += n.free_gpu_milli + leaving) >= g.total_gpu_milli();
    }));
  }
  return done(any_node([&](const Node& n) {
    // GPUs of jobs checkpointing on their way out count as free: they are the room a reclaim or a
    // preemption freed, and a job waiting for them is owed them (else a borrower retakes them).
    const int64_t leaving = n.id.value < cs.leaving_milli.size() ? cs.leaving_milli[n.id.value] : 0;
    int64_t tasks = 0;
    if (check_fit(n, t) != Misfit::kFits) {
      if (leaving == 0 || !t.whole_gpus() || !n.schedulable) return false;
      tasks = (n.free_gpu_milli + leaving) / (int64_t(t.gpu_count) * 1000);
    } else {
      tasks = t.whole_gpus() ? std::max<int64_t>(1, (n.free_gpu_milli + leaving) / (int64_t(t.gpu_count) * 1000)) : 1;
    }
    return (room(n) += tasks) >= g.required_tasks();
  }));
}

}  // namespace tessera::sched
