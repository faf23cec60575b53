// Reading YAML fields into core types, shared by the cluster configuration (cluster_config.cc) and
// the simulator's scenario files (sim/schedule_sim.cc), so that both grammars have one definition of
// each section: levels, nodes, queues, config, priority_classes, policy, gpu_models. Every error names
// the field path and says why. Stateless functions; thread-safe. Not a public file format API: the
// formats are documented in cluster_config.h and docs/scenarios.md.
#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/cluster_config.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"
#include "core/status.h"

// Returns the error of a Status-valued expression from the enclosing function.
#define TESSERA_TRY(expr)             \
  do {                                \
    if (Status s_ = (expr); !s_.ok()) \
      return s_.error();              \
  } while (0)

namespace tessera::config {

// `at.key` into `out` (yaml-cpp conversion); absent: unchanged (or an error when required).
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

// A map of GPU class to milli-GPU.
Status get_amounts(const YAML::Node& n, const char* key, const std::string& at, ClassAmounts& out);
// An integer >= 0 (absent: unchanged).
Status non_negative(const YAML::Node& n, const char* key, const std::string& at, int64_t& out);
// Unknown keys are errors (a typo would otherwise silently leave a default).
Status known_keys(const YAML::Node& n, const std::string& at, const std::vector<std::string>& keys);
std::string join(const std::vector<std::string>& v);

const std::vector<std::pair<std::string, JobOrder>>& order_names();
// `config:`: starts from `preset` (default: the configuration given), then each field given.
Status parse_config(const YAML::Node& c, SchedulerConfig& cfg);
// `priority_classes:` replaces `out`; each class's `roles:` (who besides admins may use it) goes to
// `roles` by class name (classes without `roles:` are absent from it).
Status parse_priority_classes(const YAML::Node& list, std::vector<PriorityClass>& out,
                              std::map<std::string, std::vector<std::string>>& roles);

// A YAML tree as JSON: plain scalars typed as YAML 1.2's core schema says (ints, true/false, null;
// numbers that are not integers become non-integer JSON numbers), quoted scalars stay strings. Depth
// and size (with aliases expanded) are bounded. `at` prefixes errors.
Status yaml_to_json(const YAML::Node& n, nlohmann::json& out, const std::string& at);

// A look at YAML text before it is parsed, so that the parser's memory stays proportional to a
// sensible document: refuses nesting deeper than yaml_to_json allows (flow brackets, or chains of
// "- " on one line) and more than `max_items` structural items (flow separators, sequence entries,
// keys). Quoted scalars and comments are skipped. Cheap: one pass, no allocation.
Status yaml_precheck(std::string_view text, size_t max_items);

// The cluster sections of a cluster or scenario file into `out` (fields only; parse_cluster_config_yaml
// validates the whole). `top` names the file's top level in messages ("scenario"; empty for none).
// `node_origin`, when given, gets for each expanded node the index of its `nodes[]` entry.
Status parse_cluster_sections(const YAML::Node& root, const std::string& top, ClusterConfig& out,
                              std::vector<size_t>* node_origin = nullptr);

}  // namespace tessera::config
