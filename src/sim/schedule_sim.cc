#include "sim/schedule_sim.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "config/cluster_config.h"
#include "config/yaml_fields.h"
#include "core/sched/runtime_history.h"

namespace tessera::sim {
namespace {

#define TRY(expr) TESSERA_TRY(expr)
using config::get;
using config::join;
using config::non_negative;

Result<Gang> parse_gang(const YAML::Node& j, const std::string& at) {
  Gang g;
  int64_t tasks = 1, min_tasks = 0, gpus = 0, milli = 1000, gpu_mem = 0, cpu = 0, mem = 0;
  TRY(get(j, "tasks", at, tasks));
  TRY(get(j, "min_tasks", at, min_tasks));
  TRY(get(j, "gpus", at, gpus));
  TRY(get(j, "gpu_milli", at, milli));
  TRY(get(j, "gpu_memory", at, gpu_mem));
  TRY(get(j, "cpu", at, cpu));
  TRY(get(j, "memory", at, mem));
  TRY(get(j, "mig", at, g.task.mig_profile));
  TRY(get(j, "models", at, g.task.gpu_models));
  g.tasks = int(tasks);
  g.min_tasks = int(min_tasks);
  g.task.gpu_count = int(gpus);
  g.task.milli_per_gpu = MilliGpu(milli);
  g.task.gpu_memory = MiB(gpu_mem);
  g.task.cpu = MilliCpu(cpu);
  g.task.memory = MiB(mem);
  std::string topo;
  TRY(get(j, "topology", at, topo));  // "required:leaf" or "preferred:leaf"
  if (!topo.empty()) {
    const auto colon = topo.find(':');
    const std::string mode = topo.substr(0, colon);
    if (colon == std::string::npos || (mode != "required" && mode != "preferred"))
      return invalid_argument(at + ".topology: expected required:LEVEL or preferred:LEVEL, got \"" + topo + "\"");
    g.topology = {mode == "required" ? TopologyMode::kRequired : TopologyMode::kPreferred, topo.substr(colon + 1)};
  }
  std::string kind, spot;
  TRY(get(j, "kind", at, kind));
  if (!kind.empty()) {
    bool found = false;
    for (JobKind k : {JobKind::kTraining, JobKind::kInference, JobKind::kInteractive, JobKind::kBatch})
      if (kind == job_kind_name(k)) g.kind = k, found = true;
    if (!found) return invalid_argument(at + ".kind: unknown \"" + kind + "\"; expected one of training, inference, interactive, batch");
  }
  TRY(get(j, "spot", at, spot));
  if (!spot.empty()) {
    auto p = parse_spot_policy(spot);
    if (!p.ok()) return invalid_argument(at + ".spot: " + p.error().message);
    g.spot = *p;
  }
  if (Status s = g.validate(); !s.ok()) return invalid_argument(at + ": " + s.message());
  return g;
}


}  // namespace

Result<ScheduleScenario> parse_schedule_scenario(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return invalid_argument(std::string("scenario: not valid YAML: ") + e.what());
  }
  if (!root.IsMap()) return invalid_argument("scenario: expected a map with nodes, queues, jobs, expect");
  ScheduleScenario sc;
  config::ClusterConfig cluster;
  TRY(config::parse_cluster_sections(root, "scenario", cluster));
  sc.name = std::move(cluster.name);
  sc.levels = std::move(cluster.levels);
  sc.nodes = std::move(cluster.nodes);
  sc.pools = std::move(cluster.pools);
  sc.queues = std::move(cluster.queues);
  sc.config = std::move(cluster.scheduler);
  sc.catalog = std::move(cluster.catalog);
  TRY(get(root, "cycle_interval", "scenario", sc.cycle_interval));
  TRY(get(root, "check_guarantees", "scenario", sc.check_guarantees));
  if (sc.cycle_interval <= 0) return invalid_argument("scenario.cycle_interval: must be > 0 seconds");
  if (const YAML::Node u = root["usage"]) {
    if (!u.IsMap()) return invalid_argument("scenario.usage: must be a map of leaf queue to GPU-seconds");
    for (const auto& kv : u) {
      const std::string q = kv.first.as<std::string>();
      const std::string at = "usage." + q;
      if (std::none_of(sc.queues.begin(), sc.queues.end(), [&](const QueueSpec& s) { return s.name == q; }))
        return invalid_argument(at + ": unknown queue");
      if (std::any_of(sc.queues.begin(), sc.queues.end(), [&](const QueueSpec& s) { return s.parent == q; }))
        return invalid_argument(at + ": not a leaf queue (usage is recorded on leaf queues)");
      double v = 0;
      try {
        v = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        return invalid_argument(at + ": must be a number (GPU-seconds)");
      }
      if (v < 0) return invalid_argument(at + ": must be >= 0 GPU-seconds");
      sc.usage[q] = v;
    }
  }
  if (!root["jobs"] || !root["jobs"].IsSequence()) return invalid_argument("scenario.jobs: required list");
  std::set<std::string> names;
  for (size_t i = 0; i < root["jobs"].size(); ++i) {
    const YAML::Node j = root["jobs"][i];
    const std::string at = "jobs[" + std::to_string(i) + "]";
    SimJobSpec js;
    TRY(get(j, "name", at, js.name, true));
    if (!names.insert(js.name).second) return invalid_argument(at + ".name: \"" + js.name + "\" used twice");
    TRY(get(j, "job_name", at, js.job_name));
    if (js.job_name.empty()) js.job_name = js.name;
    TRY(get(j, "at", at, js.at));
    TRY(get(j, "duration", at, js.duration, true));
    TRY(get(j, "queue", at, js.queue));
    if (js.queue.empty()) js.queue = sc.queues.front().name;
    TRY(get(j, "user", at, js.user));
    TRY(get(j, "class", at, js.priority_class));
    {
      std::vector<std::string> known;
      for (const PriorityClass& pc : sc.config.priority_classes) known.push_back(pc.name);
      if (std::find(known.begin(), known.end(), js.priority_class) == known.end())
        return invalid_argument(at + ".class: unknown \"" + js.priority_class + "\"; expected one of " + join(known));
    }
    TRY(non_negative(j, "expected_runtime", at, js.expected_runtime));
    TRY(non_negative(j, "max_runtime", at, js.max_runtime));
    if (const YAML::Node c = j["checkpoint"]) {
      TRY(get(c, "interval", at + ".checkpoint", js.checkpoint.interval));
      TRY(get(c, "save_cost", at + ".checkpoint", js.checkpoint.save_cost));
      TRY(get(c, "restart_cost", at + ".checkpoint", js.checkpoint.restart_cost));
      TRY(get(c, "grace", at + ".checkpoint", js.checkpoint.grace));
    }
    auto g = parse_gang(j, at);
    if (!g.ok()) return g.error();
    js.gang = *g;
    js.gang.name = js.name;
    if (js.duration <= 0) return invalid_argument(at + ".duration: must be > 0 seconds");
    sc.jobs.push_back(std::move(js));
  }
  if (root["expect"]) {
    using K = Expectation::Kind;
    for (size_t i = 0; i < root["expect"].size(); ++i) {
      const YAML::Node e = root["expect"][i];
      const std::string at = "expect[" + std::to_string(i) + "]";
      Expectation ex;
      TRY(get(e, "at", at, ex.at, true));
      int kinds = 0;
      for (auto [key, kind] : {std::pair{"running", K::kRunning}, {"pending", K::kPending}, {"preempted", K::kPreempted},
                               {"not_preempted", K::kNotPreempted}, {"finished", K::kFinished},
                               {"timed_out", K::kTimedOut}, {"mig_gpus", K::kMigGpus},
                               {"preemptions", K::kPreemptions}}) {
        if (!e[key]) continue;
        ++kinds;
        ex.kind = kind;
        if (kind == K::kMigGpus) {
          TRY(get(e, key, at, ex.count));
          if (ex.count < 0) return invalid_argument(at + ".mig_gpus: must be >= 0");
        } else if (kind == K::kPreemptions) {
          if (!e[key].IsMap()) return invalid_argument(at + ".preemptions: must be a map of job to count");
          for (const auto& kv : e[key]) {
            ex.jobs.push_back(kv.first.as<std::string>());
            try {
              ex.counts.push_back(kv.second.as<int>());
            } catch (const YAML::Exception&) {
              return invalid_argument(at + ".preemptions." + ex.jobs.back() + ": must be an integer");
            }
          }
        } else if (e[key].IsSequence()) {
          TRY(get(e, key, at, ex.jobs));
        } else {
          std::string one;
          TRY(get(e, key, at, one));
          ex.jobs = {one};
        }
      }
      if (kinds != 1)
        return invalid_argument(at + ": needs exactly one of running, pending, preempted, not_preempted, finished, "
                                     "timed_out, mig_gpus, preemptions");
      for (const std::string& jn : ex.jobs)
        if (!names.count(jn)) return invalid_argument(at + ": unknown job \"" + jn + "\"");
      TRY(get(e, "reason", at, ex.reason_contains));
      TRY(get(e, "queue_position", at, ex.queue_position));
      if (e["estimated_start"]) {
        Time v = 0;
        TRY(get(e, "estimated_start", at, v));
        ex.estimated_start = v;
      }
      if (e["reserved"]) {
        bool v = false;
        TRY(get(e, "reserved", at, v));
        ex.reserved = v;
      }
      if (ex.kind != K::kPending) {
        for (const char* k : {"reason", "queue_position", "estimated_start", "reserved"})
          if (e[k]) return invalid_argument(at + "." + k + ": only with pending");
      }
      ex.text = at;
      sc.expect.push_back(std::move(ex));
    }
  }
  return sc;
}

