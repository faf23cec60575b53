// Cgroups for task processes: what this machine lets us use (cgroup_support()), one task's group in
// every hierarchy used (TaskCgroup: limits, membership before exec, killing everything in it, the
// OOM verdict, removal), and the agent's restart cleanup (kill_cgroup_leftovers()).
//
// Where task groups go:
// - cgroup v2 (unified at /sys/fs/cgroup, the agent's own group writable, memory and cpu delegated):
//   under <own group>/tessera-tasks/.
// - cgroup v1 (or the v1 side of a hybrid layout), when v2 is not usable: in each hierarchy used,
//   under the agent's own group there (/proc/self/cgroup), e.g. /sys/fs/cgroup/pids/<name> and
//   /sys/fs/cgroup/memory/<own>/<name>. pids and freezer are required (they find and stop every
//   process of the task); memory and cpu are used when mounted and writable.
// A task's group name may hold one '/' ("tessera-gpu-0-ab12cd/job-3-a1-t0"): the first part is a
// parent made as needed and left in place for reuse, the second the task's own group, removed once
// the task is done.
//
// Not thread-safe; owned with the TaskProcess it belongs to.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::agent {

// Which cgroups this machine gives the agent. Computed afresh on each call (a few small reads and,
// for v2, making <own>/tessera-tasks); cheap.
struct CgroupSupport {
  bool available = false;  // task groups can be made: whole-tree kill, and the limits below
  int version = 0;         // 2, 1, or 0 when not available
  bool memory = false;     // memory limits can be applied
  bool cpu = false;        // CPU limits can be applied
  bool pids = false;       // process-count limits can be applied
  bool freezer = false;    // v1: a freezer hierarchy (the group can be stopped while it is killed)
  // v2: the group under which task groups are made ("<mount><own>/tessera-tasks"). Empty for v1.
  std::string root;
  // v1: the agent's own group directory in each hierarchy used, by controller ("pids", "freezer",
  // "memory", "cpu"). Empty for v2.
  std::map<std::string, std::string> v1_dirs;
  // Not available: why (both the v2 and the v1 reason). Available: the optional controllers that
  // are missing, or empty.
  std::string reason;

  bool limits_enforced() const { return available && memory; }
  std::string describe() const;  // "cgroup v1 (pids freezer memory cpu)", "none: <reason>"
};
CgroupSupport cgroup_support();

struct CgroupLimits {
  int64_t memory_mib = 0;  // 0 = none (v1: memory.limit_in_bytes and memory.memsw.limit_in_bytes)
  int64_t cpu_milli = 0;   // 0 = none (v1: cpu.cfs_quota_us over a 100 ms period)
  int64_t pids = 0;        // 0 = none (pids.max)
};

// One task's group: a directory per hierarchy (v2: one). Moved, not copied; the moved-from object is
// inert. Destroying it does nothing to the directories (remove() does).
class TaskCgroup {
 public:
  struct Dir {
    std::string controller;  // v1: "pids", "freezer", "memory", "cpu"; v2: ""
    std::string path;
  };

  TaskCgroup() = default;  // inert: no group
  TaskCgroup(TaskCgroup&& o) noexcept;
  TaskCgroup& operator=(TaskCgroup&& o) noexcept;
  TaskCgroup(const TaskCgroup&) = delete;
  TaskCgroup& operator=(const TaskCgroup&) = delete;

  // Makes the group `name` (sanitised; one '/' allowed, see above) in every hierarchy of `cg` and
  // writes `limits`. A limit that cannot be written is left off with a warning (memory_limited()
  // tells); when the group itself cannot be made the result is inert (also warned). A group of that
  // name that still holds processes (another agent's, or a run not yet cleaned up) is not shared:
  // the name gets a "-2", "-3", ... suffix.
  static TaskCgroup create(const CgroupSupport& cg, const std::string& name, const CgroupLimits& limits);

  bool active() const { return !dirs_.empty(); }
  int version() const { return version_; }
  bool memory_limited() const { return memory_limited_; }
  const std::vector<Dir>& dirs() const { return dirs_; }

  // cgroup.procs of each directory, opened O_WRONLY|O_CLOEXEC, in dirs() order, for the child to
  // write "0" into before exec (-1 where it cannot be opened).
  std::vector<int> open_procs_for_child() const;
  // The child could not join dirs()[i]: forget that directory (and remove it, it holds nothing of
  // the task). A group left without any directory becomes inert.
  void drop(size_t i);

  // Every process in the group (the union over the hierarchies).
  std::vector<pid_t> procs() const;
  // SIGKILL to every process in the group until none is left or `budget` has passed. v1: freeze
  // (freezer.state), kill each pid of cgroup.procs, thaw, repeat; v2: cgroup.kill, else the same loop
  // with cgroup.freeze. Returns how many distinct processes were signalled. Refuses (logs, returns 0)
  // should the group hold the agent itself.
  int kill_all(std::chrono::milliseconds budget = std::chrono::seconds(2)) const;
  // `sig` to the processes of the group outside process group `pgid` (daemons that called setsid).
  int signal_outside(pid_t pgid, int sig) const;
  // Whether the OOM killer killed a process of the group: v2 memory.events oom_kill > 0; v1
  // memory.oom_control oom_kill > 0, or (older kernels without that counter) memory.failcnt > 0 and
  // `main_sigkilled`. Read it before remove().
  bool oom_killed(bool main_sigkilled) const;
  // rmdir of each directory (the parent of a two-part name stays). Retries briefly while the kernel
  // still counts exiting processes. True when all are gone; the object is inert afterwards.
  bool remove();

 private:
  int version_ = 0;
  std::vector<Dir> dirs_;  // v1: pids first (the directory whose mkdir claims the name)
  bool memory_limited_ = false;
};

// Restart cleanup: kills every process in every group under <own group>/<prefix>/ (v2: under
// cgroup_support().root/<prefix>/) in every hierarchy this code uses, removes those groups (not
// <prefix> itself) and returns how many processes were killed. `prefix` is one sanitised path
// component ("tessera-gpu-0-ab12cd"); an empty prefix does nothing.
int kill_cgroup_leftovers(const std::string& prefix);

}  // namespace tessera::agent
