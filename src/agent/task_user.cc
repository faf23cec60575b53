// Task users, the agent's directories and link-safe removal. See task_user.h.
#include "agent/task_user.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tessera::agent {
namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The account's home when it is a directory the uid owns (`nobody`'s /nonexistent is not).
std::string usable_home(const char* dir, uid_t uid) {
  struct stat st{};
  if (dir == nullptr || dir[0] != '/' || ::stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid) return "";
  return dir;
}

Status refuse_root(const TaskUser& u, const std::string& at) {
  if (u.uid == 0) return invalid_argument(at + ": \"" + u.name + "\" is uid 0 (root); tasks never run as root");
  if (u.gid == 0) return invalid_argument(at + ": \"" + u.name + "\" has gid 0 (root's group); tasks never run in it");
  for (gid_t g : u.groups)
    if (g == 0) return invalid_argument(at + ": \"" + u.name + "\" is a member of group 0 (root); tasks never run in it");
  return {};
}

TaskUser nobody() {
  if (auto u = parse_task_user("nobody", "nobody"); u.ok()) return *u;
  return TaskUser{kNobody, kNobody, std::to_string(kNobody) + ":" + std::to_string(kNobody), "", {kNobody}};
}

Status remove_below(int dirfd, int depth);

// Removes the entry `name` of the directory `parent` (a tree when it is a real directory).
Status remove_entry(int parent, const char* name, int depth) {
  struct stat st{};
  if (::fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? Status() : Status(internal_error(std::string(name) + ": " + std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(parent, name, 0) != 0 && errno != ENOENT)
      return internal_error(std::string("unlink ") + name + ": " + std::strerror(errno));
    return {};
  }
  if (depth > 128) return internal_error("deeper than 128 directories; left in place");
  // A non-root agent removes trees its tasks (same user) wrote: it may need to make them writable
  // first. (Root needs not, and does not chmod through a path.)
  if (::geteuid() != 0 && (st.st_mode & 0700) != 0700) ::fchmodat(parent, name, (st.st_mode & 07777) | 0700, 0);
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return internal_error(std::string("open ") + name + ": " + std::strerror(errno));
  Status st_below = remove_below(fd, depth + 1);  // closes fd
  if (!st_below.ok()) return st_below;
  if (::unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
    return internal_error(std::string("rmdir ") + name + ": " + std::strerror(errno));
  return {};
}

// Removes everything in the directory open as `dirfd`, then closes it.
Status remove_below(int dirfd, int depth) {
  DIR* d = ::fdopendir(dirfd);
  if (d == nullptr) {
    ::close(dirfd);
    return internal_error(std::string("fdopendir: ") + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  Status result;
  for (const std::string& n : names) {
    Status s = remove_entry(::dirfd(d), n.c_str(), depth);
    if (!s.ok() && result.ok()) result = s;
  }
  ::closedir(d);
  return result;
}

}  // namespace

bool can_switch_users() { return ::geteuid() == 0; }

Result<TaskUser> parse_task_user(const std::string& text, const std::string& at) {
  TaskUser u;
  const auto colon = text.find(':');
  if (colon != std::string::npos) {
    const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
    if (!all_digits(a) || !all_digits(b)) return invalid_argument(at + ": \"" + text + "\" is neither NAME nor UID:GID");
    const unsigned long long uid = std::strtoull(a.c_str(), nullptr, 10), gid = std::strtoull(b.c_str(), nullptr, 10);
    if (uid >= 0xffffffffULL || gid >= 0xffffffffULL) return invalid_argument(at + ": \"" + text + "\": uid or gid out of range");
    u.uid = uid_t(uid), u.gid = gid_t(gid), u.name = text, u.groups = {u.gid};
    if (const passwd* pw = ::getpwuid(u.uid)) u.home = usable_home(pw->pw_dir, u.uid);
  } else {
    if (text.empty() || all_digits(text))
      return invalid_argument(at + ": \"" + text + "\": give an account NAME or UID:GID (e.g. nobody, 2001:2001)");
    const passwd* pw = ::getpwnam(text.c_str());
    if (pw == nullptr) return not_found(at + ": no account \"" + text + "\" on this machine (getent passwd " + text + "); give NAME or UID:GID");
    u.uid = pw->pw_uid, u.gid = pw->pw_gid, u.name = text, u.home = usable_home(pw->pw_dir, u.uid);
    int n = 64;
    std::vector<gid_t> groups(static_cast<size_t>(n));
    if (::getgrouplist(text.c_str(), u.gid, groups.data(), &n) < 0) {
      groups.resize(size_t(n));
      ::getgrouplist(text.c_str(), u.gid, groups.data(), &n);
    }
    groups.resize(size_t(std::max(n, 0)));
    u.groups = groups.empty() ? std::vector<gid_t>{u.gid} : groups;
  }
  if (Status s = refuse_root(u, at); !s.ok()) return s.error();
  return u;
}

std::optional<TaskUser> TaskUserMap::pick(const std::string& user, const std::string& queue) const {
  if (auto it = users.find(user); !user.empty() && it != users.end()) return it->second;
  if (auto it = queues.find(queue); !queue.empty() && it != queues.end()) return it->second;
  return fallback;
}

std::vector<TaskUser> TaskUserMap::all() const {
  std::vector<TaskUser> out;
  auto add = [&](const TaskUser& u) {
    if (std::find(out.begin(), out.end(), u) == out.end()) out.push_back(u);
  };
  if (fallback) add(*fallback);
  for (const auto& [k, u] : users) add(u);
  for (const auto& [k, u] : queues) add(u);
  return out;
}

Result<TaskUserMap> load_task_user_map(const std::string& path) {
  const std::string at = "--task-user-map " + path;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return not_found(at + ": cannot read it");
  } catch (const YAML::Exception& e) {
    return invalid_argument(at + ": not valid YAML or JSON: " + e.what());
  }
  if (!root.IsMap()) return invalid_argument(at + ": must be a mapping with default, users and/or queues");
  TaskUserMap m;
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "default") {
        if (!kv.second.IsScalar()) return invalid_argument(at + ": default: must be NAME or UID:GID");
        auto u = parse_task_user(kv.second.as<std::string>(), at + ": default");
        if (!u.ok()) return u.error();
        m.fallback = *u;
      } else if (key == "users" || key == "queues") {
        if (!kv.second.IsMap()) return invalid_argument(at + ": " + key + ": must be a mapping of name to NAME or UID:GID");
        auto& dest = key == "users" ? m.users : m.queues;
        for (const auto& e : kv.second) {
          const std::string name = e.first.as<std::string>();
          if (!e.second.IsScalar()) return invalid_argument(at + ": " + key + "." + name + ": must be NAME or UID:GID");
          auto u = parse_task_user(e.second.as<std::string>(), at + ": " + key + "." + name);
          if (!u.ok()) return u.error();
          dest[name] = *u;
        }
      } else {
        return invalid_argument(at + ": unknown key \"" + key + "\" (known: default, users, queues)");
      }
    }
  } catch (const YAML::Exception& e) {
    return invalid_argument(at + ": " + e.what());
  }
  return m;
}

