// One task of a job as a real process on this node: started with argv (no shell), in its own process
// group (so signals reach the whole tree), as an unprivileged user when one is given (the agent is
// root), in a working directory, with exactly the given environment, stdout and stderr appended to
// one log file (opened by the agent, so the task needs no access to the log directory). Memory and CPU limits go into a cgroup v2 child group
// when the machine delegates one to us (see cgroup_support()); elsewhere they are not enforced.
//
// Ownership: owned by the agent's main loop; not thread-safe. The destructor does not kill the
// process (the agent decides); call kill_now() first if it must die.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

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
  std::string cgroup_name;                // child group name under the agent's cgroup, e.g. "job-3-a1-t0"
};

// Whether cgroup v2 limits can be applied here, and if not why ("no cgroup v2 mounted at
// /sys/fs/cgroup", "no write access to ..."). Checked once per call; cheap.
struct CgroupSupport {
  bool available = false;
  std::string root;    // the delegated group under which task groups are made
  std::string reason;  // why not, when not available
};
CgroupSupport cgroup_support();

class TaskProcess {
 public:
  // Forks and execs. Errors: argv empty, working_dir missing, log file not writable, executable not
  // found, `user` is root or cannot be switched to (the agent is not root); failures in the child
  // (switching user, chdir, exec) are reported here too, not as a confusing exit code: the child
  // reports them over a close-on-exec pipe.
  static Result<TaskProcess> start(const TaskLaunch& launch);
  TaskProcess(TaskProcess&&) noexcept;
  TaskProcess& operator=(TaskProcess&&) noexcept;
  ~TaskProcess();  // reaps if exited; never kills; removes the cgroup if empty

  pid_t pid() const { return pid_; }
  // Non-blocking: the exit status once the process has exited (then remembered).
  // Exit code: the process's code, or 128 + signal number when a signal killed it (shell convention).
  std::optional<int> poll();
  bool exited() { return poll().has_value(); }
  bool limits_enforced() const { return !cgroup_path_.empty(); }

  // Sends `sig` to the whole process group. No-op once exited.
  void signal(int sig);
  // TERM to the group now; KILL to the group once `grace_s` seconds have passed (driven by tick()).
  void terminate(int64_t grace_s);
  // KILL to the group now.
  void kill_now();
  // Advances a pending terminate(): sends KILL when its grace has run out. Call often (e.g. every
  // 100 ms); cheap.
  void tick();
  bool terminating() const { return term_sent_; }

 private:
  TaskProcess() = default;
  void release();  // the destructor's work: reap if exited, remove the empty cgroup; then inert
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  bool term_sent_ = false;
  bool kill_sent_ = false;
  int64_t kill_at_ms_ = 0;  // monotonic ms
  std::string cgroup_path_;
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
