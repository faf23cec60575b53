// Scenario files: a hand-written cluster plus a sequence of gang arrivals/departures with the
// expected outcome of each, in JSON. The conformance suite runs every scenario under every policy.
// Format (all quantities integers: milli-CPU, MiB, milli-GPU):
// {
//   "name": "...", "levels": ["spine", "leaf"],
//   "nodes": [{"name": "n0", "count": 1, "gpu_model": "H100-80GB-SXM", "gpus": 8, "cpu": 64000,
//              "memory": 524288, "path": ["s0", "l0"], "mig_gpus": [0], "topology": "nvswitch|nvlink-pairs|pcie"}],
//   "steps": [{"id": "a", "gang": {"tasks": 2, "min_tasks": 0, "gpus": 8, "gpu_milli": 1000, "gpu_memory": 0,
//              "mig": "3g", "cpu": 1000, "memory": 1024, "models": ["H100-80GB-SXM"],
//              "topology": {"mode": "required|preferred", "level": "leaf"}},
//              "expect": "placed|retry-later|never-fits", "same": "leaf", "max_nodes": 1,
//              "reason_contains": "..."},
//             {"release": "a"}]
// }
// With "count" > 1 a node entry expands to name-0 .. name-(count-1). Errors name the field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "core/cluster.h"
#include "core/placement/engine.h"
#include "core/request.h"
#include "core/status.h"

namespace tessera::sim {

struct ScenarioStep {
  std::string id;       // for later release
  std::optional<Gang> gang;
  std::string release;  // id of an earlier placed step to release
  std::optional<Outcome> expect;
  std::string same_level;  // all tasks inside one domain of this level
  int max_nodes = 0;       // 0 = no check
  std::string reason_contains;
};

struct Scenario {
  std::string name;
  std::vector<std::string> levels;
  std::vector<NodeSpec> nodes;
  std::vector<ScenarioStep> steps;
};

Result<Scenario> parse_scenario(const std::string& json_text);
// build_cluster(levels, nodes[, catalog]) is config's (config/cluster_config.h); this one builds a scenario's.
using config::build_cluster;
Result<ClusterState> build_cluster(const Scenario& s);

}  // namespace tessera::sim
