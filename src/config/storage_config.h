// The cluster config's `storage:` section: where job checkpoints live on the hosts, the host path
// prefixes jobs may mount, and the named datasets (read-only) and volumes jobs mount by name
// (job_spec_container.h), each on every pool or only on some, and open to every queue or only some:
//
//   storage:
//     checkpoints: /mnt/ckpt           # or {path: /mnt/ckpt, pools: {spot-a: /mnt/spot-ckpt}}
//     host_paths: [/mnt/shared, /home] # absent = no host_path mounts
//     datasets:
//       - {name: imagenet, path: /mnt/datasets/imagenet, queues: [vision, nlp]}
//       - {name: laion, pools: {gpu-a: /mnt/a/laion, default: /nfs/laion}}
//     volumes:
//       - {name: team-scratch, path: /mnt/scratch, writable: true, queues: [nlp]}
//
// Validated at load (names, absolute normal paths, declared pools and queues); errors name the field
// path ("storage.datasets[1].pools.gpu-x: ..."). Value types; pure functions (thread-safe).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace YAML {
class Node;
}

namespace tessera::config {

// A dataset or volume.
struct DataSource {
  std::string name;                               // [A-Za-z0-9._-]{1,128}
  std::string path;                               // host path on every pool ("" = only pool_paths)
  std::map<std::string, std::string> pool_paths;  // pool name -> host path (overrides `path`)
  bool writable = false;                          // volumes only; datasets are read-only
  std::vector<std::string> queues;                // queue names allowed to mount it; empty = every queue
  // The host path on nodes of `pool`; nullopt: not on that pool.
  std::optional<std::string> path_on(const std::string& pool) const;
  // Whether a job in a queue may mount it, given that queue's name and its ancestors' names: true when
  // `queues` is empty or names one of them.
  bool allows_queue(const std::vector<std::string>& queue_and_ancestors) const;
};

struct StorageConfig {
  std::string checkpoints;                                   // "" = none (node-local checkpoints)
  std::map<std::string, std::string> checkpoint_pool_paths;  // pool -> path (overrides `checkpoints`)
  // The host directory holding job checkpoints (job J's is <it>/job-J) on nodes of `pool`; nullopt: none.
  std::optional<std::string> checkpoints_on(const std::string& pool) const;
  std::vector<std::string> host_paths;                       // prefixes host_path mounts must be within
  // Whether `p` is one of host_paths or under one (prefix + "/..."; "/mnt/sharedX" is not under "/mnt/shared").
  bool host_path_allowed(const std::string& p) const;
  std::vector<DataSource> datasets, volumes;
  const DataSource* dataset(const std::string& name) const;  // nullptr if none
  const DataSource* volume(const std::string& name) const;   // nullptr if none
};

// `storage:` (a map) into `out`. `pools` and `queues` are the names the config declares ("default" is
// always a pool).
Status parse_storage_config(const YAML::Node& n, const std::vector<std::string>& pools,
                            const std::vector<std::string>& queues, StorageConfig& out);

}  // namespace tessera::config
