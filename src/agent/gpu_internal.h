// Private to the agent's GPU code: helpers shared by the fake and the NVML backends (stable hashes,
// model matching, planning a MIG layout change against core's placement rules). Not a public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_inventory.h"
#include "core/gpu_catalog.h"
#include "core/status.h"

namespace tessera::agent::detail {

// FNV-1a, 64 bit: deterministic across runs, builds and platforms (unlike std::hash).
uint64_t fnv1a64(std::string_view s, uint64_t seed = 0xcbf29ce484222325ull);
// "PREFIX" + a UUID-shaped hex string (8-4-4-4-12) derived from `key` only.
std::string synthetic_uuid(std::string_view prefix, std::string_view key);

// The catalog model for an NVML device name: the name itself, then without a leading "NVIDIA " /
// "Tesla ". nullptr when none matches.
const GpuModel* match_model(const GpuCatalog& catalog, std::string_view nvml_name);

// Catalog name of a GI profile id on `model`, or "profile-<id>" when unknown.
std::string profile_name(const GpuModel* model, int profile_id);

// What apply_mig_layout must do to turn `current` into `want`.
struct MigPlan {
  std::vector<MigInstanceInfo> destroy;                 // existing instances not wanted
  std::vector<std::pair<const MigProfile*, int>> create;  // (catalog profile, start), missing ones
  std::vector<MigInstanceInfo> keep;                    // existing instances wanted as they are
};

// Validates `want` against the model's rules (core MigLayout) and diffs it with `current`. Errors:
// unknown model or profile, a placement the rules forbid, MIG mode off, or an instance to destroy
// whose uuid is in `busy_uuids`. Nothing is changed by planning.
Result<MigPlan> plan_mig_layout(const GpuModel* model, const GpuInfo& current, const MigLayout& want,
                                const std::vector<std::string>& busy_uuids);

}  // namespace tessera::agent::detail
