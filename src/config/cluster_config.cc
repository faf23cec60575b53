// The cluster configuration file (cluster_config.h): the shared sections (yaml_fields.cc) plus the
// complete validation at load (levels, nodes built into a ClusterState, the queue tree, priority
// classes per queue, the scheduler configuration). Stateless; thread-safe.
#include "config/cluster_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <set>
#include <sstream>

#include "config/yaml_fields.h"
#include "core/placement/policy.h"

namespace tessera::config {
namespace {

const std::vector<std::string> kTopKeys = {"name",   "levels",           "nodes",  "queues",
                                           "config", "priority_classes", "policy", "gpu_models"};

// QueueTree::build names queues ("queue \"x\": ..."): say which entry of queues[] that is.
Error queue_error(const std::vector<QueueSpec>& queues, const std::string& message) {
  const std::string prefix = "queue \"";
  if (message.compare(0, prefix.size(), prefix) == 0) {
    const size_t end = message.find('"', prefix.size());
    if (end != std::string::npos) {
      const std::string name = message.substr(prefix.size(), end - prefix.size());
      for (size_t i = 0; i < queues.size(); ++i)
        if (queues[i].name == name) return invalid_argument("queues[" + std::to_string(i) + "] (" + message + ")");
    }
  }
  return invalid_argument("queues: " + message);
}

Status validate(const ClusterConfig& c, const std::vector<size_t>& node_origin) {
  std::set<std::string> level_names;
  for (size_t i = 0; i < c.levels.size(); ++i) {
    const std::string at = "levels[" + std::to_string(i) + "]";
    if (c.levels[i].empty()) return invalid_argument(at + ": must not be empty");
    if (c.levels[i] == "node") return invalid_argument(at + ": \"node\" is reserved (it names the node itself)");
    if (!level_names.insert(c.levels[i]).second) return invalid_argument(at + ": \"" + c.levels[i] + "\" used twice");
  }
  std::set<std::string> node_names;
  for (size_t k = 0; k < c.nodes.size(); ++k) {
    const NodeSpec& n = c.nodes[k];
    const std::string at = "nodes[" + std::to_string(node_origin[k]) + "]";
    if (n.name.empty()) return invalid_argument(at + ".name: must not be empty");
    if (!node_names.insert(n.name).second)
      return invalid_argument(at + ".name: node \"" + n.name + "\" defined twice (names must be unique)");
    if (n.path.size() != c.levels.size())
      return invalid_argument(at + ".path: needs one domain per network level (" + std::to_string(c.levels.size()) +
                              ": " + join(c.levels) + "), got " + std::to_string(n.path.size()));
    if (n.gpu_count > 0) {
      if (n.gpu_model.empty()) return invalid_argument(at + ".gpu_model: required when gpus > 0");
      if (auto m = c.catalog->find(n.gpu_model); !m.ok()) return invalid_argument(at + ".gpu_model: " + m.error().message);
    }
  }
  ClusterState cluster(*c.catalog, NetworkLevels(c.levels));
  for (size_t k = 0; k < c.nodes.size(); ++k)
    if (auto r = cluster.add_node(c.nodes[k]); !r.ok())
      return invalid_argument("nodes[" + std::to_string(node_origin[k]) + "]: " + r.error().message);
  auto tree = QueueTree::build(c.queues);
  if (!tree.ok()) return queue_error(c.queues, tree.error().message);
  std::vector<std::string> classes;
  for (const PriorityClass& pc : c.scheduler.priority_classes) classes.push_back(pc.name);
  for (size_t i = 0; i < c.queues.size(); ++i) {
    auto it = c.queue_classes.find(c.queues[i].name);
    if (it == c.queue_classes.end()) continue;
    for (size_t k = 0; k < it->second.size(); ++k)
      if (std::find(classes.begin(), classes.end(), it->second[k]) == classes.end())
        return invalid_argument("queues[" + std::to_string(i) + "].priority_classes[" + std::to_string(k) +
                                "]: unknown class \"" + it->second[k] + "\"; expected one of " + join(classes));
  }
  const std::vector<std::string> policies = policy_names();
  if (std::find(policies.begin(), policies.end(), c.scheduler.policy) == policies.end())
    return invalid_argument("policy: unknown \"" + c.scheduler.policy + "\"; expected one of " + join(policies));
  if (auto s = Scheduler::create(c.scheduler); !s.ok()) return invalid_argument("config: " + s.error().message);
  return {};
}

}  // namespace

Result<ClusterConfig> parse_cluster_config_yaml(std::string_view text) {
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) return invalid_argument("cluster: expected a map with " + join(kTopKeys));
    TESSERA_TRY(known_keys(root, "cluster", kTopKeys));
    ClusterConfig c;
    std::vector<size_t> node_origin;
    TESSERA_TRY(parse_cluster_sections(root, "", c, &node_origin));
    TESSERA_TRY(validate(c, node_origin));
    return c;
  } catch (const YAML::Exception& e) {
    return invalid_argument("cluster: not valid YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                            std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("cluster: cannot read: ") + e.what());
  }
}

Result<ClusterConfig> load_cluster_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument(path + ": cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  auto c = parse_cluster_config_yaml(text.str());
  if (!c.ok()) return invalid_argument(path + ": " + c.error().message);
  return c;
}

Result<ClusterState> build_cluster(const std::vector<std::string>& levels, const std::vector<NodeSpec>& nodes,
                                   const GpuCatalog& catalog) {
  ClusterState c(catalog, NetworkLevels(levels));
  for (const NodeSpec& n : nodes)
    if (auto r = c.add_node(n); !r.ok()) return r.error();
  return c;
}

Result<ClusterState> build_cluster_state(const ClusterConfig& c) {
  return build_cluster(c.levels, c.nodes, c.catalog ? *c.catalog : GpuCatalog::builtin());
}

}  // namespace tessera::config
