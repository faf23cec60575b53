// MIG layout of one GPU: which GPU instances exist at which memory-slice intervals.
// Placement is interval allocation on the memory-slice axis with the profile's aligned starts
// (hardware.md §1.3/§6). A layout never holds overlapping intervals, more than a profile's
// max_instances, or more than one "+me" instance. Value type; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/status.h"

namespace tessera {

struct MigInstance {
  int profile_id = 0;
  uint8_t start = 0;  // first memory slice
  uint8_t size = 0;   // memory slices
  bool in_use = false;  // allocated to a task (an idle instance can be handed out or destroyed)
  auto operator<=>(const MigInstance&) const = default;
};

class MigLayout {
 public:
  MigLayout() = default;
  explicit MigLayout(const GpuModel* model) : model_(model) {}

  const GpuModel* model() const { return model_; }
  uint8_t occupied_mask() const { return occupied_; }
  const std::vector<MigInstance>& instances() const { return instances_; }  // sorted by start
  int free_memory_slices() const;
  int used_compute_slices() const;

  // True if `profile` can be created at `start` now (aligned, free, under its max, +me rule, compute).
  bool can_create(const MigProfile& profile, int start) const;
  // Starts at which `profile` could be created now, ascending.
  std::vector<int> feasible_starts(const MigProfile& profile) const;
  // Creates the instance; error names the rule that forbids it.
  Status create(const MigProfile& profile, int start);
  // Creates at the lowest feasible start, as `nvidia-smi mig -cgi <id>` does; returns the start used.
  Result<int> create_first_fit(const MigProfile& profile);
  Status destroy(int start);  // the instance starting there must exist and be idle
  Status set_in_use(int start, bool in_use);
  // Number of instances of `profile` that could still be created (greedy, given the current layout).
  int creatable_count(const MigProfile& profile) const;
  // Checks all invariants; returns an error describing the first broken one.
  Status check() const;

 private:
  const GpuModel* model_ = nullptr;
  uint8_t occupied_ = 0;
  std::vector<MigInstance> instances_;
};

}  // namespace tessera
