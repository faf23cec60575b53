#include "sim/cluster_config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "sim/openb.h"
#include "sim/scenario.h"
#include "sim/schedule_sim.h"

namespace tessera::sim {

Result<SimCluster> parse_cluster_yaml(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return invalid_argument(std::string("cluster: not valid YAML: ") + e.what());
  }
  if (!root.IsMap()) return invalid_argument("cluster: expected a map with nodes, queues (and optionally levels, config)");
  if (root["jobs"] || root["expect"]) return invalid_argument("cluster: jobs and expect belong in scenarios, not cluster files");
  root["jobs"] = YAML::Load("[]");  // the scenario grammar without its jobs
  YAML::Emitter out;
  out << root;
  auto sc = parse_schedule_scenario(out.c_str());
  if (!sc.ok()) return sc.error();
  auto cluster = build_cluster(sc->levels, sc->nodes);
  if (!cluster.ok()) return cluster.error();
  return SimCluster{std::move(*cluster), sc->queues, sc->config};
}

Result<SimCluster> load_cluster_file(const std::string& path) {
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  if (csv) {
    auto c = load_openb_nodes(path);
    if (!c.ok()) return c.error();
    return SimCluster{std::move(*c), {QueueSpec{"default", "", {}, {}, 1}}, SchedulerConfig{}};
  }
  std::ifstream in(path);
  if (!in) return invalid_argument("--cluster: cannot open " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto c = parse_cluster_yaml(text.str());
  if (!c.ok()) return invalid_argument(path + ": " + c.error().message);
  return c;
}

}  // namespace tessera::sim