Result<TaskUserMap> make_task_user_map(const std::string& task_user, const std::string& map_file) {
  TaskUserMap m;
  if (!map_file.empty()) {
    auto loaded = load_task_user_map(map_file);
    if (!loaded.ok()) return loaded.error();
    m = std::move(*loaded);
  }
  if (!task_user.empty()) {
    auto u = parse_task_user(task_user, "--task-user");
    if (!u.ok()) return u.error();
    m.fallback = *u;
  }
  if (!can_switch_users()) {
    for (const TaskUser& u : m.all())
      if (u.uid != ::geteuid() || u.gid != ::getegid())
        return failed_precondition("--task-user/--task-user-map: the agent runs as uid " + std::to_string(::geteuid()) +
                                   ", not root, so it cannot start tasks as \"" + u.name +
                                   "\"; run the agent as root, or drop the flag (tasks then run as the agent's user)");
    return TaskUserMap{};
  }
  if (!m.fallback) m.fallback = nobody();
  return m;
}

ScopedFsUser::ScopedFsUser(const std::optional<TaskUser>& user) {
  if (!user || !can_switch_users()) return;
  const int n = ::getgroups(0, nullptr);
  old_groups_.resize(size_t(std::max(n, 0)));
  if (n > 0 && ::getgroups(n, old_groups_.data()) != n) old_groups_.clear();
  old_uid_ = uid_t(::syscall(SYS_setfsuid, uid_t(-1)));
  old_gid_ = gid_t(::syscall(SYS_setfsgid, gid_t(-1)));
  // Raw system calls: they change this thread only (glibc's wrappers change every thread).
  const bool ok = ::syscall(SYS_setgroups, user->groups.size(), user->groups.data()) == 0 &&
                  (::syscall(SYS_setfsgid, user->gid), gid_t(::syscall(SYS_setfsgid, gid_t(-1))) == user->gid) &&
                  (::syscall(SYS_setfsuid, user->uid), uid_t(::syscall(SYS_setfsuid, uid_t(-1))) == user->uid);
  active_ = true;
  if (!ok) {
    spdlog::critical("event=fs_identity_failed uid={} gid={} error=\"{}\" (refusing to go on as root)", user->uid, user->gid,
                     std::strerror(errno));
    std::abort();
  }
}

