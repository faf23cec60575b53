// Declaring GPU models the built-in catalog does not know, in a JSON file:
// {"gpu_models": [{"name": "B200", "aliases": ["NVIDIA B200"], "memory_mib": 184320, "sms": 148,
//   "nvlink_generation": 5, "memory_slices": 8, "compute_slices": 7,
//   "mig_profiles": [{"id": 19, "name": "1g.23gb", "compute_slices": 1, "memory_slices": 1,
//                     "starts": [0, 1, 2, 3, 4, 5, 6], "max_instances": 7, "media_extension": false,
//                     "memory_mib": 23552, "sms": 18}]}]}
// Pure functions; thread-safe. Only "name" and "memory_mib" are required; a model without memory_slices is whole/fractional only.
// Errors name the field (e.g. gpu_models[0].mig_profiles[2].starts).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/gpu_catalog.h"
#include "core/status.h"

namespace tessera::config {

Result<std::vector<GpuModel>> parse_gpu_models(const std::string& json_text);
// The models of a parsed `gpu_models` list (the array itself); also used for the cluster config's
// inline `gpu_models:` (YAML converted to JSON).
Result<std::vector<GpuModel>> gpu_models_from_json(const nlohmann::json& list);
// The built-in catalog plus the models declared in `path`.
Result<std::shared_ptr<const GpuCatalog>> load_catalog_with(const std::string& path);

}  // namespace tessera::config
