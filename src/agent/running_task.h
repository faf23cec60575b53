// One started task as the agent drives it, whatever runs it: a bare process (ProcessTask, over
// TaskProcess) or a container (container_runtime.h). The agent polls for the exit, signals, stops
// (TERM, grace, KILL) and kills through this interface only.
//
// Ownership: owned by the agent's main loop; not thread-safe. Destroying one does not kill what it
// runs (the agent decides): call kill_now() and wait for poll() first when it must die.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "agent/task_process.h"

namespace tessera::agent {

class RunningTask {
 public:
  virtual ~RunningTask() = default;
  // The process the agent started (the task, or the runtime's client that waits for the container).
  virtual pid_t pid() const = 0;
  // Non-blocking: the exit code once the task has ended (remembered), 128 + signal when killed.
  // Once it returns a value, nothing of the task runs any more.
  virtual std::optional<int> poll() = 0;
  // Sends `sig` to the task (its process group, or the container's main process).
  virtual void signal(int sig) = 0;
  // TERM now, KILL once `grace_s` has passed (driven by tick()).
  virtual void terminate(int64_t grace_s) = 0;
  // KILL to everything the task runs, now.
  virtual void kill_now() = 0;
  // Advances a pending terminate() and any asynchronous work. Call often (every ~50 ms); cheap.
  virtual void tick() = 0;
  // Whether the request's memory and CPU limits are enforced.
  virtual bool limits_enforced() const = 0;
  // After the exit: why it ended when the exit code alone does not say ("killed at its memory limit
  // of 64 MiB", the runtime's error); "" otherwise.
  virtual std::string exit_reason() const = 0;
  // What runs it, for logs: "process" or "podman".
  virtual const char* runtime() const = 0;
};

// A bare process (TaskProcess) as a RunningTask.
class ProcessTask final : public RunningTask {
 public:
  explicit ProcessTask(TaskProcess p, int64_t memory_limit_mib) : p_(std::move(p)), memory_mib_(memory_limit_mib) {}
  pid_t pid() const override { return p_.pid(); }
  std::optional<int> poll() override { return p_.poll(); }
  void signal(int sig) override { p_.signal(sig); }
  void terminate(int64_t grace_s) override { p_.terminate(grace_s); }
  void kill_now() override { p_.kill_now(); }
  void tick() override { p_.tick(); }
  bool limits_enforced() const override { return p_.limits_enforced(); }
  std::string exit_reason() const override;
  const char* runtime() const override { return "process"; }

 private:
  TaskProcess p_;
  int64_t memory_mib_ = 0;
};

}  // namespace tessera::agent
