// The cluster configuration file (YAML) shared by `tessera server --config` and `tessera sim`:
// network levels, capacity pools and pool rules, nodes or node groups (`count`), GPU catalog
// overrides, queues (with the priority classes each may use), the scheduler's configuration and
// priority classes, and `storage:` (the checkpoint directories, host paths, datasets and volumes jobs
// in containers mount: storage_config.h). The grammar is the one docs/scenarios.md documents for
// scenario files (minus jobs and expectations; plus storage, which scenario files do not take).
// Validation is complete at load: every error names the field path ("queues[2].guaranteed",
// "nodes[0].gpu_model", "storage.datasets[1].pools.gpu-x") and says why. Pure functions; thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/storage_config.h"
#include "core/autoscale.h"
#include "core/cluster.h"
#include "core/gpu_catalog.h"
#include "core/sched/queues.h"
#include "core/sched/scheduler.h"
#include "core/status.h"

namespace tessera::config {

// How the cluster's unallocated (idle or reserved) GPU time is shared out in chargeback reports
// (docs/chargeback.md): in proportion to each account's allocated GPU time (default), evenly per team,
// or not at all.
enum class IdleShare : uint8_t { kProportional, kEven, kNone };
const char* idle_share_name(IdleShare r);

// `chargeback:` (optional): GPU-hour rates per GPU model, the currency, the idle-share rule.
struct ChargebackConfig {
  // Canonical GPU model name -> price of one GPU-hour in micro-units of `currency` (1.60 -> 1600000).
  std::map<std::string, int64_t> rates_micro;
  std::string currency = "USD";
  IdleShare idle_share = IdleShare::kProportional;
};

// "2.49" (or a YAML number 2.49) -> 2490000 micro-units. At most 6 decimals, >= 0, below 10^12.
Result<int64_t> parse_price_micro(const std::string& text);

struct ClusterConfig {
  std::string name;                            // optional, for messages and reports
  std::vector<std::string> levels;             // network levels, outermost first (e.g. block, spine, leaf)
  // `pools:` as declared (ClusterState::add_pool order: the built-in "default" is pool 0, the others
  // 1, 2, ... in order; a pool named "default" redefines the built-in). NodeSpec::pool ids follow it.
  std::vector<Pool> pools;
  std::vector<NodeSpec> nodes;                 // groups expanded: name-0, name-1, ...
  std::vector<QueueSpec> queues;               // default: one queue "default"
  // Per queue: the priority classes jobs in it may use (absent or empty = all classes).
  std::map<std::string, std::vector<std::string>> queue_classes;
  // Per class (`priority_classes[].roles`): the roles besides admin that may use it. A class without
  // it is open to team leads and members only up to the default class's value, or where their
  // queue's `priority_classes` names it (default_priority_class, docs/server.md).
  std::map<std::string, std::vector<std::string>> class_roles;
  SchedulerConfig scheduler;                   // `config:`, `priority_classes:`, `policy:`
  // The built-ins plus the `gpu_models:` declared (same fields as config/gpu_models.h's JSON format).
  // ClusterStates built from this config point into it: keep it alive as long as they live.
  std::shared_ptr<const GpuCatalog> catalog;
  ChargebackConfig chargeback;                 // `chargeback:` (reports only; the scheduler ignores it)
  AutoscaleConfig autoscaling;                 // `autoscaling:` (elastic pools; the simulator uses it)
  StorageConfig storage;                       // `storage:` (what jobs in containers may mount)
};

// The class a job gets when its spec names none (JobSpec's "research"), or the lowest class when the
// config has no such class; nullptr only for a config without classes.
const PriorityClass* default_priority_class(const ClusterConfig& c);

// Parses and validates everything, including building the cluster and the queue tree once.
Result<ClusterConfig> parse_cluster_config_yaml(std::string_view text);
// Reads `path`; errors are prefixed with the path.
Result<ClusterConfig> load_cluster_config(const std::string& path);
// The cluster the config describes (nothing allocated). It points into c.catalog.
Result<ClusterState> build_cluster_state(const ClusterConfig& c);
// A cluster with these network levels and nodes (nothing allocated); errors come from
// ClusterState::add_node. The cluster points into `catalog`: keep it alive as long as the cluster.
Result<ClusterState> build_cluster(const std::vector<std::string>& levels, const std::vector<NodeSpec>& nodes,
                                   const GpuCatalog& catalog = GpuCatalog::builtin(),
                                   const std::vector<Pool>& pools = {});

}  // namespace tessera::config
