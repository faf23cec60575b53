// The environment a task starts with (docs/checkpointing.md lists it): a few variables inherited
// from the agent, the places the task may write (TMPDIR; HOME, USER, LOGNAME of its user), the job's
// env, then Tessera's contract: ranks and rendezvous (torchrun's names), GPUs, who and where, the
// checkpoint and resume paths. A pure function of its inputs (and the agent's environment).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/gpu_inventory.h"
#include "agent/task_user.h"

namespace tessera::agent {

struct TaskEnvInput {
  const nlohmann::json* assignment = nullptr;  // the controller's "run" entry for the task
  int64_t job = 0, attempt = 0;
  int task = 0;
  int master_port = 0;        // 0: not known (a single task)
  std::string node, address;  // this node's name and address (MASTER_ADDR when the entry has none)
  const Inventory* inventory = nullptr;
  std::string ckpt_dir, scratch;
  std::optional<TaskUser> user;  // nullopt: the task runs as the agent (HOME etc. inherited)
  // In a container: nothing is inherited from the agent (the image gives PATH and the rest), and
  // HOME and TMPDIR are under `scratch`, the path inside the container.
  bool container = false;
};

std::map<std::string, std::string> task_environment(const TaskEnvInput& in);

}  // namespace tessera::agent
