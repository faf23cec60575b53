// parse_schedule_scenario (schedule_sim.h): the YAML form of a timed scheduling scenario
// (docs/scenarios.md). The cluster sections are read by config::parse_cluster_sections; jobs,
// events and expectations here. Unknown fields are errors everywhere (config::known_keys), so a
// typo never silently weakens a scenario. Stateless; thread-safe.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/cluster_config.h"
#include "config/yaml_fields.h"
#include "sim/schedule_sim.h"

namespace tessera::sim {
namespace {

#define TRY(expr) TESSERA_TRY(expr)
using config::get;
using config::join;
using config::known_keys;
using config::non_negative;

const std::vector<std::string> kTopKeys = {"name",  "levels", "nodes", "queues", "config", "priority_classes",
                                           "policy", "gpu_models", "pools", "pool_rules", "cycle_interval",
                                           "check_guarantees", "usage", "jobs", "events", "expect"};
const std::vector<std::string> kJobKeys = {"name",  "job_name", "at",      "queue",     "user",       "class",
                                           "tasks", "min_tasks", "gpus",   "gpu_milli", "gpu_memory", "mig",
                                           "models", "mix_models", "cpu", "memory", "topology",  "duration",   "expected_runtime",
                                           "max_runtime", "checkpoint", "kind", "spot"};
const std::vector<std::string> kTaskSizeKeys = {"gpus", "cpu", "memory"};
const std::vector<std::string> kCheckpointKeys = {"interval", "save_cost", "restart_cost", "grace", "last_at"};

Result<Gang> parse_gang(const YAML::Node& j, const std::string& at) {
  Gang g;
  int64_t tasks = 1, min_tasks = 0, gpus = 0, milli = 1000, gpu_mem = 0, cpu = 0, mem = 0;
  const bool listed = j["tasks"] && j["tasks"].IsSequence();  // per-task sizes
  if (!listed) TRY(get(j, "tasks", at, tasks));
  TRY(get(j, "min_tasks", at, min_tasks));
  TRY(get(j, "gpus", at, gpus));
  TRY(get(j, "gpu_milli", at, milli));
  TRY(get(j, "gpu_memory", at, gpu_mem));
  TRY(get(j, "cpu", at, cpu));
  TRY(get(j, "memory", at, mem));
  TRY(get(j, "mig", at, g.task.mig_profile));
  TRY(get(j, "models", at, g.task.gpu_models));
  TRY(get(j, "mix_models", at, g.task.mix_models));
  g.tasks = int(tasks);
  g.min_tasks = int(min_tasks);
  g.task.gpu_count = int(gpus);
  g.task.milli_per_gpu = MilliGpu(milli);
  g.task.gpu_memory = MiB(gpu_mem);
  g.task.cpu = MilliCpu(cpu);
  g.task.memory = MiB(mem);
  if (listed) {
    // tasks: [{gpus, cpu, memory}, ...]: one entry per task; a field an entry leaves out is the job's.
    const YAML::Node list = j["tasks"];
    if (list.size() == 0) return invalid_argument(at + ".tasks: an empty list; give one entry per task");
    std::vector<TaskSize> sizes;
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string tat = at + ".tasks[" + std::to_string(k) + "]";
      if (!list[k].IsMap()) return invalid_argument(tat + ": expected a map with gpus, cpu, memory");
      TRY(known_keys(list[k], tat, kTaskSizeKeys));
      int64_t tg = gpus, tc = cpu, tm = mem;
      TRY(get(list[k], "gpus", tat, tg));
      TRY(get(list[k], "cpu", tat, tc));
      TRY(get(list[k], "memory", tat, tm));
      if (tg < 0 || tg > 16) return invalid_argument(tat + ".gpus: must be in 0..16 (one node), got " + std::to_string(tg));
      sizes.push_back({MilliCpu(tc), MiB(tm), int(tg)});
    }
    g.set_sizes(std::move(sizes));
  }
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

Status parse_jobs(const YAML::Node& list, ScheduleScenario& sc) {
  if (!list || !list.IsSequence()) return invalid_argument("scenario.jobs: required list");
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node j = list[i];
    const std::string at = "jobs[" + std::to_string(i) + "]";
    TRY(known_keys(j, at, kJobKeys));
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
      const std::string cat = at + ".checkpoint";
      TRY(known_keys(c, cat, kCheckpointKeys));
      TRY(non_negative(c, "interval", cat, js.checkpoint.interval));
      TRY(non_negative(c, "save_cost", cat, js.checkpoint.save_cost));
      TRY(non_negative(c, "restart_cost", cat, js.checkpoint.restart_cost));
      TRY(non_negative(c, "grace", cat, js.checkpoint.grace));
      TRY(non_negative(c, "last_at", cat, js.checkpoint.last));
    }
    auto g = parse_gang(j, at);
    if (!g.ok()) return g.error();
    js.gang = *g;
    js.gang.name = js.name;
    if (js.duration <= 0) return invalid_argument(at + ".duration: must be > 0 seconds");
    sc.jobs.push_back(std::move(js));
  }
  return {};
}

