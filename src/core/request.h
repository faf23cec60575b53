// What a job asks for: a task's resource request and the gang (N identical tasks, all-or-nothing
// for min_tasks) with its constraints. Value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/quantity.h"
#include "core/status.h"

namespace tessera {

// One task's request. GPU forms (mutually exclusive):
//   - none: gpu_count == 0 and mig_profile empty (CPU-only);
//   - whole GPUs: gpu_count >= 1, milli_per_gpu == 1000;
//   - fractional share (time-slicing/MPS): gpu_count >= 1 (usually 1), milli_per_gpu in 1..999
//     and/or gpu_memory > 0 — each of the gpu_count GPUs gives that share;
//   - MIG instance: mig_profile set ("3g.40gb" or short "3g"), gpu_count == 0.
struct TaskRequest {
  MilliCpu cpu{0};
  MiB memory{0};
  int gpu_count = 0;
  MilliGpu milli_per_gpu{1000};
  MiB gpu_memory{0};  // per GPU, for shares; 0 = not constrained
  std::string mig_profile;
  std::vector<std::string> gpu_models;  // allowed models (canonical names); empty = any

  bool cpu_only() const { return gpu_count == 0 && mig_profile.empty(); }
  bool whole_gpus() const { return gpu_count > 0 && milli_per_gpu.v >= 1000 && gpu_memory.v == 0; }
  bool gpu_share() const { return gpu_count > 0 && !whole_gpus(); }
  bool mig() const { return !mig_profile.empty(); }
  // GPU demand in milli-GPU (whole GPU = 1000 each).
  int64_t gpu_demand_milli() const { return int64_t(gpu_count) * milli_per_gpu.v; }
  // Field-level validation; the error names the field and why.
  Status validate() const;
  bool operator==(const TaskRequest&) const = default;
};

enum class JobKind : uint8_t { kTraining, kInference, kInteractive, kBatch };
enum class TopologyMode : uint8_t { kNone, kPreferred, kRequired };

struct TopologyConstraint {
  TopologyMode mode = TopologyMode::kNone;
  std::string level;  // a network level name, or "node"
};

struct Gang {
  JobId id;
  std::string name;
  int tasks = 1;
  int min_tasks = 0;  // 0 = tasks (rigid gang)
  TaskRequest task;
  TopologyConstraint topology;
  JobKind kind = JobKind::kTraining;
  // Filled by later layers (queues, priority, checkpointing).
  int priority = 0;
  QueueId queue;
  bool checkpointable = false;

  int required_tasks() const { return min_tasks > 0 ? min_tasks : tasks; }
  Status validate() const;
};

const char* job_kind_name(JobKind k);

}  // namespace tessera