ScopedFsUser::~ScopedFsUser() {
  if (!active_) return;
  ::syscall(SYS_setfsuid, old_uid_);
  ::syscall(SYS_setfsgid, old_gid_);
  ::syscall(SYS_setgroups, old_groups_.size(), old_groups_.data());
}

namespace {

// Opens `dir` (no link as its last component), checks it is a directory, and gives it `mode` and,
// when `owner` is set, that owner: through the fd, so nothing can be swapped in between.
Status own_dir(const std::string& dir, mode_t mode, const std::optional<TaskUser>& owner, bool must_be_ours) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return failed_precondition(dir + ": not a directory (" + std::strerror(errno) + "; a symbolic link is not accepted)");
  struct stat st{};
  Status result;
  if (::fstat(fd, &st) != 0) {
    result = failed_precondition(dir + ": " + std::strerror(errno));
  } else if (must_be_ours && st.st_uid != ::geteuid()) {
    result = failed_precondition(dir + ": owned by uid " + std::to_string(st.st_uid) + ", not by the agent (uid " +
                                 std::to_string(::geteuid()) + ")");
  } else if (owner && can_switch_users() && (st.st_uid != owner->uid || st.st_gid != owner->gid) &&
             ::fchown(fd, owner->uid, owner->gid) != 0) {
    result = failed_precondition("cannot give " + dir + " to " + owner->name + ": " + std::strerror(errno));
  } else if ((st.st_mode & 07777) != mode && ::fchmod(fd, mode) != 0) {
    result = failed_precondition("cannot chmod " + dir + ": " + std::strerror(errno));
  }
  ::close(fd);
  return result;
}

}  // namespace

Status make_private_dir(const std::string& dir, mode_t mode) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return failed_precondition("cannot create " + dir + ": " + ec.message());
  return own_dir(dir, mode, std::nullopt, true);
}

Status make_task_owned_dir(const std::string& dir, const std::optional<TaskUser>& user) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return failed_precondition("cannot create " + dir + ": " + std::strerror(errno));
  return own_dir(dir, 0700, user, false);
}

Status remove_tree(const std::string& path) {
  const fs::path p = fs::path(path).lexically_normal();
  const std::string parent = p.parent_path().empty() ? "." : p.parent_path().string();
  const std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") return invalid_argument("remove_tree: \"" + path + "\" names no entry");
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Status() : Status(internal_error(parent + ": " + std::strerror(errno)));
  Status s = remove_entry(fd, name.c_str(), 0);
  ::close(fd);
  if (!s.ok()) return internal_error("removing " + path + ": " + s.message());
  return {};
}

}  // namespace tessera::agent
