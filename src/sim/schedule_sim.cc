#include "sim/schedule_sim.h"

#include "sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

namespace tessera::sim {
namespace {

template <class T>
Status get(const YAML::Node& n, const char* key, const std::string& at, T& out, bool required = false) {
  const YAML::Node v = n[key];
  if (!v) return required ? invalid_argument(at + "." + key + ": required") : Status();
  try {
    out = v.as<T>();
  } catch (const YAML::Exception&) {
    return invalid_argument(at + "." + key + ": wrong type");
  }
  return {};
}

Status get_amounts(const YAML::Node& n, const char* key, const std::string& at, ClassAmounts& out) {
  const YAML::Node v = n[key];
  if (!v) return {};
  if (!v.IsMap()) return invalid_argument(at + "." + key + ": must be a map of GPU class to milli-GPU");
  for (const auto& kv : v) {
    try {
      out[kv.first.as<std::string>()] = kv.second.as<int64_t>();
    } catch (const YAML::Exception&) {
      return invalid_argument(at + "." + key + ": values must be integers (milli-GPU)");
    }
  }
  return {};
}

#define TRY(expr)                      \
  do {                                 \
    if (Status s_ = (expr); !s_.ok()) \
      return s_.error();               \
  } while (0)

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
  TRY(get(root, "name", "scenario", sc.name));
  TRY(get(root, "levels", "scenario", sc.levels));
  TRY(get(root, "policy", "scenario", sc.config.policy));
  TRY(get(root, "cycle_interval", "scenario", sc.cycle_interval));
  if (sc.cycle_interval <= 0) return invalid_argument("scenario.cycle_interval: must be > 0 seconds");
  if (!root["nodes"] || !root["nodes"].IsSequence()) return invalid_argument("scenario.nodes: required list");
  for (size_t i = 0; i < root["nodes"].size(); ++i) {
    const YAML::Node n = root["nodes"][i];
    const std::string at = "nodes[" + std::to_string(i) + "]";
    NodeSpec spec;
    int64_t count = 1, gpus = 0, cpu = 0, mem = 0;
    TRY(get(n, "name", at, spec.name, true));
    TRY(get(n, "count", at, count));
    TRY(get(n, "gpus", at, gpus));
    TRY(get(n, "cpu", at, cpu));
    TRY(get(n, "memory", at, mem));
    TRY(get(n, "gpu_model", at, spec.gpu_model));
    TRY(get(n, "path", at, spec.path));
    TRY(get(n, "mig_gpus", at, spec.mig_gpus));
    if (count < 1) return invalid_argument(at + ".count: must be >= 1");
    spec.gpu_count = int(gpus);
    spec.cpu = MilliCpu(cpu);
    spec.memory = MiB(mem);
    for (int64_t c = 0; c < count; ++c) {
      NodeSpec copy = spec;
      if (count > 1) copy.name += "-" + std::to_string(c);
      sc.nodes.push_back(std::move(copy));
    }
  }
  if (root["queues"]) {
    for (size_t i = 0; i < root["queues"].size(); ++i) {
      const YAML::Node q = root["queues"][i];
      const std::string at = "queues[" + std::to_string(i) + "]";
      QueueSpec spec;
      TRY(get(q, "name", at, spec.name, true));
      TRY(get(q, "parent", at, spec.parent));
      TRY(get(q, "weight", at, spec.weight));
      TRY(get_amounts(q, "guaranteed", at, spec.guaranteed));
      TRY(get_amounts(q, "limit", at, spec.limit));
      sc.queues.push_back(std::move(spec));
    }
  } else {
    sc.queues.push_back(QueueSpec{"default", "", {}, {}, 1});
  }
  if (!root["jobs"] || !root["jobs"].IsSequence()) return invalid_argument("scenario.jobs: required list");
  std::set<std::string> names;
  for (size_t i = 0; i < root["jobs"].size(); ++i) {
    const YAML::Node j = root["jobs"][i];
    const std::string at = "jobs[" + std::to_string(i) + "]";
    SimJobSpec js;
    TRY(get(j, "name", at, js.name, true));
    if (!names.insert(js.name).second) return invalid_argument(at + ".name: \"" + js.name + "\" used twice");
    TRY(get(j, "at", at, js.at));
    TRY(get(j, "duration", at, js.duration, true));
    TRY(get(j, "queue", at, js.queue));
    if (js.queue.empty()) js.queue = sc.queues.front().name;
    TRY(get(j, "user", at, js.user));
    TRY(get(j, "class", at, js.priority_class));
    TRY(get(j, "expected_runtime", at, js.expected_runtime));
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
    for (size_t i = 0; i < root["expect"].size(); ++i) {
      const YAML::Node e = root["expect"][i];
      const std::string at = "expect[" + std::to_string(i) + "]";
      Expectation ex;
      TRY(get(e, "at", at, ex.at, true));
      int kinds = 0;
      for (auto [key, kind] : {std::pair{"running", Expectation::Kind::kRunning}, {"pending", Expectation::Kind::kPending},
                               {"preempted", Expectation::Kind::kPreempted},
                               {"not_preempted", Expectation::Kind::kNotPreempted},
                               {"finished", Expectation::Kind::kFinished}}) {
        if (!e[key]) continue;
        ++kinds;
        ex.kind = kind;
        if (e[key].IsSequence()) TRY(get(e, key, at, ex.jobs));
        else {
          std::string one;
          TRY(get(e, key, at, one));
          ex.jobs = {one};
        }
      }
      if (kinds != 1)
        return invalid_argument(at + ": needs exactly one of running, pending, preempted, not_preempted, finished");
      for (const std::string& jn : ex.jobs)
        if (!names.count(jn)) return invalid_argument(at + ": unknown job \"" + jn + "\"");
      TRY(get(e, "reason", at, ex.reason_contains));
      TRY(get(e, "queue_position", at, ex.queue_position));
      ex.text = at;
      sc.expect.push_back(std::move(ex));
    }
  }
  return sc;
}

Result<ScheduleRunResult> run_schedule_scenario(const ScheduleScenario& sc) {
  auto built = build_cluster(sc.levels, sc.nodes);
  if (!built.ok()) return built.error();
  ClusterState& cluster = *built;
  auto tree = QueueTree::build(sc.queues);
  if (!tree.ok()) return tree.error();
  auto sched = Scheduler::create(sc.config);
  if (!sched.ok()) return sched.error();

  struct Live {
    Job job;
    bool arrived = false, finished = false;
    Duration done = 0;        // work completed and safe (checkpointed or finished)
    Duration run_from = 0;    // work already done when the current run started
    Time stop_at = -1;        // preempted: leaves the GPUs at this time
    Time preempt_decided = -1;  // when a preemption of it was last decided
  };
  std::vector<Live> jobs;
  for (size_t i = 0; i < sc.jobs.size(); ++i) {
    const SimJobSpec& s = sc.jobs[i];
    Live l;
    l.job.id = JobId(uint32_t(i));
    l.job.name = s.name;
    l.job.user = s.user;
    auto q = tree->find(s.queue);
    if (!q.ok()) return invalid_argument("jobs[" + std::to_string(i) + "].queue: " + q.error().message);
    l.job.queue = *q;
    l.job.priority_class = s.priority_class;
    l.job.gang = s.gang;
    l.job.gang.id = l.job.id;
    l.job.submitted = s.at;
    l.job.expected_runtime = s.expected_runtime;
    l.job.checkpoint = s.checkpoint;
    jobs.push_back(std::move(l));
  }
  auto end_time = [&](const Live& l) { return l.job.started + (sc.jobs[l.job.id.value].duration - l.run_from); };

  std::set<Time> times;
  for (const SimJobSpec& s : sc.jobs) times.insert(s.at);
  for (const Expectation& e : sc.expect) times.insert(e.at);
  const Time horizon = times.empty() ? 0 : *times.rbegin();
  ScheduleRunResult res;
  while (!times.empty()) {
    const Time t = *times.begin();
    times.erase(times.begin());
    // 1. Completions and exits.
    for (Live& l : jobs) {
      if (l.job.state == JobState::kRunning || l.job.state == JobState::kCheckpointing) {
        const bool done = end_time(l) <= t;
        const bool stop = l.stop_at >= 0 && l.stop_at <= t;
        if (!done && !stop) continue;
        for (const TaskPlacement& p : l.job.placement)
          if (Status s = cluster.release(p); !s.ok()) return Error{ErrorCode::kInternal, "release: " + s.message()};
        l.job.placement.clear();
        if (done) {
          l.finished = true;
          l.job.state = JobState::kSucceeded;
          res.log.push_back("t=" + std::to_string(t) + " finished " + l.job.name);
        } else {
          // Work since the last checkpoint is lost unless it checkpointed on the way out.
          const Time safe = l.job.state == JobState::kCheckpointing ? l.stop_at - l.job.checkpoint.save_cost
                                                                     : std::max(l.job.started, l.job.checkpoint.last);
          l.done = l.run_from + std::max<Time>(0, safe - l.job.started);
          l.run_from = l.done;
          l.job.state = JobState::kPending;
          l.job.last_preempted = t;
          ++l.job.preemptions;
          l.stop_at = -1;
          res.log.push_back("t=" + std::to_string(t) + " preempted " + l.job.name + " left, resumes from " +
                            std::to_string(l.done) + "s of work");
        }
      }
    }
    // 2. Arrivals.
    for (size_t i = 0; i < jobs.size(); ++i)
      if (!jobs[i].arrived && sc.jobs[i].at <= t) jobs[i].arrived = true;
    // Periodic checkpoints of running jobs (for lost-work accounting).
    for (Live& l : jobs)
      if (l.job.state == JobState::kRunning && l.job.checkpoint.interval > 0 && t > l.job.started)
        l.job.checkpoint.last = l.job.started + (t - l.job.started) / l.job.checkpoint.interval * l.job.checkpoint.interval;
    // 3. One cycle.
    Snapshot snap;
    snap.cluster = &cluster;
    snap.queues = &*tree;
    for (const Live& l : jobs)
      if (l.arrived && !l.finished) snap.jobs.push_back(l.job);
    snap.history.assign(tree->size(), QueueLoad{});
    Decisions d = (*sched)->cycle(snap, t);
    ++res.cycles;
    // While anything waits, the controller cycles again after cycle_interval (if nothing comes sooner).
    // Periodic cycles stop at the horizon (the last arrival or expectation); completions go on.
    if ((!d.pending.empty() || !d.preempt.empty()) && t + sc.cycle_interval <= horizon) times.insert(t + sc.cycle_interval);
    for (const PreemptDecision& p : d.preempt) {
      Live& v = jobs[p.victim.value];
      if (v.job.state != JobState::kRunning) continue;
      v.preempt_decided = t;
      if (p.phase == PreemptPhase::kRequestCheckpoint && v.job.checkpoint.interval > 0) {
        v.job.state = JobState::kCheckpointing;
        v.stop_at = t + std::min(v.job.checkpoint.save_cost, v.job.checkpoint.grace);
      } else {
        v.stop_at = t;
      }
      times.insert(v.stop_at > t ? v.stop_at : t);
      res.log.push_back("t=" + std::to_string(t) + " preempt " + v.job.name + ": " + p.reason);
    }
    for (const StartDecision& s : d.start) {
      Live& l = jobs[s.job.value];
      if (Status st = cluster.apply_all(s.placement); !st.ok())
        return Error{ErrorCode::kInternal, "start of " + l.job.name + " rejected by the cluster: " + st.message()};
      l.job.placement = s.placement;
      l.job.state = JobState::kRunning;
      l.job.started = t + (l.job.preemptions > 0 ? l.job.checkpoint.restart_cost : 0);
      if (l.job.started < t) l.job.started = t;
      times.insert(end_time(l));
      if (l.job.checkpoint.interval > 0) l.job.checkpoint.last = l.job.started;
      res.log.push_back("t=" + std::to_string(t) + " start " + l.job.name);
    }
    // 4. Invariants.
    if (Status s = cluster.check_invariants(); !s.ok())
      res.failures.push_back("t=" + std::to_string(t) + ": invariant broken: " + s.message());
    for (const Live& l : jobs)
      if (l.job.state == JobState::kRunning && int(l.job.placement.size()) < l.job.gang.required_tasks())
        res.failures.push_back("t=" + std::to_string(t) + ": gang " + l.job.name + " runs partially");
    // 5. Expectations due now, after the last cycle at this time.
    if (!times.empty() && *times.begin() == t) continue;
    std::map<uint32_t, const PendingInfo*> pend;
    for (const PendingInfo& p : d.pending) pend[p.job.value] = &p;
    for (const Expectation& e : sc.expect) {
      if (e.at != t) continue;
      for (const std::string& name : e.jobs) {
        const auto it = std::find_if(jobs.begin(), jobs.end(), [&](const Live& l) { return l.job.name == name; });
        const Live& l = *it;
        const bool running = l.job.state == JobState::kRunning || l.job.state == JobState::kCheckpointing;
        std::string fail;
        switch (e.kind) {
          case Expectation::Kind::kRunning:
            if (!running || l.job.state == JobState::kCheckpointing) fail = "is not running";
            break;
          case Expectation::Kind::kFinished:
            if (!l.finished) fail = "has not finished";
            break;
          case Expectation::Kind::kPreempted:
            if (l.preempt_decided != t) fail = "was not preempted";
            break;
          case Expectation::Kind::kNotPreempted:
            if (l.preempt_decided == t) fail = "was preempted";
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
