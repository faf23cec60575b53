// MIG layout of one GPU: which GPU instances exist at which memory-slice intervals.
// Placement is interval allocation on the memory-slice axis with the profile's aligned starts
// (hardware.md §1.3/§6). A layout never holds overlapping intervals, more than a profile's
// max_instances, more than one "+me" instance, or more compute slices than the model has.
// Rule violations are returned as errors, never thrown. Value type; thread-compatible.
#pragma once

#include <array>
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
  // True if `profile` can be created somewhere now (no allocation).
  bool can_create_anywhere(const MigProfile& profile) const;
  // Reconfiguration: a start at which `profile` could be created after destroying the idle
  // instances that overlap it (fewest memory slices destroyed, then NVIDIA's order), or -1.
  // `destroy` receives a bitmask of the start slices of the instances to destroy (may be null).
  int reclaim_start(const MigProfile& profile, uint8_t* destroy) const;
  // Instances of `profile` creatable if every idle instance were destroyed first (an upper bound
  // on what reconfiguration can give).
  int creatable_count_reclaiming(const MigProfile& profile) const;
  // Starts at which `profile` could be created now, ascending.
  std::vector<int> feasible_starts(const MigProfile& profile) const;
  // Creates the instance; error names the rule that forbids it.
  Status create(const MigProfile& profile, int start);
  // Creates at the first feasible start in NVIDIA's placement order (start_order), as
  // `nvidia-smi mig -cgi <id>` does; returns the start used.
  Result<int> create_first_fit(const MigProfile& profile);
  // The order in which the driver tries starts when no placement is given: the upper half of the axis
  // first, then the lower half, each ascending ({4,5,6,7,0,1,2,3} on 8 slices, {2,3,0,1} on A30).
  // Inferred from published nvidia-smi output: GI ids follow placements ([4,8)=1, [0,4)=2, 2-slice
  // 4,6,0,2 = 3..6, 1-slice 4..7,0..3 = 7..14) and -cgi takes the lowest free id. This reproduces the
  // MIG guide's example: -cgi 9,19,14,19 gives 3g@4, 1g@0, 2g@2, 1g@1, while -cgi 19,19,14,9 puts the
  // 1g's at 4 and 5 and the 2g at 0, so the 3g fails. The A30 order is by analogy [unverified].
  static std::vector<int> start_order(int memory_slices);
  Status destroy(int start);  // the instance starting there must exist and be idle
  Status set_in_use(int start, bool in_use);
  // Number of instances of `profile` that could still be created (greedy, given the current layout).
  int creatable_count(const MigProfile& profile) const;
  // Checks all invariants; returns an error describing the first broken one.
  Status check() const;

 private:
  enum class Rule { kOk, kNoModel, kForeignProfile, kOutOfRange, kUnaligned, kOverlap, kMaxInstances,
                    kMediaExtension, kCompute };
  // The model's own copy of `profile` (matched by id and name), or nullptr.
  const MigProfile* own(const MigProfile& profile) const;
  Rule violated(const MigProfile& profile, int start) const;
  Error explain(Rule rule, const MigProfile& profile, int start) const;

  // Whether `p` (the model's own) fits at `start` given explicit counters; shared by violated()
  // and the allocation-free creatable_count().
  Rule check_counts(const MigProfile& p, int start, uint8_t occupied, int same, bool has_me, int compute) const;
  void recount();

  const GpuModel* model_ = nullptr;
  uint8_t occupied_ = 0;
  std::vector<MigInstance> instances_;
  // Derived from instances_ (recount()): compute slices used, a +me instance exists, count per profile id.
  int compute_used_ = 0;
  bool has_me_ = false;
  std::array<uint8_t, 32> count_by_id_{};
};

}  // namespace tessera
