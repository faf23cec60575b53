// Containers for tasks (docs/containers.md). The agent runs a container through a real runtime's
// supported command-line interface — podman (with runc as its OCI runtime) — and never builds one
// itself. A container runs as an unprivileged user (never uid 0 on the host), with the request's
// memory, CPU and pids limits as cgroup settings, the GPUs the controller placed as CDI devices,
// the declared mounts, and the task's environment. Every container the agent starts carries the
// label tessera.agent=<agent id>, so a restarted agent (or its watchdog) finds and removes the ones
// its predecessor left.
//
// The podman client that runs a container is a child process of the agent (attached, no terminal):
// its exit is the container's exit; the container's stdout and stderr go to the task's log file.
// Signals (the checkpoint signal, TERM) go to the process group of the container's main process,
// as for bare processes; KILL goes through `podman kill`, asynchronously, and ends every process of
// the container (its PID namespace dies with its PID 1). When the client
// exits, the agent asks podman why (out of memory, the runtime's error) and removes the container.
//
// Thread-safety: none; owned by the agent's main loop. Blocking calls: exit_info and remove run
// podman and wait for it (tenths of a second); start does not wait for the container.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/running_task.h"
#include "core/status.h"

namespace tessera::agent {

struct ContainerMount {
  std::string source;   // host path
  std::string target;   // path inside the container
  bool read_only = true;
  bool operator==(const ContainerMount&) const = default;
};

struct ContainerLaunch {
  std::string name;                        // container name, unique on this host
  std::string image;
  std::vector<std::string> argv;           // the command (argv[0] resolved in the image's PATH)
  std::map<std::string, std::string> env;  // the whole environment inside (no other variables)
  std::string user;                        // "UID:GID", never 0
  std::string working_dir;                 // inside; empty = the image's
  std::string network = "host";            // host | none
  std::vector<ContainerMount> mounts;
  std::vector<std::string> devices;        // CDI device names, "vendor/class=name"
  std::map<std::string, std::string> labels;
  int64_t memory_limit_mib = 0, cpu_limit_milli = 0, pids_limit = 0;  // 0 = none
  std::string log_path;                    // created 0600 and appended to (the container's output)
  std::string env_file;                    // written 0600 for the runtime, removed when the task ends
};

// Podman's settings on this node (agent flags).
struct PodmanOptions {
  std::string podman = "podman";     // the client (PATH is searched)
  std::string pull = "missing";      // missing | never | always (podman run --pull)
};

// The podman command line that runs `launch` (without starting it). Errors: an env value with a
// newline (an env file cannot hold it), a uid or gid 0, an empty image or command.
Result<std::vector<std::string>> podman_run_args(const PodmanOptions& o, const ContainerLaunch& launch);

class PodmanRuntime {
 public:
  explicit PodmanRuntime(PodmanOptions o) : o_(std::move(o)) {}
  // Whether the client runs here ("podman version"); the error says what failed.
  Status check() const;
  // Writes the env file, starts the client, returns at once. The container may still fail to start
  // (unknown image, CDI error): that shows as an exit with exit_reason() set.
  Result<std::unique_ptr<RunningTask>> start(const ContainerLaunch& launch) const;
  // Removes (KILL, then remove) every container with label key=value; returns how many.
  int remove_labelled(const std::string& key, const std::string& value) const;
  const PodmanOptions& options() const { return o_; }

 private:
  PodmanOptions o_;
};

// Runs argv to completion (stdin /dev/null) and returns its exit code and its output (stdout and
// stderr, at most `max_bytes`); -1 when it could not be started.
int run_command(const std::vector<std::string>& argv, std::string* output, size_t max_bytes = 1 << 16);

}  // namespace tessera::agent
