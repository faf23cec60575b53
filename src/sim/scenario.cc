#include "sim/scenario.h"

#include <nlohmann/json.hpp>

namespace tessera::sim {
namespace {

using nlohmann::json;

// Reads an optional integer field; error names the path.
Status get_int(const json& j, const char* key, const std::string& at, int64_t& out) {
  if (!j.contains(key)) return {};
  if (!j[key].is_number_integer()) return invalid_argument(at + "." + key + ": must be an integer");
  out = j[key].get<int64_t>();
  return {};
}

Status get_str(const json& j, const char* key, const std::string& at, std::string& out) {
  if (!j.contains(key)) return {};
  if (!j[key].is_string()) return invalid_argument(at + "." + key + ": must be a string");
  out = j[key].get<std::string>();
  return {};
}

Status get_strs(const json& j, const char* key, const std::string& at, std::vector<std::string>& out) {
  if (!j.contains(key)) return {};
  if (!j[key].is_array()) return invalid_argument(at + "." + key + ": must be an array of strings");
  for (const auto& e : j[key]) {
    if (!e.is_string()) return invalid_argument(at + "." + key + ": must be an array of strings");
    out.push_back(e.get<std::string>());
  }
  return {};
}

Result<Gang> parse_gang(const json& j, const std::string& at) {
  if (!j.is_object()) return invalid_argument(at + ": must be an object");
  Gang g;
  int64_t tasks = 1, min_tasks = 0, gpus = 0, milli = 1000, gpu_mem = 0, cpu = 0, mem = 0;
  for (auto [k, v] : {std::pair{"tasks", &tasks}, {"min_tasks", &min_tasks}, {"gpus", &gpus}, {"gpu_milli", &milli},
                      {"gpu_memory", &gpu_mem}, {"cpu", &cpu}, {"memory", &mem}})
    if (Status s = get_int(j, k, at, *v); !s.ok()) return s.error();
  g.tasks = int(tasks);
  g.min_tasks = int(min_tasks);
  g.task.gpu_count = int(gpus);
  g.task.milli_per_gpu = MilliGpu(milli);
  g.task.gpu_memory = MiB(gpu_mem);
  g.task.cpu = MilliCpu(cpu);
  g.task.memory = MiB(mem);
  if (Status s = get_str(j, "mig", at, g.task.mig_profile); !s.ok()) return s.error();
  if (Status s = get_strs(j, "models", at, g.task.gpu_models); !s.ok()) return s.error();
  if (j.contains("topology")) {
    const json& t = j["topology"];
    std::string mode;
    if (Status s = get_str(t, "mode", at + ".topology", mode); !s.ok()) return s.error();
    if (Status s = get_str(t, "level", at + ".topology", g.topology.level); !s.ok()) return s.error();
    if (mode == "required") g.topology.mode = TopologyMode::kRequired;
    else if (mode == "preferred") g.topology.mode = TopologyMode::kPreferred;
    else return invalid_argument(at + ".topology.mode: must be \"required\" or \"preferred\", got \"" + mode + "\"");
  }
  if (Status s = g.validate(); !s.ok()) return invalid_argument(at + ": " + s.message());
  return g;
}

}  // namespace

Result<Scenario> parse_scenario(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("scenario: not a JSON object");
  Scenario sc;
  if (Status s = get_str(j, "name", "scenario", sc.name); !s.ok()) return s.error();
  if (Status s = get_strs(j, "levels", "scenario", sc.levels); !s.ok()) return s.error();
  if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty())
    return invalid_argument("scenario.nodes: must be a non-empty array");
  for (size_t i = 0; i < j["nodes"].size(); ++i) {
    const json& n = j["nodes"][i];
    const std::string at = "scenario.nodes[" + std::to_string(i) + "]";
    NodeSpec spec;
    int64_t count = 1, gpus = 0, cpu = 0, mem = 0;
    std::string topo;
    for (auto [k, v] : {std::pair{"count", &count}, {"gpus", &gpus}, {"cpu", &cpu}, {"memory", &mem}})
      if (Status s = get_int(n, k, at, *v); !s.ok()) return s.error();
    if (Status s = get_str(n, "name", at, spec.name); !s.ok()) return s.error();
    if (Status s = get_str(n, "gpu_model", at, spec.gpu_model); !s.ok()) return s.error();
    if (Status s = get_str(n, "topology", at, topo); !s.ok()) return s.error();
    if (Status s = get_strs(n, "path", at, spec.path); !s.ok()) return s.error();
    if (n.contains("mig_gpus")) {
      if (!n["mig_gpus"].is_array()) return invalid_argument(at + ".mig_gpus: must be an array of GPU indices");
      for (const auto& g : n["mig_gpus"]) {
        if (!g.is_number_integer()) return invalid_argument(at + ".mig_gpus: must be an array of GPU indices");
        spec.mig_gpus.push_back(g.get<int>());
      }
    }
    if (count < 1) return invalid_argument(at + ".count: must be >= 1");
    spec.gpu_count = int(gpus);
    spec.cpu = MilliCpu(cpu);
    spec.memory = MiB(mem);
    if (topo == "nvswitch") spec.topology = std::make_shared<NodeTopology>(NodeTopology::nvswitch(int(gpus), 12));
    else if (topo == "nvlink-pairs") spec.topology = std::make_shared<NodeTopology>(NodeTopology::nvlink_pairs(int(gpus), 4));
    else if (topo == "pcie") spec.topology = std::make_shared<NodeTopology>(NodeTopology::pcie(int(gpus)));
    else if (!topo.empty())
      return invalid_argument(at + ".topology: must be nvswitch, nvlink-pairs or pcie, got \"" + topo + "\"");
    if (count == 1) {
      sc.nodes.push_back(spec);
    } else {
      for (int64_t c = 0; c < count; ++c) {
        NodeSpec copy = spec;
        copy.name = spec.name + "-" + std::to_string(c);
        sc.nodes.push_back(std::move(copy));
      }
    }
  }
  if (!j.contains("steps") || !j["steps"].is_array()) return invalid_argument("scenario.steps: must be an array");
  for (size_t i = 0; i < j["steps"].size(); ++i) {
    const json& st = j["steps"][i];
    const std::string at = "scenario.steps[" + std::to_string(i) + "]";
    ScenarioStep step;
    if (Status s = get_str(st, "id", at, step.id); !s.ok()) return s.error();
    if (Status s = get_str(st, "release", at, step.release); !s.ok()) return s.error();
    if (Status s = get_str(st, "same", at, step.same_level); !s.ok()) return s.error();
    if (Status s = get_str(st, "reason_contains", at, step.reason_contains); !s.ok()) return s.error();
    int64_t max_nodes = 0;
    if (Status s = get_int(st, "max_nodes", at, max_nodes); !s.ok()) return s.error();
    step.max_nodes = int(max_nodes);
    if (st.contains("gang")) {
      auto g = parse_gang(st["gang"], at + ".gang");
      if (!g.ok()) return g.error();
      g->id = JobId(uint32_t(i));
      g->name = step.id.empty() ? "step-" + std::to_string(i) : step.id;
      step.gang = *g;
      std::string expect;
      if (Status s = get_str(st, "expect", at, expect); !s.ok()) return s.error();
      if (expect == "placed") step.expect = Outcome::kPlaced;
      else if (expect == "retry-later") step.expect = Outcome::kRetryLater;
      else if (expect == "never-fits") step.expect = Outcome::kNeverFits;
      else return invalid_argument(at + ".expect: must be placed, retry-later or never-fits, got \"" + expect + "\"");
    } else if (step.release.empty()) {
      return invalid_argument(at + ": needs \"gang\" or \"release\"");
    }
    sc.steps.push_back(std::move(step));
  }
  return sc;
}

Result<ClusterState> build_cluster(const Scenario& s) { return config::build_cluster(s.levels, s.nodes); }

}  // namespace tessera::sim
