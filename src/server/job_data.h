// A job's container and data mounts against the cluster's `storage:` (config/storage_config.h):
// checked at submit (which datasets, volumes and host paths a job in its queue may mount, and how),
// turned into the pools that hold all its data (the scheduler keeps the job off other pools:
// TaskRequest::pools), and resolved into host paths for one node's pool in the agent's assignment.
// Pure functions of their arguments; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/job_spec.h"
#include "config/storage_config.h"
#include "core/pool.h"
#include "core/status.h"

namespace tessera::server {

// Errors name the field: "mounts[1].volume: queue nlp may not mount team-scratch (...)" is
// permission denied (403); an unknown name, or read_only: false on a read-only source, is invalid
// (400). `queue_path`: the job's leaf queue and its ancestors' names.
Status check_job_data(const config::JobSpec& spec, const config::StorageConfig& storage,
                      const std::vector<std::string>& queue_path);

// The pools (ids, ascending) on which every dataset and volume the job mounts is present; empty when
// it mounts none (any pool). `pools`: the cluster's pools, by id. When the job's data is on no pool
// together, the result holds no id and the error names the mounts.
Result<std::vector<PoolId>> data_pools(const config::JobSpec& spec, const config::StorageConfig& storage,
                                       const std::vector<Pool>& pools);

// The assignment's "container", "mounts" (host source, path inside, read_only) and the checkpoint
// store's host directory for job `job_id` on a node of `pool`: {container, mounts, checkpoint_host_dir}.
nlohmann::json task_data_json(const config::JobSpec& spec, const config::StorageConfig& storage, const std::string& pool,
                              int64_t job_id);

}  // namespace tessera::server
