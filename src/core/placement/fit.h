// Feasibility of one task on one node, and the standard GPU pickers policies share.
// Pure functions over a Node; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "core/cluster.h"
#include "core/request.h"

namespace tessera {

inline constexpr int kMaxGpusPerNode = 16;

// Why a task does not fit a node, in check order. kFits = it fits now.
enum class Misfit : uint8_t {
  kFits,
  kUnschedulable,
  kGpuModel,      // node's GPU model not allowed (or node has no GPUs for a GPU task)
  kPool,          // node's pool kind not allowed for the task (TaskRequest::pool_kinds)
  kDataPool,      // node's pool lacks the job's datasets or volumes (TaskRequest::pools)
  kNeverCpu,      // node's CPU capacity is below the request (even when empty)
  kNeverMemory,
  kNeverGpus,     // node has too few GPUs / no MIG-capable GPU / GPU memory too small, even when empty
  kCpu,           // short of free CPU now
  kMemory,
  kGpus,          // short of free GPUs / shares / MIG slots now
};
inline constexpr int kMisfitKinds = 11;
const char* misfit_name(Misfit m);
inline bool misfit_is_permanent(Misfit m) {
  return m == Misfit::kUnschedulable || m == Misfit::kGpuModel || m == Misfit::kPool || m == Misfit::kDataPool ||
         m == Misfit::kNeverCpu ||
         m == Misfit::kNeverMemory || m == Misfit::kNeverGpus;
}

// The GPU part of a choice: which GPUs of the node, and for MIG the slot.
struct GpuPick {
  std::array<uint16_t, kMaxGpusPerNode> gpus{};
  uint8_t count = 0;
  int8_t mig_start = -1;  // MIG: start memory slice on gpus[0]
  bool mig_create = false;
  uint8_t mig_destroy = 0;  // MIG reconfiguration: start slices of idle instances to destroy first
  void add(uint16_t g) { gpus[count++] = g; }
};

// Resolves the MIG profile a request names on the node's model; nullptr if the model lacks it.
const MigProfile* resolve_mig_profile(const Node& n, const TaskRequest& t);

// Full check. CPU, memory, model, health and GPU availability (counts only; a pick may still be
// needed for shares with a memory ask, which gpu_count_fitting handles).
Misfit check_fit(const Node& n, const TaskRequest& t);
// t allows GPU model m: it names no model, or m by its name or an alias.
bool model_named(const GpuModel* m, const TaskRequest& t);  // m is among t.gpu_models (name or alias)
inline bool model_allowed(const GpuModel* m, const TaskRequest& t) { return t.gpu_models.empty() || model_named(m, t); }
// Number of GPUs on n that could take one unit of t's per-GPU ask now.
int gpu_count_fitting(const Node& n, const TaskRequest& t);
bool gpu_fits_share(const Gpu& g, const TaskRequest& t);

// Standard pickers (return false if impossible):
// whole GPUs: the lowest-index idle GPUs;
bool pick_lowest_idle(const Node& n, const TaskRequest& t, GpuPick& out);
// shares: the GPU with the least free milli that still fits, lowest index on ties (best fit);
bool pick_best_fit_share(const Node& n, const TaskRequest& t, GpuPick& out);
// MIG: an idle existing instance of the profile (lowest GPU, lowest start), else create at the
// first feasible start in NVIDIA's order on the lowest GPU, else reconfigure: destroy the fewest
// idle instances that make room (MigLayout::reclaim_start);
bool pick_mig_first_fit(const Node& n, const TaskRequest& t, GpuPick& out);
// any kind, with the pickers above.
bool pick_default(const Node& n, const TaskRequest& t, GpuPick& out);

// Turns a pick into the TaskPlacement the cluster applies.
TaskPlacement make_placement(const Node& n, const TaskRequest& t, const GpuPick& pick);

}  // namespace tessera
