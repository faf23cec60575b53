// Cluster files for `tessera sim run --cluster FILE`: the YAML form shared with the timed scenarios
// (levels, nodes, queues, config, priority_classes; docs/scenarios.md), without jobs, or an openb
// node list CSV (one queue "default"). Errors name the file and the field.
#pragma once

#include <string>

#include "core/status.h"
#include "sim/sim_run.h"

namespace tessera::sim {

Result<SimCluster> parse_cluster_yaml(const std::string& yaml_text);
Result<SimCluster> load_cluster_file(const std::string& path);

}  // namespace tessera::sim
