// A job as users submit it (YAML through the CLI, JSON over HTTP): who it belongs to, the gang and
// each task's resources, topology, checkpointing, runtimes, spot tolerance, what to run, and the
// container and data mounts to run it with. Parsing is strict: unknown fields are rejected, every
// error names the field (JSON-pointer-like path such as "resources.gpus") and says why.
// Value types; the parsers are pure functions (thread-safe).
//
// JSON form (YAML is the same structure):
//   {"name": "bert-large", "queue": "team-a", "project": "nlp", "priority_class": "research",
//    "kind": "training",                       // training | inference | interactive | batch
//    "tasks": 4, "min_tasks": 4,               // gang size; min_tasks 0 or absent = tasks (rigid)
//    (or tasks that differ: "tasks": [{"gpus": 0, "cpu": 4}, {"gpus": 8}, {"gpus": 8}]: one entry per
//    task with gpus, cpu, memory; a field left out is resources'; whole GPUs or none, rigid)
//    "resources": {                            // per task
//      "gpus": 8, "gpu_models": ["H100-80GB"],  // whole GPUs (models: canonical names or aliases)
//      "mix_models": false,                     // true: a gang's tasks may run on different models
//      "mig": "3g.40gb",                        // or one MIG instance (gpus absent or 0)
//      "gpu_milli": 500, "gpu_memory": "20Gi",  // or a share of gpus (default 1) GPUs
//      "cpu": 16,  "memory": "64Gi"},            // cpu: cores (int) or "500m"; memory: MiB (int) or "64Gi"/"512Mi"/"1Ti"
//    "topology": {"mode": "required", "level": "leaf"},   // mode: required | preferred
//    "checkpoint": {"interval": 1800, "signal": "SIGUSR1", "grace": 300, "dir": "/ckpt"},
//    "restart": {"max_restarts": 3, "backoff": 10},        // after losing a node; backoff doubles
//    "expected_runtime": 3600, "max_runtime": 86400,       // seconds, or "90m"/"2h"/"1d"
//    "spot": "allowed",                      // never | allowed | preferred; absent/null = allowed for
//                                            // checkpointable training and batch, never otherwise
//    "spot_tolerant": false,                 // older form: true = "spot": "allowed" (still accepted)
//    "command": ["python", "train.py"], "env": {"K": "V"}, "working_dir": "/work",
//    "container": {"image": "localhost/train:2026-11",  // required in container; 1..512 bytes, no spaces
//                  "user": "1000:1000",                  // "UID" or "UID:GID", never 0; absent = image's
//                  "network": "host"},                   // host (default) | none
//    "mounts": [{"dataset": "imagenet", "path": "/data"},  // exactly one of dataset | volume | host_path
//               {"volume": "scratch", "path": "/scratch", "read_only": false},  // absent = source's default
//               {"host_path": "/mnt/shared/x", "path": "/x"}]}  // need container; at most 64
//    "array": "0-99%8", "dependency": "afterok:12:13_2,singleton", "kill_on_invalid_dep": false,
//    "begin": 1798135200, "hold": false, "output": "/shared/logs/%x-%j.out", "error": ""  (job_spec_workflow.h)
//    (names: [A-Za-z0-9._-]{1,128}; paths absolute and normal; a mount's path is not /, not under
//    /proc, /sys or /dev, not checkpoint.dir and not another mount's. The cluster's storage: section
//    says which names and host paths exist: storage_config.h.)
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/job_spec_container.h"
#include "config/job_spec_workflow.h"
#include "core/request.h"
#include "core/sched/job.h"
#include "core/status.h"

namespace tessera::config {

struct CheckpointSpec {
  Duration interval = 0;            // 0 = the job does not checkpoint
  std::string signal = "SIGUSR1";   // sent to ask for a checkpoint (a known signal name)
  Duration grace = 300;             // how long to wait for the checkpoint before stopping
  std::string dir;                  // where the job writes checkpoints (absolute path or empty)
  bool operator==(const CheckpointSpec&) const = default;
};

// What happens when a job loses a task to its node (agent lost, node NotReady, task vanished):
// it is requeued, resuming from its last acknowledged checkpoint, at most max_restarts times, waiting
// backoff seconds before the first restart and twice as long before each next (capped at 1 h).
// A task that exits non-zero is the job's own failure and is not restarted.
struct RestartPolicy {
  int max_restarts = 3;             // 0..1000
  Duration backoff = 10;            // seconds, 0..3600
  bool operator==(const RestartPolicy&) const = default;
};

struct JobSpec {
  std::string name;                 // 1..128 chars of [A-Za-z0-9._-]
  std::string queue;                // leaf queue name, or a path "parent/child" (resolved by the controller)
  std::string project;              // free text for accounting (<= 128 chars)
  std::string priority_class = "research";  // checked against the cluster's classes by the controller
  JobKind kind = JobKind::kTraining;
  int tasks = 1;                    // 1..100000
  int min_tasks = 0;                // 0 = tasks
  TaskRequest task;                 // validated with TaskRequest::validate()
  std::vector<TaskSize> task_sizes; // tasks that differ: one per task (then tasks == size()); empty = all `task`
  TopologyConstraint topology;
  CheckpointSpec checkpoint;
  RestartPolicy restart;
  Duration expected_runtime = 0;
  Duration max_runtime = 0;         // 0 = none
  bool spot_tolerant = false;        // compatibility: true means spot allowed when `spot` is absent
  std::optional<SpotPolicy> spot;   // nullopt = the default by kind and checkpointing (Gang::spot)
  std::vector<std::string> command; // argv; required, non-empty, argv[0] non-empty
  std::map<std::string, std::string> env;  // names: [A-Za-z_][A-Za-z0-9_]*
  // Names in `env` whose values are secret: given to the task, never shown back by the API. Written
  // as `secret_env: {NAME: value}` (merged into env); job_spec_to_json writes the names only next to
  // the whole env (for the store), and redact_secrets() hides the values for people.
  std::set<std::string> secret_env;
  std::string working_dir;          // absolute path or empty
  std::optional<ContainerSpec> container;  // nullopt = a bare process on the node
  std::vector<MountSpec> mounts;           // only with a container
  WorkflowSpec workflow;                   // array, dependency, hold, begin, output files (job_spec_workflow.h)

  // The core's gang (id and queue are filled by the controller).
  Gang gang() const;
  bool operator==(const JobSpec&) const;  // field for field
};

// Limits on what one spec may hold (requests also have a body-size limit at the HTTP layer).
inline constexpr size_t kMaxCommandArgs = 4096;
inline constexpr size_t kMaxEnvVars = 1024;
inline constexpr size_t kMaxStringBytes = 64 * 1024;

Result<JobSpec> parse_job_spec_json(std::string_view text);
Result<JobSpec> parse_job_spec_yaml(std::string_view text);
Result<JobSpec> job_spec_from_json(const nlohmann::json& j);  // the same checks as parse_job_spec_json
// A spec's JSON (as job_spec_to_json writes it) with every secret env value replaced by "(secret)".
void redact_secrets(nlohmann::json& spec_json);
// Canonical JSON: every field; cpu as "<milli>m", memory and gpu_memory as integer MiB, durations as
// integer seconds. job_spec_from_json(job_spec_to_json(s)) gives back s, field for field.
nlohmann::json job_spec_to_json(const JobSpec& s);

}  // namespace tessera::config
