// The cluster configuration file (cluster_config.h): the shared sections (yaml_fields.cc) plus the
// complete validation at load (levels, nodes built into a ClusterState, the queue tree, priority
// classes per queue, the scheduler configuration), then chargeback and storage (storage_config.cc).
// Stateless; thread-safe.
#include "config/cluster_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <set>
#include <sstream>

#include "config/job_spec.h"
#include "config/yaml_fields.h"
#include "core/placement/policy.h"

namespace tessera::config {
namespace {

const std::vector<std::string> kTopKeys = {"name",   "levels",           "nodes",  "queues",
                                           "config", "priority_classes", "policy", "gpu_models",
                                           "chargeback", "pools", "pool_rules", "autoscaling", "storage"};

// `chargeback: {rates: {MODEL: "2.49", ...}, currency: USD, idle_share: proportional|even|none}`.
Status parse_chargeback(const YAML::Node& n, const GpuCatalog& catalog, ChargebackConfig& out) {
  const std::string at = "chargeback";
  TESSERA_TRY(known_keys(n, at, {"rates", "currency", "idle_share"}));
  if (const YAML::Node rates = n["rates"]) {
    if (!rates.IsMap()) return invalid_argument(at + ".rates: must be a map of GPU model to price per GPU-hour");
    for (const auto& kv : rates) {
      const std::string model = kv.first.IsScalar() ? kv.first.Scalar() : "";
      const std::string rat = at + ".rates." + model;
      if (model.empty()) return invalid_argument(at + ".rates: keys must be GPU model names");
      auto m = catalog.find(model);
      if (!m.ok()) return invalid_argument(rat + ": " + m.error().message);
      if (!kv.second.IsScalar()) return invalid_argument(rat + ": must be a price such as \"2.49\"");
      auto price = parse_price_micro(kv.second.Scalar());
      if (!price.ok()) return invalid_argument(rat + ": " + price.error().message);
      if (!out.rates_micro.emplace((*m)->name, *price).second)
        return invalid_argument(rat + ": model \"" + (*m)->name + "\" has a rate already (an alias given twice?)");
    }
  }
  if (const YAML::Node cur = n["currency"]) {
    if (!cur.IsScalar()) return invalid_argument(at + ".currency: must be a currency code such as USD");
    const std::string c = cur.Scalar();
    bool ok = c.size() == 3;
    for (char ch : c) ok = ok && ch >= 'A' && ch <= 'Z';
    if (!ok) return invalid_argument(at + ".currency: \"" + c + "\" is not an ISO 4217 code (three capital letters, e.g. USD)");
    out.currency = c;
  }
  if (const YAML::Node rule = n["idle_share"]) {
    const std::string r = rule.IsScalar() ? rule.Scalar() : "";
    if (r == "proportional") out.idle_share = IdleShare::kProportional;
    else if (r == "even") out.idle_share = IdleShare::kEven;
    else if (r == "none") out.idle_share = IdleShare::kNone;
    else return invalid_argument(at + ".idle_share: unknown \"" + r + "\"; expected one of proportional, even, none");
  }
  return {};
}

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
  for (size_t i = 0; i < c.pools.size(); ++i)
    if (auto r = cluster.add_pool(c.pools[i]); !r.ok())
      return invalid_argument("pools[" + std::to_string(i) + "]: " + r.error().message);
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

const PriorityClass* default_priority_class(const ClusterConfig& c) {
  const std::string name = JobSpec{}.priority_class;
  const PriorityClass* lowest = nullptr;
  for (const PriorityClass& pc : c.scheduler.priority_classes) {
    if (pc.name == name) return &pc;
    if (!lowest || pc.value < lowest->value) lowest = &pc;
  }
  return lowest;
}

const char* idle_share_name(IdleShare r) {
  switch (r) {
    case IdleShare::kProportional: return "proportional";
    case IdleShare::kEven: return "even";
    case IdleShare::kNone: return "none";
  }
  return "proportional";
}

Result<int64_t> parse_price_micro(const std::string& text) {
  const std::string why = "must be a price >= 0 with at most 6 decimals, such as \"2.49\", got \"" + text + "\"";
  size_t i = 0;
  int64_t whole = 0, frac = 0;
  int whole_digits = 0, frac_digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++whole_digits) {
    if (whole_digits >= 12) return invalid_argument(why + " (at most 12 digits before the point)");
    whole = whole * 10 + (text[i] - '0');
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++frac_digits) {
      if (frac_digits >= 6) return invalid_argument(why);
      frac = frac * 10 + (text[i] - '0');
    }
    if (frac_digits == 0) return invalid_argument(why);
  }
  if (i != text.size() || whole_digits == 0) return invalid_argument(why);
  for (int k = frac_digits; k < 6; ++k) frac *= 10;
  return whole * 1000000 + frac;
}

Result<ClusterConfig> parse_cluster_config_yaml(std::string_view text) {
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) return invalid_argument("cluster: expected a map with " + join(kTopKeys));
    TESSERA_TRY(known_keys(root, "cluster", kTopKeys));
    ClusterConfig c;
    std::vector<size_t> node_origin;
    TESSERA_TRY(parse_cluster_sections(root, "", c, &node_origin));
    TESSERA_TRY(validate(c, node_origin));
    if (const YAML::Node cb = root["chargeback"])
      TESSERA_TRY(parse_chargeback(cb, c.catalog ? *c.catalog : GpuCatalog::builtin(), c.chargeback));
    if (const YAML::Node st = root["storage"]; st && !st.IsNull()) {
      std::vector<std::string> pools = {"default"}, queues;
      for (const Pool& p : c.pools)
        if (p.name != "default") pools.push_back(p.name);
      for (const QueueSpec& q : c.queues) queues.push_back(q.name);
      TESSERA_TRY(parse_storage_config(st, pools, queues, c.storage));
    }
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
                                   const GpuCatalog& catalog, const std::vector<Pool>& pools) {
  ClusterState c(catalog, NetworkLevels(levels));
  for (const Pool& p : pools)
    if (auto r = c.add_pool(p); !r.ok()) return r.error();
  for (const NodeSpec& n : nodes)
    if (auto r = c.add_node(n); !r.ok()) return r.error();
  return c;
}

Result<ClusterState> build_cluster_state(const ClusterConfig& c) {
  return build_cluster(c.levels, c.nodes, c.catalog ? *c.catalog : GpuCatalog::builtin(), c.pools);
}

}  // namespace tessera::config
