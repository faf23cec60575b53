// ProcessTask. See running_task.h.
#include "agent/running_task.h"

namespace tessera::agent {

std::string ProcessTask::exit_reason() const {
  if (!p_.oom_killed()) return "";
  return memory_mib_ > 0 ? "killed at its memory limit of " + std::to_string(memory_mib_) + " MiB (out of memory)"
                         : "killed by the kernel's out-of-memory killer";
}

}  // namespace tessera::agent
