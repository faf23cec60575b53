// Cluster files for the simulator: the YAML cluster configuration (config/cluster_config.h), or an
// openb node list CSV. Stateless; thread-safe.
#include "sim/cluster_config.h"

#include <fstream>
#include <sstream>

#include "config/cluster_config.h"
#include "sim/openb.h"

namespace tessera::sim {

Result<SimCluster> parse_cluster_yaml(const std::string& text) {
  auto cfg = config::parse_cluster_config_yaml(text);
  if (!cfg.ok()) {
    const std::string& m = cfg.error().message;
    if (m.rfind("cluster.jobs:", 0) == 0 || m.rfind("cluster.expect:", 0) == 0)
      return invalid_argument("cluster: jobs and expect belong in scenarios, not cluster files");
    return cfg.error();
  }
  auto cluster = config::build_cluster_state(*cfg);
  if (!cluster.ok()) return cluster.error();
  return SimCluster{std::move(*cluster), std::move(cfg->queues), std::move(cfg->scheduler), std::move(cfg->catalog),
                    cfg->autoscaling};
}

Result<SimCluster> load_cluster_file(const std::string& path) {
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  if (csv) {
    auto c = load_openb_nodes(path);
    if (!c.ok()) return c.error();
    return SimCluster{std::move(*c), {QueueSpec{"default", "", {}, {}, 1}}, SchedulerConfig{}, nullptr};
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
