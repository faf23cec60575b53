// The invariants checked after every event of a scenario run and the expectations checked after the
// last cycle at their time (docs/scenarios.md, "Invariants" and "Expectations"). Single-threaded.
#include <algorithm>
#include <set>

#include "core/placement/engine.h"
#include "core/placement/fit.h"
#include "core/sched/job.h"
#include "sim/schedule_sim_run.h"

namespace tessera::sim::detail {

void ScenarioRun::check_invariants(Time t) {
  // (A moved job that did not restart on its held GPUs is reported as its decisions are applied.)
  // 1. The cluster's own invariants.
  if (Status s = cluster_.check_invariants(); !s.ok()) fail(t, "invariant broken: " + s.message());
  // 2. Gangs whole.
  for (const LiveJob& l : jobs_)
    if (holding(l) && int(l.job.placement.size()) < l.job.gang.required_tasks())
      fail(t, "gang " + spec(l).name + " runs partially");
  // 4. Guarantees restored within grace.
  if (cfg_.reclaim && sc_.check_guarantees) check_guarantees(t);
}

// A leaf queue with a pending job that fits in its unused guarantee of class C, while another queue
// borrows C with jobs it may reclaim, gets a job started within reclaim_grace + cycle_interval + 1.
void ScenarioRun::check_guarantees(Time t) {
  auto model_class = [&](const std::string& model) { return cfg_.model_class(model); };
  auto class_of = [&](const std::string& name) -> const PriorityClass* {
    for (const PriorityClass& pc : cfg_.priority_classes)
      if (pc.name == name) return &pc;
    return nullptr;
  };
  std::vector<ClassAmounts> alloc(tree_.size());  // subtree allocation per class
  std::vector<std::vector<const LiveJob*>> running(tree_.size());
  for (const LiveJob& l : jobs_) {
    if (!holding(l)) continue;
    running[l.job.queue.value].push_back(&l);
    for (const TaskPlacement& p : l.job.placement)
      for (const GpuGrant& g : p.gpus) {
        const std::string cls = model_class(cluster_.node(p.node).gpus[g.gpu].model->name);
        for (QueueId a : tree_.path_to_root(l.job.queue)) {
          alloc[a.value]["any"] += g.milli_held();
          if (cls != "any") alloc[a.value][cls] += g.milli_held();
        }
      }
  }
  auto amount = [](const ClassAmounts& m, const std::string& c) {
    auto it = m.find(c);
    return it == m.end() ? int64_t(0) : it->second;
  };
  std::set<std::pair<uint32_t, std::string>> active;
  for (const Queue& q : tree_.queues()) {
    if (!q.leaf()) continue;
    const std::vector<QueueId> own_path = tree_.path_to_root(q.id);
    for (const auto& [cls, guaranteed] : q.guaranteed) {
      if (guaranteed <= 0) continue;
      std::string why;
      for (const LiveJob& l : jobs_) {
        if (!l.arrived || l.job.state != JobState::kPending || l.finished || l.timed_out || l.job.queue != q.id) continue;
        const TaskRequest& tr = l.job.gang.task;
        if (tr.mig() || tr.gpu_demand_milli() <= 0) continue;
        // The job is owed by `cls` if it could be placed there: any class without models, else the
        // class of any one of its models (not only the first listed).
        bool usable = cls == "any" || tr.gpu_models.empty();
        for (const std::string& name : tr.gpu_models) {
          auto m = cluster_.catalog().find(name);
          usable = usable || model_class(m.ok() ? (*m)->name : name) == cls;
        }
        if (!usable) continue;
        // A task that no node of the cluster could hold even empty (too many GPUs for any node of an
        // allowed model, in class `cls`) can never start: nothing is owed to it.
        bool ever = false;
        for (const Node& n : cluster_.nodes()) {
          const GpuModel* m = n.gpu_model();
          if (!m || int(n.gpus.size()) < tr.gpu_count || n.cpu_capacity < tr.cpu || n.memory_capacity < tr.memory) continue;
          if (cls != "any" && model_class(m->name) != cls) continue;
          ever = ever || model_allowed(m, tr);
        }
        if (!ever) continue;
        const int64_t milli = l.job.gang.total_gpu_milli();
        if (amount(alloc[q.id.value], cls) + milli > guaranteed) continue;
        // A job its queue's limits hold back could not start on any GPU: nothing is owed to it.
        bool held_back = false;
        for (QueueId a : own_path) {
          const Queue& aq = tree_.queue(a);
          for (const std::string& c : {std::string("any"), cls})
            if (aq.limit.count(c) && amount(alloc[a.value], c) + milli > aq.limit.at(c)) held_back = true;
        }
        if (held_back) continue;
        const PriorityClass* jpc = class_of(l.job.priority_class);
        // Other queues borrowing `cls` (over its guarantee on a path not shared with q) that run jobs
        // of `cls` this one may reclaim: all of them are candidates.
        std::string borrower;
        std::vector<const LiveJob*> victims;
        for (const Queue& r : tree_.queues()) {
          if (!r.leaf() || r.id == q.id) continue;
          bool borrows = false;
          for (QueueId a : tree_.path_to_root(r.id)) {
            if (std::find(own_path.begin(), own_path.end(), a) != own_path.end()) break;
            if (amount(alloc[a.value], cls) > amount(tree_.queue(a).guaranteed, cls)) borrows = true;
          }
          if (!borrows) continue;
          for (const LiveJob* v : running[r.id.value]) {
            const PriorityClass* vpc = class_of(v->job.priority_class);
            if (!vpc || !jpc || !(vpc->preemptible || vpc->value <= jpc->value)) continue;
            bool in_cls = cls == "any", usable_gpu = false;
            ClassAmounts held;  // what v holds per class ("any" and its GPUs' classes)
            for (const TaskPlacement& p : v->job.placement)
              for (const GpuGrant& g : p.gpus) {
                const GpuModel* gm = cluster_.node(p.node).gpus[g.gpu].model;
                const std::string c = model_class(gm->name);
                in_cls = in_cls || c == cls;
                // A GPU of a model the job may use (else freeing it does not help the job).
                usable_gpu = usable_gpu || model_allowed(gm, tr);
                held["any"] += g.milli_held();
                if (c != "any") held[c] += g.milli_held();
              }
            // Reclaim never takes a queue below its guarantee in another class than the one reclaimed
            // (guarantees in several classes may overlap): v's queue, up to the level it shares with
            // q, keeps those without v.
            bool keeps = true;
            for (const auto& [c, m] : held)
              for (QueueId a : tree_.path_to_root(r.id)) {
                if (c == cls) break;  // in the class reclaimed, borrowing before v goes is enough
                if (std::find(own_path.begin(), own_path.end(), a) != own_path.end()) break;
                keeps = keeps && amount(alloc[a.value], c) - m >= amount(tree_.queue(a).guaranteed, c);
              }
            if (in_cls && usable_gpu && keeps) {
              if (borrower.empty()) borrower = r.name;
              victims.push_back(v);
            }
          }
        }
        // Shapes, as the core's placement engine judges them: with every candidate gone and every
        // job already leaving gone, must J fit? If not (a gang larger than the room, one domain or
        // one GPU model, MIG slices that free no whole GPU, nodes that take no new work), reclaim
        // cannot restore the guarantee and nothing is owed to J now.
        if (!victims.empty() && fits_once_gone(l, victims, t))
          why = spec(l).name + " fits in its unused guarantee while queue " + borrower + " borrows";
        if (!why.empty()) break;
      }
      if (why.empty()) continue;
      active.insert({q.id.value, cls});
      Watch& w = watches_[{q.id.value, cls}];
      if (w.since < 0 || queue_last_start_[q.id.value] > w.since) {  // began, or a job started: a new episode
        w.since = t;
        w.reported = false;
      }
      const Time deadline = w.since + cfg_.reclaim_grace + sc_.cycle_interval + 1;
      if (t > deadline && !w.reported) {
        w.reported = true;
        fail(t, "guarantee not restored: queue " + q.name + " has started nothing since t=" + std::to_string(w.since) +
                    " (deadline t=" + std::to_string(deadline) + ") though " + why + " " + cls);
      }
    }
  }
  for (auto& [k, w] : watches_)
    if (!active.count(k)) w = Watch{};
}

bool ScenarioRun::fits_once_gone(const LiveJob& l, const std::vector<const LiveJob*>& gone, Time t) {
  if (!oracle_policy_) {
    auto p = make_policy(cfg_.policy);
    if (!p.ok()) return true;  // cannot judge shapes: the quota arithmetic alone decides
    oracle_policy_ = std::move(p.value());
  }
  ClusterState c = cluster_;
  auto release = [&](const LiveJob& v) {
    for (const TaskPlacement& p : v.job.placement) (void)c.release(p);
  };
  for (const LiveJob* v : gone) release(*v);
  for (const LiveJob& v : jobs_)
    if (v.job.state == JobState::kCheckpointing && std::find(gone.begin(), gone.end(), &v) == gone.end()) release(v);
  Gang g = l.job.gang;
  g.id = l.job.id;
  g.queue = l.job.queue;
  apply_job_pool_rules(g, l.job, cfg_.pool_rules, t);
  EngineOptions o;
  o.seed = cfg_.seed;
  o.max_scored_nodes = cfg_.max_scored_nodes;
  PlacementEngine engine(*oracle_policy_, o);
  return engine.place(c, g).outcome == Outcome::kPlaced;
}

// Why l's placement does not have the properties e asks for ("" when it does).
std::string ScenarioRun::placement_failure(const Expectation& e, const LiveJob& l) const {
  if (!holding(l)) return l.finished ? "has finished, it holds no GPUs" : "is not placed";
  std::set<uint32_t> nodes;
  for (const TaskPlacement& p : l.job.placement) {
    const Node& n = cluster_.node(p.node);
    nodes.insert(p.node.value);
    if (!e.on_node.empty() && std::find(e.on_node.begin(), e.on_node.end(), n.name) == e.on_node.end())
      return "has a task on node " + n.name;
    if (!e.in_leaf.empty()) {
      bool in = false;
      for (size_t lv = 0; lv < n.path.size(); ++lv)
        in = in || cluster_.network().domain_name(int(lv), n.path[lv]) == e.in_leaf;
      if (!in) {
        std::string path;
        for (size_t lv = 0; lv < n.path.size(); ++lv)
          path += (path.empty() ? "" : "/") + cluster_.network().domain_name(int(lv), n.path[lv]);
        return "has a task on node " + n.name + " (path " + (path.empty() ? "(none)" : path) + "), not in " + e.in_leaf;
      }
    }
    if (!e.on_model.empty()) {
      if (p.gpus.empty()) return "has a task on node " + n.name + " holding no GPU";
      for (const GpuGrant& g : p.gpus) {
        const GpuModel* m = n.gpus[g.gpu].model;
        if (!m || m->name != e.on_model)
          return "holds " + std::string(m ? m->name : "a GPU") + " GPU " + std::to_string(g.gpu) + " on node " + n.name +
                 ", not " + e.on_model;
      }
    }
  }
  if (e.on_nodes > 0 && int(nodes.size()) != e.on_nodes)
    return "spans " + std::to_string(nodes.size()) + " nodes, not " + std::to_string(e.on_nodes);
  if (!e.task_gpus.empty()) {
    std::string held;
    for (size_t i = 0; i < l.job.placement.size(); ++i) held += (i ? ", " : "") + std::to_string(l.job.placement[i].gpus.size());
    bool same = e.task_gpus.size() == l.job.placement.size();
    for (size_t i = 0; same && i < e.task_gpus.size(); ++i) same = int(l.job.placement[i].gpus.size()) == e.task_gpus[i];
    if (!same) return "its tasks hold [" + held + "] GPUs";
  }
  return "";
}

void ScenarioRun::check_expectations(const Decisions& d, Time t) {
  using K = Expectation::Kind;
  std::map<uint32_t, const PendingInfo*> pend;
  for (const PendingInfo& p : d.pending) pend[p.job.value] = &p;
  const std::string when = " (t=" + std::to_string(t) + "): ";
  for (const Expectation& e : sc_.expect) {
    if (e.at != t) continue;
    if (e.kind == K::kMigGpus) {
      int n = 0;
      for (const Node& node : cluster_.nodes())
        for (const Gpu& g : node.gpus) n += g.mig_enabled ? 1 : 0;
      if (n != e.count)
        res_.failures.push_back(e.text + when + std::to_string(n) + " GPUs in MIG mode, not " + std::to_string(e.count));
      continue;
    }
    if (e.kind == K::kPreemptionsAtMost || e.kind == K::kMigChangesAtMost) {
      const std::vector<Time>& at = e.kind == K::kPreemptionsAtMost ? preemption_times_ : mig_change_times_;
      const int n = int(std::count_if(at.begin(), at.end(), [&](Time x) { return x <= t && (!e.since || x > *e.since); }));
      if (n > e.count)
        res_.failures.push_back(e.text + when + std::to_string(n) +
                                (e.kind == K::kPreemptionsAtMost ? " preemptions" : " MIG layout changes") +
                                (e.since ? " since t=" + std::to_string(*e.since) : std::string()) + ", more than " +
                                std::to_string(e.count));
      continue;
    }
    for (size_t k = 0; k < e.jobs.size(); ++k) {
      const std::string& name = e.jobs[k];
      const LiveJob& l = jobs_[by_name_.at(name)];
      const bool running = holding(l);
      std::string f;
      switch (e.kind) {
        case K::kRunning:
          if (!running || l.job.state == JobState::kCheckpointing)
            f = l.job.state == JobState::kCheckpointing ? "is checkpointing to leave, not running" : "is not running";
          break;
        case K::kFinished:
          if (!l.finished) f = l.timed_out ? "timed out, it did not finish" : "has not finished";
          break;
        case K::kTimedOut:
          if (!l.timed_out) f = l.finished ? "finished, it did not time out" : "has not timed out";
          break;
        case K::kPreempted:
          if (l.preempt_decided != t) f = "was not preempted";
          break;
        case K::kNotPreempted:
          if (l.preempt_decided == t) f = "was preempted";
          break;
        case K::kPreemptions:
          if (l.preempted != e.counts[k])
            f = "was preempted " + std::to_string(l.preempted) + " times, not " + std::to_string(e.counts[k]);
          break;
        case K::kPlaced:
          f = placement_failure(e, l);
          break;
        case K::kMigGpus:
        case K::kPreemptionsAtMost:
        case K::kMigChangesAtMost:
          break;
        case K::kPending: {
          auto p = pend.find(l.job.id.value);
          if (p == pend.end()) {
            f = running ? "is running, not pending" : "is not pending";
          } else if (!e.reason_contains.empty() && p->second->reason.find(e.reason_contains) == std::string::npos) {
            f = "waits for \"" + p->second->reason + "\", not \"" + e.reason_contains + "\"";
          } else if (e.queue_position > 0 && p->second->queue_position != e.queue_position) {
            f = "is at queue position " + std::to_string(p->second->queue_position) + ", not " +
                std::to_string(e.queue_position);
          } else if (e.estimated_start && p->second->estimated_start != e.estimated_start) {
            f = "has estimated start " +
                (p->second->estimated_start ? "t=" + std::to_string(*p->second->estimated_start) : "none") +
                ", not t=" + std::to_string(*e.estimated_start) + " (reason: " + p->second->reason + ")";
          } else if (e.reserved && p->second->reserved != *e.reserved) {
            f = std::string(p->second->reserved ? "holds" : "does not hold") + " a reservation (reason: " +
                p->second->reason + ")";
          }
          break;
        }
      }
      if (!f.empty()) res_.failures.push_back(e.text + when + name + " " + f);
    }
  }
}

}  // namespace tessera::sim::detail
