// `tessera agent`: the node agent. Registers the node's GPU inventory with the controller, then
// heartbeats: it reports its tasks (state, exit code, checkpoint acknowledgements, the rendezvous
// port of task 0), GPU utilisation and MIG layouts, and converges to the desired set the controller
// answers with (level-triggered: a lost message or a restart of either side heals on the next beat).
// It starts tasks in containers (container_runtime.h) or as real processes (task_process.h), always
// as unprivileged users (task_user.h), each with a scratch directory of its own, and the
// torchrun/NCCL environment (task_env.h), stops the
// ones no longer wanted (TERM, grace, KILL), runs the checkpoint protocol (docs/checkpointing.md),
// applies MIG layouts through the GpuBackend, and serves task logs to the controller.
//
// Threads: run() is the one thread that owns all task state; the log server's threads only read
// log files (their paths derive from job/attempt/task) and share nothing else. stop() is thread-safe.
// run()'s thread briefly takes a task user's file-system identity to touch that task's checkpoint
// directory (ScopedFsUser); the identity is per thread, so the log server is unaffected.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/gpu_inventory.h"
#include "core/status.h"

namespace tessera::agent {

struct AgentOptions {
  std::string server = "http://127.0.0.1:8420";  // one URL, or several separated by commas (docs/ha.md)
  std::string token;                 // an agent (or admin) token
  std::string node;                  // the node's name in the cluster config
  std::string address = "127.0.0.1"; // where other nodes reach this one (MASTER_ADDR)
  std::string log_listen = "127.0.0.1:0";  // HOST:PORT of the log server (port 0 = any free)
  std::string state_dir;             // logs, pid files (created 0700: tasks cannot read it)
  // Tasks' own directories: work/ (a scratch directory per task: default working directory, HOME for
  // a switched user, TMPDIR) and checkpoints/ (default checkpoint directories). Created 0711; empty =
  // STATE_DIR-tasks. Must be reachable by the task users.
  std::string task_dir;
  // Who tasks run as (task_user.h): NAME or UID:GID, and a per-user/per-queue map file. A root agent
  // never runs tasks as root (default `nobody`); a non-root agent runs them as itself.
  std::string task_user;
  std::string task_user_map;
  std::string topology;              // "zone=a,spine=s1,leaf=l3" (reported; informational)
  int64_t heartbeat_interval_ms = 0; // 0 = what the controller says (default 5000)
  int64_t stop_grace_s = 30;         // TERM-to-KILL grace when a task is no longer wanted
  bool stop_tasks_on_exit = false;   // stop(): stop running tasks gracefully (tessera up); else the watchdog kills them
  // Spot: while this file exists, heartbeats carry an interruption notice (docs/agent.md). Its first
  // line may hold the reclaim time in unix seconds; else the controller adds the pool's notice.
  std::string interruption_notice_file;
  std::string version = "tessera-agent";
  // Containers (container_runtime.h, docs/containers.md): "auto" uses podman when its client runs
  // here, "podman" requires it, "none" refuses jobs that ask for a container.
  std::string runtime = "auto";
  std::string podman = "podman";
  std::string pull = "missing";       // podman run --pull: missing | never | always
  std::string cdi_dir = "/var/run/cdi";  // where the CDI spec of fake GPUs is written
  int64_t pids_limit = 16384;         // per task (containers, and bare tasks where cgroups allow); 0 = none
};

// Splits "k=v,k=v" and checks names and values ([A-Za-z0-9._-]); error names the bad part.
Result<std::vector<std::pair<std::string, std::string>>> parse_topology_flag(const std::string& text);

class Agent {
 public:
  // Checks the options and the task users, creates the state and task directories, removes the
  // tasks and containers a previous agent on this node left behind, starts the watchdog (a child
  // process that removes this agent's tasks the moment the agent dies, even by kill -9) and the log
  // server.
  static Result<std::unique_ptr<Agent>> create(AgentOptions options, std::unique_ptr<GpuBackend> gpus);
  ~Agent();

  // Runs until stop(). Never returns an error for a controller that is down: it retries.
  void run();
  void stop();
  int log_port() const;

  struct Impl;

 private:
  Agent() = default;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
};

}  // namespace tessera::agent