// A node name declared in `nodes:` (after count expansion), or an error naming the field.
Status known_node(const ScheduleScenario& sc, const std::string& at, const std::string& name) {
  for (const NodeSpec& n : sc.nodes)
    if (n.name == name) return {};
  std::vector<std::string> known;
  for (size_t i = 0; i < sc.nodes.size() && i < 8; ++i) known.push_back(sc.nodes[i].name);
  return invalid_argument(at + ": unknown node \"" + name + "\"; nodes are " + join(known) +
                          (sc.nodes.size() > 8 ? ", ..." : ""));
}

// One node name or a list of them.
Status node_names(const YAML::Node& e, const char* key, const std::string& at, const ScheduleScenario& sc,
                  std::vector<std::string>& out) {
  if (e[key].IsSequence()) {
    TRY(get(e, key, at, out));
  } else {
    std::string one;
    TRY(get(e, key, at, one));
    out = {one};
  }
  if (out.empty()) return invalid_argument(at + "." + key + ": names no node");
  for (const std::string& n : out) TRY(known_node(sc, at + "." + key, n));
  return {};
}

Status parse_events(const YAML::Node& list, ScheduleScenario& sc) {
  if (!list || list.IsNull()) return {};
  if (!list.IsSequence()) return invalid_argument("scenario.events: must be a list");
  using K = ClusterEvent::Kind;
  static const std::vector<std::pair<std::string, K>> kinds = {
      {"node_down", K::kNodeDown}, {"node_up", K::kNodeUp},           {"cordon", K::kCordon},
      {"uncordon", K::kUncordon},  {"drain", K::kDrain},              {"gpu_unhealthy", K::kGpuUnhealthy},
      {"gpu_healthy", K::kGpuHealthy}};
  std::vector<std::string> keys = {"at"}, kind_names;
  for (const auto& [k, kind] : kinds) keys.push_back(k), kind_names.push_back(k);
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node e = list[i];
    const std::string at = "events[" + std::to_string(i) + "]";
    TRY(known_keys(e, at, keys));
    ClusterEvent ev;
    ev.text = at;
    TRY(non_negative(e, "at", at, ev.at));
    if (!e["at"]) return invalid_argument(at + ".at: required");
    int n = 0;
    for (const auto& [key, kind] : kinds) {
      if (!e[key]) continue;
      ++n;
      ev.kind = kind;
      const std::string kat = at + "." + key;
      if (kind != K::kGpuUnhealthy && kind != K::kGpuHealthy) {
        TRY(node_names(e, key.c_str(), at, sc, ev.nodes));
        continue;
      }
      const YAML::Node g = e[key];
      TRY(known_keys(g, kat, {"node", "gpu"}));
      std::string node;
      TRY(get(g, "node", kat, node, true));
      TRY(known_node(sc, kat + ".node", node));
      TRY(get(g, "gpu", kat, ev.gpu, true));
      const auto spec = std::find_if(sc.nodes.begin(), sc.nodes.end(), [&](const NodeSpec& s) { return s.name == node; });
      if (ev.gpu < 0 || ev.gpu >= spec->gpu_count)
        return invalid_argument(kat + ".gpu: node " + node + " has GPUs 0.." + std::to_string(spec->gpu_count - 1) +
                                ", not " + std::to_string(ev.gpu));
      ev.nodes = {node};
    }
    if (n != 1) return invalid_argument(at + ": needs exactly one of " + join(kind_names));
    sc.events.push_back(std::move(ev));
  }
  std::stable_sort(sc.events.begin(), sc.events.end(), [](const ClusterEvent& a, const ClusterEvent& b) { return a.at < b.at; });
  return {};
}

