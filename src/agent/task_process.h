// One task of a job as a real process on this node: started with argv (no shell), in its own process
// group (so signals reach the whole tree), as an unprivileged user when one is given (the agent is
// root), in a working directory, with exactly the given environment, stdout and stderr appended to
// one log file (opened by the agent, so the task needs no access to the log directory).
//
// Stopped means stopped: where cgroups are usable (cgroup_support(): delegated v2, else the v1 pids
// and freezer hierarchies) a task with a cgroup_name (or a limit) runs in its own group, joined
// before exec, so every process it starts, daemons that called setsid or double-forked included, is
// found and killed with it: by kill_now(), by terminate()'s KILL, and when the main process exits
// on its own (then the group is removed). Memory, CPU and process-count limits are written into that
// group (v2: memory.max, cpu.max, pids.max; v1: memory.limit_in_bytes, cpu.cfs_quota_us, pids.max);
// elsewhere they are not enforced and only the process group is signalled.
//
// Ownership: owned by the agent's main loop; not thread-safe. The destructor does not kill a running
// main process (the agent decides); call kill_now() first if it must die. After an agent restart,
// kill_cgroup_leftovers() (task_cgroup.h) cleans up the groups of tasks it no longer owns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/task_cgroup.h"
#include "agent/task_user.h"
#include "core/status.h"

namespace tessera::agent {

struct TaskLaunch {
  std::vector<std::string> argv;          // argv[0] searched in PATH when it has no '/'
  std::map<std::string, std::string> env; // the whole environment of the process
  std::string working_dir;                // must exist (for `user`); empty = the agent's cwd
  std::string log_path;                   // created 0600 (with parent dirs) and appended to; stdout+stderr
  // Run as this user (supplementary groups, gid, uid set before exec; needs a root agent). The
  // working directory and the executable are checked with its permissions. nullopt: as the agent.
  std::optional<TaskUser> user;
  int64_t memory_limit_mib = 0;           // 0 = none
  int64_t cpu_limit_milli = 0;            // 0 = none
  int64_t pids_limit = 0;                 // 0 = none; most processes (and threads) the task may have
  // The task's group under the agent's cgroup (task_cgroup.h), e.g. "job-3-a1-t0" or, with one '/',
  // "tessera-gpu-0-ab12cd/job-3-a1-t0" (the parent is made as needed and kept). Empty: a unique name
  // when a limit is asked for; with no limit either, no group of its own (a client such as
  // `podman run` whose work lives in the runtime's cgroups, and whose helpers must outlive it).
  std::string cgroup_name;
};

class TaskProcess {
 public:
  // Forks and execs. Errors: argv empty, working_dir missing, log file not writable, executable not
  // found, `user` is root or cannot be switched to (the agent is not root); failures in the child
  // (switching user, chdir, exec) are reported here too, not as a confusing exit code: the child
  // reports them over a close-on-exec pipe.
  static Result<TaskProcess> start(const TaskLaunch& launch);
  TaskProcess(TaskProcess&&) noexcept;
  TaskProcess& operator=(TaskProcess&&) noexcept;
  ~TaskProcess();  // reaps if exited (which cleans the group up, see poll()); never kills a running main process

  pid_t pid() const { return pid_; }
  // Non-blocking while the main process runs: the exit status once it has exited (then remembered).
  // Exit code: the process's code, or 128 + signal number when a signal killed it (shell convention).
  // When it sees the exit, the task's cgroup is settled first: the OOM verdict is read, processes
  // left in it (daemons the task started) are killed, and the group is removed. That kill waits for
  // them to go (normally milliseconds, at most ~2 s).
  std::optional<int> poll();
  bool exited() { return poll().has_value(); }
  // The memory limit asked for is applied (the task is in a group with memory.max / memory.limit_in_bytes).
  bool limits_enforced() const { return memory_limited_; }
  // The task runs in its own cgroup: every process it starts is killed with it.
  bool grouped() const { return cgroup_.active(); }
  // After exit: the OOM killer killed a process of the task (see TaskCgroup::oom_killed). False
  // while running and without a memory group.
  bool oom_killed() const { return oom_killed_; }
  // The task's group directories (one per hierarchy); empty when not grouped or once removed.
  const std::vector<TaskCgroup::Dir>& cgroup_dirs() const { return cgroup_.dirs(); }

  // Sends `sig` to the whole process group. No-op once exited.
  void signal(int sig);
  // TERM to the process group now (and to processes of the task's cgroup outside it: setsid
  // daemons); KILL to everything once `grace_s` seconds have passed (driven by tick()).
  void terminate(int64_t grace_s);
  // KILL now to the process group and to every process in the task's cgroup (returns once they are
  // gone, at most ~2 s).
  void kill_now();
  // Advances a pending terminate(): sends KILL when its grace has run out. Call often (e.g. every
  // 100 ms); cheap.
  void tick();
  bool terminating() const { return term_sent_; }

 private:
  TaskProcess() = default;
  void release();  // the destructor's work: reap if exited (poll() cleans the group up); then inert
  void kill_everything();  // SIGKILL to the process group and the whole cgroup
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  bool term_sent_ = false;
  bool kill_sent_ = false;
  int64_t kill_at_ms_ = 0;  // monotonic ms
  TaskCgroup cgroup_;        // inert when the task has no group (or once it was removed)
  bool memory_limited_ = false;
  bool oom_killed_ = false;
};

// Parses a signal name ("SIGUSR1", "USR1", "SIGTERM", ...) to its number; error lists accepted names.
Result<int> signal_number(const std::string& name);

// Checkpoint protocol files in a task's checkpoint directory (docs/checkpointing.md):
// the agent writes DIR/.request (lines: the request time in Unix seconds, the reason, the mode:
// "stop" = save then exit, "save" = save and go on); the job writes DIR/.ack whose first line is the
// checkpoint path. read_ack returns that path when .ack exists, is newer than or as new as
// `since_unix_s` (mtime) and is non-empty.
// `as`: the task's user; the directory is a path the task controls, so every function here touches
// it with that user's permissions (ScopedFsUser), never the agent's.
Status write_checkpoint_request(const std::string& dir, int64_t now_unix_s, const std::string& reason,
                                const std::string& mode = "stop", const std::optional<TaskUser>& as = std::nullopt);
std::optional<std::string> read_checkpoint_ack(const std::string& dir, int64_t since_unix_s,
                                               const std::optional<TaskUser>& as = std::nullopt);
// Identity of DIR/.ack (inode and mtime in ns; zero when absent), to tell a new .ack from an old one
// within the same second.
struct AckStamp {
  uint64_t ino = 0;
  int64_t mtime_ns = 0;
  bool operator==(const AckStamp&) const = default;
};
AckStamp checkpoint_ack_stamp(const std::string& dir, const std::optional<TaskUser>& as = std::nullopt);
// The .ack's path when .ack differs from `before` (written since) and is non-empty.
std::optional<std::string> read_checkpoint_ack_since(const std::string& dir, const AckStamp& before,
                                                     const std::optional<TaskUser>& as = std::nullopt);
// Removes DIR/.request (after the request was served) and leaves .ack in place.
void clear_checkpoint_request(const std::string& dir, const std::optional<TaskUser>& as = std::nullopt);

}  // namespace tessera::agent