namespace {

std::string gpu_text(const ClusterState& c, GpuRef g) {
  return "node " + c.node(g.node).name + " GPU " + std::to_string(g.index);
}

std::string layout_text(const ClusterState& c, GpuRef g, const std::vector<MigInstance>& layout) {
  const GpuModel* m = c.node(g.node).gpus[g.index].model;
  std::string s;
  for (const MigInstance& i : layout) {
    const MigProfile* p = m ? m->find_profile_id(i.profile_id) : nullptr;
    s += (s.empty() ? "" : " ") + (p ? p->name : "?") + "@" + std::to_string(i.start);
  }
  return s.empty() ? "(empty)" : s;
}

}  // namespace

Result<ScheduleRunResult> run_schedule_scenario(const ScheduleScenario& sc) {
  auto built = config::build_cluster(sc.levels, sc.nodes, sc.catalog ? *sc.catalog : GpuCatalog::builtin(), sc.pools);
  if (!built.ok()) return built.error();
  ClusterState& cluster = *built;
  auto tree = QueueTree::build(sc.queues);
  if (!tree.ok()) return tree.error();
  auto sched = Scheduler::create(sc.config);
  if (!sched.ok()) return sched.error();
  const SchedulerConfig& cfg = sc.config;
  auto model_class = [&](const std::string& model) { return cfg.model_class(model); };
  auto class_of = [&](const std::string& name) -> const PriorityClass* {
    for (const PriorityClass& pc : cfg.priority_classes)
      if (pc.name == name) return &pc;
    return nullptr;
  };

  struct Live {
    Job job;
    bool arrived = false, finished = false, timed_out = false;
    Duration run_from = 0;      // work safe (checkpointed) when the current run started
    Time run_start = -1;        // when the current run got its GPUs (started = this + restart cost)
    Time stop_at = -1;          // asked to stop: leaves the GPUs at this time
    Time ckpt_at = -1;          // kCheckpointing: when the requested checkpoint began
    Time preempt_decided = -1;  // when a preemption of it was last decided
    int preempted = 0;          // times a running job was asked to stop
    int64_t attained_milli_s = 0;  // milli-GPU-seconds of service in finished runs
  };
  std::vector<Live> jobs;
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < sc.jobs.size(); ++i) {
    const SimJobSpec& s = sc.jobs[i];
    Live l;
    l.job.id = JobId(uint32_t(i));
    l.job.name = s.job_name.empty() ? s.name : s.job_name;
    l.job.user = s.user;
    auto q = tree->find(s.queue);
    if (!q.ok()) return invalid_argument("jobs[" + std::to_string(i) + "].queue: " + q.error().message);
    if (!tree->queue(*q).leaf())
      return invalid_argument("jobs[" + std::to_string(i) + "].queue: \"" + s.queue + "\" is not a leaf queue");
    l.job.queue = *q;
    l.job.priority_class = s.priority_class;
    l.job.gang = s.gang;
    l.job.gang.id = l.job.id;
    l.job.submitted = s.at;
    l.job.expected_runtime = s.expected_runtime;
    l.job.max_runtime = s.max_runtime;
    l.job.checkpoint = s.checkpoint;
    by_name[s.name] = i;
    jobs.push_back(std::move(l));
  }
  auto held_milli = [](const Live& l) {
    int64_t m = 0;
    for (const TaskPlacement& p : l.job.placement)
      for (const GpuGrant& g : p.gpus) m += g.milli_held();
    return m;
  };
  auto holding = [](const Live& l) {
    return l.job.state == JobState::kRunning || l.job.state == JobState::kCheckpointing;
  };
  auto end_time = [&](const Live& l) { return l.job.started + (sc.jobs[l.job.id.value].duration - l.run_from); };
  constexpr Time kNever = std::numeric_limits<Time>::max();
  constexpr int kMaxCycles = 20000;
  auto timeout_time = [&](const Live& l) { return l.job.max_runtime > 0 ? l.job.started + l.job.max_runtime : kNever; };

  // Fair-share history: per-queue decayed usage (decay_usage, as the simulator keeps it). A seed of
  // G GPU-seconds is that usage after G GPU-seconds in the last second before t=0: a share of
  // G / total GPUs for one second.
  std::vector<double> usage(tree->size(), 0.0);
  for (const auto& [qname, gpu_s] : sc.usage) {
    auto q = tree->find(qname);
    if (!q.ok()) return invalid_argument("usage." + qname + ": " + q.error().message);
    if (cluster.total_gpus() > 0)
      usage[q->value] = decay_usage(0, gpu_s / double(cluster.total_gpus()), 1, cfg.usage_half_life);
  }
  RuntimeHistory runtimes;
  std::map<GpuRef, Time> mig_last_changed;
  std::map<GpuRef, Time> reconfiguring;  // GPU -> ready_at
  std::map<std::pair<uint32_t, uint32_t>, Time> preempted_for;  // (victim, for_job) -> when
  std::vector<Time> queue_last_start(tree->size(), -1);
  // Guarantee restoration (invariant c): per (leaf queue, class), when the condition began.
  struct Watch {
    Time since = -1;
    bool reported = false;
  };
  std::map<std::pair<uint32_t, std::string>, Watch> watches;

  std::set<Time> times;
  for (const SimJobSpec& s : sc.jobs) times.insert(s.at);
  for (const Expectation& e : sc.expect) times.insert(e.at);
  const Time horizon = times.empty() ? 0 : *times.rbegin();
  ScheduleRunResult res;
  auto log = [&](Time t, const std::string& what) { res.log.push_back("t=" + std::to_string(t) + " " + what); };
  Time last_t = std::min<Time>(0, times.empty() ? 0 : *times.begin());  // usage seeds are at t=0
  Time same_t = -1;
  int cycles_at_t = 0;
  while (!times.empty()) {
    const Time t = *times.begin();
    times.erase(times.begin());
    if (res.cycles >= kMaxCycles) {  // e.g. a preemption livelock that never lets a job finish
      res.failures.push_back("t=" + std::to_string(t) + ": stopped after " + std::to_string(kMaxCycles) +
                             " cycles (events never run out: a livelock?)");
      return res;
    }
    if (t == same_t) {
      if (++cycles_at_t > 64) {
        res.failures.push_back("t=" + std::to_string(t) + ": more than 64 cycles at one time (decisions never settle)");
        return res;
      }
    } else {
      same_t = t;
      cycles_at_t = 1;
    }
    // 0. Usage history over [last_t, t) with the allocation as it was.
    if (t > last_t) {
      int64_t cap = 0;
      for (const Node& n : cluster.nodes())
        for (const Gpu& g : n.gpus) cap += g.health == GpuHealth::kHealthy ? 1000 : 0;
      std::vector<int64_t> alloc(tree->size(), 0);
      for (const Live& l : jobs)
        if (holding(l)) alloc[l.job.queue.value] += held_milli(l);
      for (size_t q = 0; q < usage.size(); ++q) {
        const double share = cap > 0 ? double(alloc[q]) / double(cap) : 0;
        usage[q] = decay_usage(usage[q], share, t - last_t, cfg.usage_half_life);
      }
      last_t = t;
    }
    // 1. MIG layout changes that are ready.
    for (auto it = reconfiguring.begin(); it != reconfiguring.end();) {
      if (it->second > t) {
        ++it;
        continue;
      }
      if (Status s = cluster.set_health(it->first, GpuHealth::kHealthy); !s.ok())
        return Error{ErrorCode::kInternal, "MIG ready: " + s.message()};
      log(t, "MIG ready: " + gpu_text(cluster, it->first));
      it = reconfiguring.erase(it);
    }
    // 2. Completions, time-outs and exits.
    for (Live& l : jobs) {
      if (!holding(l)) continue;
      const bool done = end_time(l) <= t;
      const bool timeout = !done && timeout_time(l) <= t;
      const bool stop = !done && !timeout && l.stop_at >= 0 && l.stop_at <= t;
      if (!done && !timeout && !stop) continue;
      const int64_t held = held_milli(l);
      for (const TaskPlacement& p : l.job.placement)
        if (Status s = cluster.release(p); !s.ok()) return Error{ErrorCode::kInternal, "release: " + s.message()};
      l.job.placement.clear();
      l.attained_milli_s += held * std::max<Time>(0, t - l.run_start);
      const SimJobSpec& spec = sc.jobs[l.job.id.value];
      if (done) {
        l.finished = true;
        l.job.state = JobState::kSucceeded;
        runtimes.record(l.job.user, l.job.name, t - l.run_start);
        log(t, "finished " + spec.name);
      } else if (timeout) {
        l.timed_out = true;
        l.job.state = JobState::kFailed;
        log(t, "timed out " + spec.name + " after its max_runtime of " + std::to_string(l.job.max_runtime) + "s");
      } else {
        // Work is kept up to the last completed checkpoint: the one asked for, if it finished saving
        // before the job left, else the last periodic one (periodic checkpoints stop when the job is
        // asked to checkpoint: it is busy saving that one).
        const bool asked = l.job.state == JobState::kCheckpointing;
        const bool saved = asked && t >= l.ckpt_at + l.job.checkpoint.save_cost;
        const Time until = asked ? std::min(t, l.ckpt_at) : t;
        Time safe = l.job.started;
        if (l.job.checkpoint.interval > 0 && until > l.job.started)
          safe = l.job.started + (until - l.job.started) / l.job.checkpoint.interval * l.job.checkpoint.interval;
        if (saved) safe = std::max(safe, l.ckpt_at);
        l.run_from += std::max<Time>(0, safe - l.job.started);
        l.run_from = std::min(l.run_from, spec.duration);
        l.job.state = JobState::kPending;
        l.job.last_preempted = t;
        l.job.evict_by = -1;
        ++l.job.preemptions;
        l.stop_at = -1;
        l.ckpt_at = -1;
        log(t, "preempted " + spec.name + " left" + (saved ? " after its checkpoint" : " without a new checkpoint") +
                   ", resumes from " + std::to_string(l.run_from) + "s of work");
      }
    }
    // 3. Arrivals.
    for (size_t i = 0; i < jobs.size(); ++i)
      if (!jobs[i].arrived && sc.jobs[i].at <= t) jobs[i].arrived = true;
    // Periodic checkpoints of running jobs (for lost-work accounting).
    for (Live& l : jobs)
      if (l.job.state == JobState::kRunning && l.job.checkpoint.interval > 0 && t > l.job.started)
        l.job.checkpoint.last = l.job.started + (t - l.job.started) / l.job.checkpoint.interval * l.job.checkpoint.interval;
    // 4. One cycle.
    Snapshot snap;
    snap.cluster = &cluster;
    snap.queues = &*tree;
    for (const Live& l : jobs) {
      if (!l.arrived || l.finished || l.timed_out) continue;
      snap.jobs.push_back(l.job);
      int64_t attained = l.attained_milli_s;
      if (holding(l)) attained += held_milli(l) * std::max<Time>(0, t - l.run_start);
      snap.jobs.back().attained_gpu_s = attained / 1000;
    }
    snap.history.assign(tree->size(), QueueLoad{});
    for (size_t q = 0; q < usage.size(); ++q) snap.history[q].decayed_usage = usage[q];
    snap.mig_last_changed = mig_last_changed;
    snap.runtimes = &runtimes;
    Decisions d = (*sched)->cycle(snap, t);
    ++res.cycles;
    // While anything waits, the controller cycles again after cycle_interval (if nothing comes sooner).
    // Periodic cycles stop at the horizon (the last arrival or expectation); completions go on.
    if ((!d.pending.empty() || !d.preempt.empty()) && t + sc.cycle_interval <= horizon) times.insert(t + sc.cycle_interval);
    for (const PreemptDecision& p : d.preempt) {
      Live& v = jobs[p.victim.value];
      const std::string& vname = sc.jobs[p.victim.value].name;
      if (v.job.state == JobState::kCheckpointing && p.phase == PreemptPhase::kEvict) {
        v.stop_at = t;  // its grace is over: evicted now, the checkpoint it was writing is lost
        times.insert(t);
        log(t, "evict " + vname + ": " + p.reason);
        continue;
      }
      if (v.job.state != JobState::kRunning) continue;
      v.preempt_decided = t;
      ++v.preempted;
      ++res.preemptions;
      if (p.for_job.valid() && p.for_job.value < jobs.size()) {
        // Invariant (b): no preemption cycles.
        const auto back = preempted_for.find({p.for_job.value, p.victim.value});
        if (back != preempted_for.end())
          res.failures.push_back("t=" + std::to_string(t) + ": preemption cycle: " + vname + " is preempted for " +
                                 sc.jobs[p.for_job.value].name + ", which was preempted for it at t=" +
                                 std::to_string(back->second));
        preempted_for.emplace(std::pair{p.victim.value, p.for_job.value}, t);
      }
      if (p.phase == PreemptPhase::kRequestCheckpoint && v.job.checkpoint.interval > 0) {
        v.job.state = JobState::kCheckpointing;
        v.job.move_to = p.move_to;  // a defragmenting move: held for it, restarted there once it left
        v.job.evict_by = p.evict_by;
        v.ckpt_at = t;
        v.stop_at = std::max(t, std::min(t + v.job.checkpoint.save_cost, p.evict_by));
        log(t, "preempt " + vname + " (checkpoint, leaves at t=" + std::to_string(v.stop_at) + ", evict_by t=" +
                   std::to_string(p.evict_by) + "): " + p.reason);
      } else {
        v.stop_at = t;
        log(t, "preempt " + vname + " (evict now): " + p.reason);
      }
      times.insert(v.stop_at);
    }
    for (const StartDecision& s : d.start) {
      Live& l = jobs[s.job.value];
      if (Status st = cluster.apply_all(s.placement); !st.ok())
        return Error{ErrorCode::kInternal, "start of " + sc.jobs[s.job.value].name +
                                               " rejected by the cluster: " + st.message()};
      l.job.placement = s.placement;
      if (!l.job.move_to.empty() && l.job.move_to != s.placement)
        res.failures.push_back("t=" + std::to_string(t) + ": moved job " + sc.jobs[s.job.value].name +
                               " restarted elsewhere than on the GPUs held for it");
      l.job.move_to.clear();
      l.job.state = JobState::kRunning;
      l.run_start = t;
      l.job.started = t + (l.job.preemptions > 0 ? l.job.checkpoint.restart_cost : 0);
      if (l.job.started < t) l.job.started = t;
      times.insert(end_time(l));
      if (timeout_time(l) != kNever) times.insert(timeout_time(l));
      if (l.job.checkpoint.interval > 0) l.job.checkpoint.last = l.job.started;
      queue_last_start[l.job.queue.value] = t;
      log(t, "start " + sc.jobs[s.job.value].name);
    }
    // Dynamic MIG: the planner's layout changes are applied to the (idle) GPUs, which are out of
    // service until ready_at.
    for (const MigReconfigDecision& r : d.reconfigure_mig) {
      if (Status s = cluster.set_mig_layout(r.gpu, r.enable_mig, r.layout); !s.ok()) {
        res.failures.push_back("t=" + std::to_string(t) + ": MIG change on " + gpu_text(cluster, r.gpu) +
                               " rejected: " + s.message());
        continue;
      }
      ++res.mig_changes;
      mig_last_changed[r.gpu] = t;
      log(t, "MIG " + gpu_text(cluster, r.gpu) + " -> " +
                 (r.enable_mig ? "MIG " + layout_text(cluster, r.gpu, r.layout) : std::string("whole")) +
                 " (ready at t=" + std::to_string(r.ready_at) + "): " + r.reason);
      if (r.ready_at > t) {
        if (Status s = cluster.set_health(r.gpu, GpuHealth::kReconfiguring); !s.ok())
          return Error{ErrorCode::kInternal, "MIG reconfigure: " + s.message()};
        reconfiguring[r.gpu] = r.ready_at;
        times.insert(r.ready_at);
      } else {
        times.insert(t);  // ready now: cycle again
      }
    }
    // 5. Invariants.
    // (d) A job moved out of an owed gang's way restarts on its held GPUs in the first cycle after it left.
    for (const PendingInfo& p : d.pending) {
      Live& l = jobs[p.job.value];
      if (l.job.move_to.empty()) continue;
      res.failures.push_back("t=" + std::to_string(t) + ": moved job " + sc.jobs[p.job.value].name +
                             " did not restart on the GPUs held for it: " + p.reason);
      l.job.move_to.clear();
    }
    if (Status s = cluster.check_invariants(); !s.ok())
      res.failures.push_back("t=" + std::to_string(t) + ": invariant broken: " + s.message());
    for (const Live& l : jobs)
      if (holding(l) && int(l.job.placement.size()) < l.job.gang.required_tasks())
        res.failures.push_back("t=" + std::to_string(t) + ": gang " + sc.jobs[l.job.id.value].name + " runs partially");
    if (cfg.reclaim && sc.check_guarantees) {
      // (c) A leaf queue with a pending job that fits in its unused guarantee of class C, while another
      // queue borrows C with jobs it may reclaim, gets a job started within reclaim_grace + cycle_interval + 1.
      std::vector<ClassAmounts> alloc(tree->size());  // subtree allocation per class
      std::vector<std::vector<const Live*>> running(tree->size());
      for (const Live& l : jobs) {
        if (!holding(l)) continue;
        running[l.job.queue.value].push_back(&l);
        for (const TaskPlacement& p : l.job.placement)
          for (const GpuGrant& g : p.gpus) {
            const std::string cls = model_class(cluster.node(p.node).gpus[g.gpu].model->name);
            for (QueueId a : tree->path_to_root(l.job.queue)) {
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
      for (const Queue& q : tree->queues()) {
        if (!q.leaf()) continue;
        const std::vector<QueueId> own_path = tree->path_to_root(q.id);
        for (const auto& [cls, guaranteed] : q.guaranteed) {
          if (guaranteed <= 0) continue;
          std::string why;
          for (const Live& l : jobs) {
            if (!l.arrived || l.job.state != JobState::kPending || l.finished || l.timed_out || l.job.queue != q.id)
              continue;
            const TaskRequest& tr = l.job.gang.task;
            if (tr.mig() || tr.gpu_demand_milli() <= 0) continue;
            std::string jcls = "any";
            if (!tr.gpu_models.empty()) {
              auto m = cluster.catalog().find(tr.gpu_models.front());
              jcls = model_class(m.ok() ? (*m)->name : tr.gpu_models.front());
            }
            if (!(cls == "any" || jcls == "any" || jcls == cls)) continue;
            const int64_t milli = tr.gpu_demand_milli() * l.job.gang.tasks;
            if (amount(alloc[q.id.value], cls) + milli > guaranteed) continue;
            const PriorityClass* jpc = class_of(l.job.priority_class);
            // Another queue borrowing `cls` (over its guarantee on a path not shared with q) that runs
            // a job of `cls` this one may reclaim.
            for (const Queue& r : tree->queues()) {
              if (!r.leaf() || r.id == q.id || !why.empty()) continue;
              bool borrows = false;
              for (QueueId a : tree->path_to_root(r.id)) {
                if (std::find(own_path.begin(), own_path.end(), a) != own_path.end()) break;
                if (amount(alloc[a.value], cls) > amount(tree->queue(a).guaranteed, cls)) borrows = true;
              }
              if (!borrows) continue;
              for (const Live* v : running[r.id.value]) {
                const PriorityClass* vpc = class_of(v->job.priority_class);
                if (!vpc || !jpc || !(vpc->preemptible || vpc->value <= jpc->value)) continue;
                bool in_cls = cls == "any";
                for (const TaskPlacement& p : v->job.placement)
                  for (const GpuGrant& g : p.gpus)
                    in_cls = in_cls || model_class(cluster.node(p.node).gpus[g.gpu].model->name) == cls;
                if (in_cls) {
                  why = sc.jobs[l.job.id.value].name + " fits in its unused guarantee while queue " + r.name +
                        " borrows";
                  break;
                }
              }
            }
            if (!why.empty()) break;
          }
          if (why.empty()) continue;
          active.insert({q.id.value, cls});
          Watch& w = watches[{q.id.value, cls}];
          if (w.since < 0 || queue_last_start[q.id.value] > w.since) {  // began, or a job started: a new episode
            w.since = t;
            w.reported = false;
          }
          const Time deadline = w.since + cfg.reclaim_grace + sc.cycle_interval + 1;
          if (t > deadline && !w.reported) {
            w.reported = true;
            res.failures.push_back("t=" + std::to_string(t) + ": guarantee not restored: queue " + q.name +
                                   " has started nothing since t=" + std::to_string(w.since) + " (deadline t=" +
                                   std::to_string(deadline) + ") though " + why + " " + cls);
          }
        }
      }
      for (auto& [k, w] : watches)
        if (!active.count(k)) w = Watch{};
    }
    // 6. Expectations due now, after the last cycle at this time.
    if (!times.empty() && *times.begin() == t) continue;
    std::map<uint32_t, const PendingInfo*> pend;
    for (const PendingInfo& p : d.pending) pend[p.job.value] = &p;
    for (const Expectation& e : sc.expect) {
      if (e.at != t) continue;
      if (e.kind == Expectation::Kind::kMigGpus) {
        int n = 0;
        for (const Node& node : cluster.nodes())
          for (const Gpu& g : node.gpus) n += g.mig_enabled ? 1 : 0;
        if (n != e.count)
          res.failures.push_back(e.text + " (t=" + std::to_string(t) + "): " + std::to_string(n) +
                                 " GPUs in MIG mode, not " + std::to_string(e.count));
        continue;
      }
      for (size_t k = 0; k < e.jobs.size(); ++k) {
        const std::string& name = e.jobs[k];
        const Live& l = jobs[by_name.at(name)];
        const bool running = holding(l);
        std::string fail;
        switch (e.kind) {
          case Expectation::Kind::kRunning:
            if (!running || l.job.state == JobState::kCheckpointing)
              fail = l.job.state == JobState::kCheckpointing ? "is checkpointing to leave, not running" : "is not running";
            break;
          case Expectation::Kind::kFinished:
            if (!l.finished) fail = l.timed_out ? "timed out, it did not finish" : "has not finished";
            break;
          case Expectation::Kind::kTimedOut:
            if (!l.timed_out) fail = l.finished ? "finished, it did not time out" : "has not timed out";
            break;
          case Expectation::Kind::kPreempted:
            if (l.preempt_decided != t) fail = "was not preempted";
            break;
          case Expectation::Kind::kNotPreempted:
            if (l.preempt_decided == t) fail = "was preempted";
            break;
          case Expectation::Kind::kPreemptions:
            if (l.preempted != e.counts[k])
              fail = "was preempted " + std::to_string(l.preempted) + " times, not " + std::to_string(e.counts[k]);
            break;
          case Expectation::Kind::kMigGpus:
            break;
          case Expectation::Kind::kPending: {
            auto p = pend.find(l.job.id.value);
            if (p == pend.end()) {
              fail = running ? "is running, not pending" : "is not pending";
            } else if (!e.reason_contains.empty() && p->second->reason.find(e.reason_contains) == std::string::npos) {
              fail = "waits for \"" + p->second->reason + "\", not \"" + e.reason_contains + "\"";
            } else if (e.queue_position > 0 && p->second->queue_position != e.queue_position) {
              fail = "is at queue position " + std::to_string(p->second->queue_position) + ", not " +
                     std::to_string(e.queue_position);
            } else if (e.estimated_start && p->second->estimated_start != e.estimated_start) {
              fail = "has estimated start " +
                     (p->second->estimated_start ? "t=" + std::to_string(*p->second->estimated_start) : "none") +
                     ", not t=" + std::to_string(*e.estimated_start) + " (reason: " + p->second->reason + ")";
            } else if (e.reserved && p->second->reserved != *e.reserved) {
              fail = std::string(p->second->reserved ? "holds" : "does not hold") + " a reservation (reason: " +
                     p->second->reason + ")";
            }
            break;
          }
        }
        if (!fail.empty()) res.failures.push_back(e.text + " (t=" + std::to_string(t) + "): " + name + " " + fail);
      }
    }
  }
  return res;
}

}  // namespace tessera::sim