// The placement properties of a `placed:` expectation.
Status parse_placed(const YAML::Node& e, const std::string& at, const ScheduleScenario& sc, Expectation& ex) {
  if (e["on_node"]) TRY(node_names(e, "on_node", at, sc, ex.on_node));
  if (e["in_leaf"]) {
    TRY(get(e, "in_leaf", at, ex.in_leaf));
    const bool known = std::any_of(sc.nodes.begin(), sc.nodes.end(), [&](const NodeSpec& n) {
      return std::find(n.path.begin(), n.path.end(), ex.in_leaf) != n.path.end();
    });
    if (!known) return invalid_argument(at + ".in_leaf: \"" + ex.in_leaf + "\" is on no node's path");
  }
  if (e["on_model"]) {
    TRY(get(e, "on_model", at, ex.on_model));
    auto m = (sc.catalog ? *sc.catalog : GpuCatalog::builtin()).find(ex.on_model);
    if (!m.ok()) return invalid_argument(at + ".on_model: " + m.error().message);
    ex.on_model = (*m)->name;
  }
  if (e["on_nodes"]) {
    TRY(get(e, "on_nodes", at, ex.on_nodes));
    if (ex.on_nodes < 1) return invalid_argument(at + ".on_nodes: must be >= 1");
  }
  if (e["task_gpus"]) {
    TRY(get(e, "task_gpus", at, ex.task_gpus));
    if (ex.task_gpus.empty()) return invalid_argument(at + ".task_gpus: give the GPUs of every task, in task order");
    for (int g : ex.task_gpus)
      if (g < 0 || g > 16) return invalid_argument(at + ".task_gpus: each must be in 0..16, got " + std::to_string(g));
  }
  if (ex.on_node.empty() && ex.in_leaf.empty() && ex.on_model.empty() && ex.on_nodes == 0 && ex.task_gpus.empty())
    return invalid_argument(at + ": placed needs at least one of on_node, in_leaf, on_model, on_nodes, task_gpus");
  return {};
}

