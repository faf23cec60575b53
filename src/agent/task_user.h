// Who a task runs as, and the directories it may use. A root agent starts every task as an
// unprivileged user (never uid or gid 0): `nobody` by default, or one chosen per submitting user or
// per queue (--task-user, --task-user-map). A non-root agent cannot switch users and runs tasks as
// itself. Also: a thread-scoped file-system identity, so the agent touches paths a task controls
// (its checkpoint directory) with that task's permissions, and a tree removal that follows no link.
//
// Thread-safety: the parsing functions use getpwnam/getpwuid (call them from one thread, e.g. at
// start); ScopedFsUser changes only the calling thread; the directory helpers are stateless.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::agent {

struct TaskUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;           // the account name; "UID:GID" when given as numbers
  std::string home;           // the account's home when it is a directory owned by uid; else empty
  std::vector<gid_t> groups;  // supplementary groups (the account's, for a named user; else {gid})
  bool operator==(const TaskUser& o) const { return uid == o.uid && gid == o.gid && groups == o.groups; }
};

// Whether this process can start tasks as other users (it runs as root).
bool can_switch_users();

// NAME (an account, looked up with getpwnam) or UID:GID. Uid 0 and gid 0 are refused; `at` names the
// flag or field in errors.
Result<TaskUser> parse_task_user(const std::string& text, const std::string& at);

// The choice of user per task: by submitting user first, then by leaf queue, then the default.
struct TaskUserMap {
  std::optional<TaskUser> fallback;  // nullopt: tasks run as the agent itself (a non-root agent)
  std::map<std::string, TaskUser> users, queues;
  std::optional<TaskUser> pick(const std::string& user, const std::string& queue) const;
  std::vector<TaskUser> all() const;  // every distinct user this map can pick
};

// A --task-user-map file (YAML or JSON):
//   default: nobody            # optional; else --task-user, else nobody
//   users:  {alice: alice, bob: "3001:3001"}
//   queues: {team-a: "2001:2001"}
Result<TaskUserMap> load_task_user_map(const std::string& path);

// The agent's map from its flags (either may be empty). Root: the default is `task_user`, else the
// map's default, else nobody (65534:65534 where no such account exists). Not root: tasks run as the
// agent; a flag naming another user is an error (it cannot be honoured).
Result<TaskUserMap> make_task_user_map(const std::string& task_user, const std::string& map_file);

// File-system identity of the calling thread (fsuid, fsgid, supplementary groups) set to `user` for
// the scope; a no-op for nullopt. Paths are then resolved and checked as that user would: a symlink a
// task planted cannot make the root agent read, write or create files the task could not.
class ScopedFsUser {
 public:
  explicit ScopedFsUser(const std::optional<TaskUser>& user);
  ~ScopedFsUser();
  ScopedFsUser(const ScopedFsUser&) = delete;
  ScopedFsUser& operator=(const ScopedFsUser&) = delete;

 private:
  bool active_ = false;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
  std::vector<gid_t> old_groups_;
};

// Makes `dir` (and parents) with `mode`; the last component must be a real directory (not a link)
// owned by this process, and gets `mode`. For the agent's own directories (state, task root).
Status make_private_dir(const std::string& dir, mode_t mode);

// Makes `dir` (whose parent the agent owns and the task cannot write) owned by `user` with mode 0700;
// an existing one is re-owned. Not for paths a task chose.
Status make_task_owned_dir(const std::string& dir, const std::optional<TaskUser>& user);

// Removes `path` and everything under it without following any symbolic link (directory fds and
// unlinkat), so a tree a task wrote cannot redirect the removal. Errors are returned, not thrown.
Status remove_tree(const std::string& path);

}  // namespace tessera::agent