Status parse_expect(const YAML::Node& list, ScheduleScenario& sc) {
  if (!list || list.IsNull()) return {};
  if (!list.IsSequence()) return invalid_argument("scenario.expect: must be a list");
  using K = Expectation::Kind;
  static const std::vector<std::pair<std::string, K>> kinds = {
      {"running", K::kRunning},       {"pending", K::kPending},
      {"preempted", K::kPreempted},   {"not_preempted", K::kNotPreempted},
      {"finished", K::kFinished},     {"timed_out", K::kTimedOut},
      {"mig_gpus", K::kMigGpus},      {"preemptions", K::kPreemptions},
      {"placed", K::kPlaced},         {"preemptions_at_most", K::kPreemptionsAtMost},
      {"mig_changes_at_most", K::kMigChangesAtMost}};
  static const std::vector<std::string> pending_keys = {"reason", "queue_position", "estimated_start", "reserved"};
  static const std::vector<std::string> placed_keys = {"on_node", "in_leaf", "on_model", "on_nodes", "task_gpus"};
  std::vector<std::string> keys = {"at"}, kind_names;
  for (const auto& [k, kind] : kinds) keys.push_back(k), kind_names.push_back(k);
  keys.insert(keys.end(), pending_keys.begin(), pending_keys.end());
  keys.insert(keys.end(), placed_keys.begin(), placed_keys.end());
  keys.push_back("since");
  std::set<std::string> names;
  for (const SimJobSpec& j : sc.jobs) names.insert(j.name);
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node e = list[i];
    const std::string at = "expect[" + std::to_string(i) + "]";
    TRY(known_keys(e, at, keys));
    Expectation ex;
    TRY(get(e, "at", at, ex.at, true));
    int n = 0;
    for (const auto& [key, kind] : kinds) {
      if (!e[key]) continue;
      ++n;
      ex.kind = kind;
      const char* k = key.c_str();
      if (kind == K::kMigGpus || kind == K::kPreemptionsAtMost || kind == K::kMigChangesAtMost) {
        TRY(get(e, k, at, ex.count));
        if (ex.count < 0) return invalid_argument(at + "." + key + ": must be >= 0");
      } else if (kind == K::kPreemptions) {
        if (!e[k].IsMap()) return invalid_argument(at + ".preemptions: must be a map of job to count");
        for (const auto& kv : e[k]) {
          ex.jobs.push_back(kv.first.as<std::string>());
          try {
            ex.counts.push_back(kv.second.as<int>());
          } catch (const YAML::Exception&) {
            return invalid_argument(at + ".preemptions." + ex.jobs.back() + ": must be an integer");
          }
        }
      } else if (kind == K::kPlaced) {
        std::string one;
        TRY(get(e, k, at, one));  // one job: its placement is checked
        ex.jobs = {one};
      } else if (e[k].IsSequence()) {
        TRY(get(e, k, at, ex.jobs));
      } else {
        std::string one;
        TRY(get(e, k, at, one));
        ex.jobs = {one};
      }
    }
    if (n != 1) return invalid_argument(at + ": needs exactly one of " + join(kind_names));
    for (const std::string& jn : ex.jobs)
      if (!names.count(jn)) return invalid_argument(at + ": unknown job \"" + jn + "\"");
    // Qualifiers belong to one kind each.
    auto only_with = [&](const std::vector<std::string>& ks, bool allowed, const std::string& with) -> Status {
      for (const std::string& q : ks)
        if (e[q] && !allowed) return invalid_argument(at + "." + q + ": only with " + with);
      return {};
    };
    TRY(only_with(pending_keys, ex.kind == K::kPending, "pending"));
    TRY(only_with(placed_keys, ex.kind == K::kPlaced, "placed"));
    TRY(only_with({"since"}, ex.kind == K::kPreemptionsAtMost || ex.kind == K::kMigChangesAtMost,
                  "preemptions_at_most or mig_changes_at_most"));
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
    if (ex.kind == K::kPlaced) TRY(parse_placed(e, at, sc, ex));
    if (e["since"]) {
      Time v = 0;
      TRY(get(e, "since", at, v));
      if (v >= ex.at) return invalid_argument(at + ".since: must be before at (" + std::to_string(ex.at) + ")");
      ex.since = v;
    }
    ex.text = at;
    sc.expect.push_back(std::move(ex));
  }
  return {};
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
  try {
    TRY(known_keys(root, "scenario", kTopKeys));
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
    TRY(parse_jobs(root["jobs"], sc));
    TRY(parse_events(root["events"], sc));
    TRY(parse_expect(root["expect"], sc));
    return sc;
  } catch (const YAML::Exception& e) {  // e.g. a map where a scalar key was expected
    return invalid_argument(std::string("scenario: ") + e.what());
  }
}

}  // namespace tessera::sim
