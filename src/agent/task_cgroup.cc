// Task cgroups, v2 and v1: support detection, one task's group, whole-group kill, OOM verdict,
// restart cleanup. See task_cgroup.h.
#include "agent/task_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

namespace tessera::agent {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kCgroupMount = "/sys/fs/cgroup";
constexpr const char* kTasksGroup = "tessera-tasks";
// v1 hierarchies used, in the order groups are made (pids first: its mkdir claims the name).
constexpr const char* kV1Required[] = {"pids", "freezer"};
constexpr const char* kV1Optional[] = {"memory", "cpu"};

std::string errno_text(int err) { return std::strerror(err); }

// Whole file as a string; nullopt when it cannot be read.
std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// Writes `text` to an existing (kernel) file such as a cgroup control file; returns errno or 0.
int write_control(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = n < 0 ? errno : (static_cast<size_t>(n) == text.size() ? 0 : EIO);
  ::close(fd);
  return err;
}

// Whether a whitespace-separated list (cgroup.controllers, cgroup.subtree_control) has `word`.
bool has_word(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

// The number after `key` in a "key value" per line file (memory.events, memory.oom_control); -1 when absent.
int64_t keyed_value(const std::string& path, const std::string& key) {
  auto text = read_text(path);
  if (!text) return -1;
  std::istringstream in(*text);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return -1;
}

int64_t number_in(const std::string& path) {
  auto text = read_text(path);
  if (!text) return -1;
  try {
    return std::stoll(*text);
  } catch (...) {
    return -1;
  }
}

// Makes sure memory and cpu (and pids, when the parent has it) are enabled for the children of
// `dir`; returns an empty string or why not.
std::string enable_controllers(const std::string& dir) {
  auto sub = read_text(dir + "/cgroup.subtree_control");
  if (!sub) return "cannot read " + dir + "/cgroup.subtree_control";
  auto ctl = read_text(dir + "/cgroup.controllers");
  const bool want_pids = ctl && has_word(*ctl, "pids");
  if (has_word(*sub, "memory") && has_word(*sub, "cpu") && (!want_pids || has_word(*sub, "pids"))) return "";
  int err = write_control(dir + "/cgroup.subtree_control", "+memory +cpu");
  if (err == 0) {
    if (want_pids) write_control(dir + "/cgroup.subtree_control", "+pids");  // optional
    return "";
  }
  std::string why = "cannot enable memory and cpu in " + dir + "/cgroup.subtree_control: " + errno_text(err);
  if (err == EBUSY)
    why += " (the group holds processes itself; run the agent in a delegated group, e.g. "
           "systemd-run --property=Delegate=yes)";
  return why;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// This process's groups from /proc/self/cgroup: "0::/path" under key "" (v2), "4:memory:/path" and
// "3:cpu,cpuacct:/path" under each controller (v1).
std::map<std::string, std::string> own_groups() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controllers.empty()) {
      out[""] = path;
    } else {
      for (const auto& c : split(controllers, ',')) out[c] = path;
    }
  }
  return out;
}

// v1 mounts from /proc/self/mountinfo: controller -> {mount point, root of the hierarchy mounted}.
struct V1Mount {
  std::string mountpoint;
  std::string root;
};
std::map<std::string, V1Mount> v1_mounts() {
  std::map<std::string, V1Mount> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, mountpoint, fstype, source, super;
    if (!(head >> id >> parent >> dev >> root >> mountpoint) || !(tail >> fstype >> source >> super)) continue;
    if (fstype != "cgroup") continue;
    for (const auto& opt : split(super, ','))
      if (!out.count(opt)) out[opt] = V1Mount{mountpoint, root};
  }
  return out;
}

// A cgroup name safe as one directory name.
std::string sanitize_component(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  if (out == "." || out == "..") out = std::string(out.size(), '_');
  return out;
}

// The task's group name as a relative path: "parent/leaf" or "leaf". An empty leaf gets a unique one.
std::string sanitize_group_name(const std::string& name) {
  size_t slash = name.find('/');
  std::string parent = slash == std::string::npos ? "" : sanitize_component(name.substr(0, slash));
  std::string leaf = sanitize_component(slash == std::string::npos ? name : name.substr(slash + 1));
  if (leaf.empty()) {
    static std::atomic<int> counter{0};
    leaf = "task-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }
  return parent.empty() ? leaf : parent + "/" + leaf;
}

std::vector<pid_t> read_procs(const std::string& dir) {
  std::vector<pid_t> out;
  std::ifstream in(dir + "/cgroup.procs");
  pid_t pid = 0;
  while (in >> pid) out.push_back(pid);
  return out;
}

std::vector<pid_t> procs_of(const std::vector<TaskCgroup::Dir>& dirs) {
  std::set<pid_t> all;
  for (const auto& d : dirs)
    for (pid_t p : read_procs(d.path)) all.insert(p);
  return {all.begin(), all.end()};
}

const TaskCgroup::Dir* find_dir(const std::vector<TaskCgroup::Dir>& dirs, const std::string& controller) {
  for (const auto& d : dirs)
    if (d.controller == controller) return &d;
  return nullptr;
}

// How to stop the group while it is killed: a control file and what to write to freeze and thaw.
struct Freezer {
  std::string file;
  std::string freeze, thaw;
  bool usable() const { return !file.empty(); }
  void set(bool frozen) const {
    if (usable()) write_control(file, frozen ? freeze : thaw);
  }
  // Waits (briefly) for v1's FREEZING to become FROZEN; killing goes ahead either way.
  void settle() const {
    if (freeze != "FROZEN") return;
    for (int i = 0; i < 50; ++i) {
      auto s = read_text(file);
      if (!s || s->rfind("FROZEN", 0) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

Freezer freezer_of(int version, const std::vector<TaskCgroup::Dir>& dirs) {
  if (version == 1) {
    if (const auto* d = find_dir(dirs, "freezer")) return {d->path + "/freezer.state", "FROZEN", "THAWED"};
  } else if (version == 2 && !dirs.empty() && exists(dirs[0].path + "/cgroup.freeze")) {
    return {dirs[0].path + "/cgroup.freeze", "1", "0"};
  }
  return {};
}

int kill_dirs(int version, const std::vector<TaskCgroup::Dir>& dirs, std::chrono::milliseconds budget) {
  if (dirs.empty()) return 0;
  const pid_t self = ::getpid();
  const auto deadline = Clock::now() + budget;
  std::set<pid_t> killed;
  auto holds_self = [&](const std::vector<pid_t>& pids) {
    if (std::find(pids.begin(), pids.end(), self) == pids.end()) return false;
    spdlog::error("event=cgroup_kill_refused group={} reason=\"the agent itself is in the group\"", dirs[0].path);
    return true;
  };
  // v2's cgroup.kill does it all in the kernel (no new process escapes); then wait for the group to empty.
  const std::string kill_file = version == 2 ? dirs[0].path + "/cgroup.kill" : "";
  if (!kill_file.empty() && exists(kill_file)) {
    auto pids = procs_of(dirs);
    if (pids.empty() || holds_self(pids)) return 0;
    killed.insert(pids.begin(), pids.end());
    write_control(kill_file, "1");
    while (!procs_of(dirs).empty() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const Freezer freezer = freezer_of(version, dirs);
  int round = 0;
  while (true) {
    auto pids = procs_of(dirs);
    if (pids.empty()) break;
    if (holds_self(pids)) break;
    if (Clock::now() >= deadline) {
      spdlog::warn("event=cgroup_kill_incomplete group={} left={}", dirs[0].path, pids.size());
      break;
    }
    freezer.set(true);  // no fork from here on: the list read next is complete
    freezer.settle();
    pids = procs_of(dirs);
    for (pid_t p : pids)
      if (p != self && p > 1 && ::kill(p, SIGKILL) == 0) killed.insert(p);
    freezer.set(false);  // the killed run again, to die
    std::this_thread::sleep_for(std::chrono::milliseconds(round++ < 5 ? 1 : 5));
  }
  return static_cast<int>(killed.size());
}

// rmdir with a few retries: the kernel may still count a process that is finishing its exit.
bool remove_dir(const std::string& path) {
  for (int i = 0; i < 100; ++i) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  spdlog::warn("event=cgroup_remove_failed group={} error=\"{}\"", path, errno_text(errno));
  return false;
}

// mkdir; true when made or (`existing_ok`) already there.
bool make_dir(const std::string& path, bool existing_ok) {
  if (::mkdir(path.c_str(), 0755) == 0) return true;
  return existing_ok && errno == EEXIST;
}

CgroupSupport v2_support() {
  CgroupSupport s;
  const std::string mount = kCgroupMount;
  if (!exists(mount + "/cgroup.controllers")) {
    s.reason = "no cgroup v2 mounted at " + mount + " (cgroup.controllers missing; cgroup v1 or hybrid)";
    return s;
  }
  auto own = own_groups();
  if (!own.count("")) {
    s.reason = "no cgroup v2 entry (\"0::\") in /proc/self/cgroup";
    return s;
  }
  std::string dir = mount + (own[""] == "/" ? "" : own[""]);
  if (::access(dir.c_str(), W_OK) != 0) {
    s.reason = "no write access to " + dir + " (the agent's cgroup is not delegated to it)";
    return s;
  }
  auto ctl = read_text(dir + "/cgroup.controllers");
  if (!ctl || !has_word(*ctl, "memory") || !has_word(*ctl, "cpu")) {
    s.reason = "memory and cpu controllers not available in " + dir + "/cgroup.controllers";
    return s;
  }
  if (std::string why = enable_controllers(dir); !why.empty()) {
    s.reason = why;
    return s;
  }
  std::string tasks = dir + "/" + kTasksGroup;
  if (!make_dir(tasks, true)) {
    s.reason = "cannot create " + tasks + ": " + errno_text(errno);
    return s;
  }
  if (std::string why = enable_controllers(tasks); !why.empty()) {
    s.reason = why;
    return s;
  }
  auto sub = read_text(tasks + "/cgroup.subtree_control");
  s.available = true;
  s.version = 2;
  s.memory = s.cpu = true;
  s.pids = sub && has_word(*sub, "pids");
  s.root = tasks;
  if (!s.pids) s.reason = "no pids controller";
  return s;
}

CgroupSupport v1_support() {
  CgroupSupport s;
  auto own = own_groups();
  auto mounts = v1_mounts();
  std::vector<std::string> missing;
  auto dir_of = [&](const std::string& c, std::string& why) -> std::optional<std::string> {
    auto m = mounts.find(c);
    if (m == mounts.end()) {
      why = "no cgroup v1 " + c + " hierarchy mounted";
      return std::nullopt;
    }
    auto g = own.find(c);
    if (g == own.end()) {
      why = "no " + c + " entry in /proc/self/cgroup";
      return std::nullopt;
    }
    std::string rel = g->second;
    const std::string& root = m->second.root;
    if (root != "/") {  // a sub-tree mounted: our path must lie in it
      if (rel != root && rel.rfind(root + "/", 0) != 0) {
        why = "own " + c + " group " + rel + " is outside the mounted " + root;
        return std::nullopt;
      }
      rel = rel.substr(root.size());
    }
    std::string dir = m->second.mountpoint + (rel == "/" ? "" : rel);
    if (::access(dir.c_str(), W_OK) != 0) {
      why = "no write access to " + dir + ": " + errno_text(errno);
      return std::nullopt;
    }
    return dir;
  };
  for (const char* c : kV1Required) {
    std::string why;
    auto dir = dir_of(c, why);
    if (!dir) {
      s.reason = why;
      s.v1_dirs.clear();
      return s;
    }
    s.v1_dirs[c] = *dir;
  }
  for (const char* c : kV1Optional) {
    std::string why;
    if (auto dir = dir_of(c, why)) {
      s.v1_dirs[c] = *dir;
    } else {
      missing.push_back(why);
    }
  }
  s.available = true;
  s.version = 1;
  s.pids = s.freezer = true;
  s.memory = s.v1_dirs.count("memory") > 0;
  s.cpu = s.v1_dirs.count("cpu") > 0;
  for (const auto& m : missing) s.reason += (s.reason.empty() ? "" : "; ") + m;
  return s;
}

// The relative paths of every group below `dir` (children before parents).
void subgroups(const std::string& dir, const std::string& rel, std::vector<std::string>& out, int depth = 0) {
  if (depth > 8) return;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st{};
    if (::lstat((dir + "/" + n).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names) {
    std::string r = rel.empty() ? n : rel + "/" + n;
    subgroups(dir + "/" + n, r, out, depth + 1);
    out.push_back(r);
  }
}

}  // namespace

std::string CgroupSupport::describe() const {
  if (!available) return "none: " + reason;
  std::string s = "cgroup v" + std::to_string(version) + " (";
  std::string list;
  if (pids) list += "pids ";
  if (freezer) list += "freezer ";
  if (memory) list += "memory ";
  if (cpu) list += "cpu ";
  if (!list.empty()) list.pop_back();
  return s + list + ")";
}

CgroupSupport cgroup_support() {
  CgroupSupport v2 = v2_support();
  if (v2.available) return v2;
  CgroupSupport v1 = v1_support();
  if (v1.available) return v1;
  v1.reason = "cgroup v2: " + v2.reason + "; cgroup v1: " + v1.reason;
  return v1;
}

TaskCgroup::TaskCgroup(TaskCgroup&& o) noexcept
    : version_(std::exchange(o.version_, 0)),
      dirs_(std::exchange(o.dirs_, {})),
      memory_limited_(std::exchange(o.memory_limited_, false)) {}

TaskCgroup& TaskCgroup::operator=(TaskCgroup&& o) noexcept {
  if (this != &o) {
    version_ = std::exchange(o.version_, 0);
    dirs_ = std::exchange(o.dirs_, {});
    memory_limited_ = std::exchange(o.memory_limited_, false);
  }
  return *this;
}

TaskCgroup TaskCgroup::create(const CgroupSupport& cg, const std::string& name, const CgroupLimits& limits) {
  TaskCgroup g;
  if (!cg.available) return g;
  const std::string base_name = sanitize_group_name(name);
  // Where the group goes in each hierarchy (the pids one first for v1).
  std::vector<Dir> bases;
  if (cg.version == 2) {
    bases.push_back({"", cg.root});
  } else {
    for (const char* c : kV1Required) {
      auto it = cg.v1_dirs.find(c);
      if (it == cg.v1_dirs.end()) return g;  // not what cgroup_support() gives
      bases.push_back({c, it->second});
    }
    for (const char* c : kV1Optional)
      if (auto it = cg.v1_dirs.find(c); it != cg.v1_dirs.end()) bases.push_back({c, it->second});
  }
  const size_t slash = base_name.find('/');
  // The parent of a two-part name, made as needed (v2: with the controllers enabled for its children).
  if (slash != std::string::npos) {
    for (const auto& b : bases) {
      std::string parent = b.path + "/" + base_name.substr(0, slash);
      if (!make_dir(parent, true)) {
        spdlog::warn("event=cgroup_setup_failed group={} error=\"{}\" (no task group)", parent, errno_text(errno));
        return g;
      }
      if (cg.version == 2)
        if (std::string why = enable_controllers(parent); !why.empty())
          spdlog::warn("event=cgroup_setup_failed group={} error=\"{}\"", parent, why);
    }
  }
  // The task's own group: the first hierarchy's mkdir must make a new one (a group with processes of
  // another run is not shared); the other hierarchies may find an empty stale one.
  std::string leaf_name;
  for (int attempt = 1; attempt <= 20 && leaf_name.empty(); ++attempt) {
    std::string candidate = base_name + (attempt == 1 ? "" : "-" + std::to_string(attempt));
    std::string first = bases[0].path + "/" + candidate;
    ::rmdir(first.c_str());  // a stale, empty group of an earlier run
    if (make_dir(first, false)) {
      leaf_name = candidate;
    } else if (errno != EEXIST) {
      spdlog::warn("event=cgroup_setup_failed group={} error=\"{}\" (no task group)", first, errno_text(errno));
      return g;
    } else {
      spdlog::warn("event=cgroup_busy group={} (holds processes of another run; trying another name)", first);
    }
  }
  if (leaf_name.empty()) return g;
  g.version_ = cg.version;
  g.dirs_.push_back({bases[0].controller, bases[0].path + "/" + leaf_name});
  for (size_t i = 1; i < bases.size(); ++i) {
    std::string path = bases[i].path + "/" + leaf_name;
    ::rmdir(path.c_str());
    if (make_dir(path, true)) {
      g.dirs_.push_back({bases[i].controller, path});
    } else {
      spdlog::warn("event=cgroup_setup_failed group={} error=\"{}\"", path, errno_text(errno));
      if (bases[i].controller == "freezer") {  // required: without it the group cannot be stopped safely
        g.remove();
        return g;
      }
    }
  }

  auto write_limit = [&](const std::string& file, const std::string& value) {
    int err = write_control(file, value);
    if (err != 0)
      spdlog::warn("event=cgroup_limit_failed file={} value={} error=\"{}\" (not enforced)", file, value, errno_text(err));
    return err == 0;
  };
  const int64_t mem_bytes = limits.memory_mib * 1048576;
  const int64_t quota_us = std::max<int64_t>(limits.cpu_milli * 100, 1000);  // the kernel's minimum is 1 ms
  if (cg.version == 2) {
    const std::string& d = g.dirs_[0].path;
    if (limits.memory_mib > 0) g.memory_limited_ = write_limit(d + "/memory.max", std::to_string(mem_bytes));
    if (limits.cpu_milli > 0) write_limit(d + "/cpu.max", std::to_string(quota_us) + " 100000");
    if (limits.pids > 0 && cg.pids) write_limit(d + "/pids.max", std::to_string(limits.pids));
  } else {
    if (const Dir* d = find_dir(g.dirs_, "memory"); d != nullptr && limits.memory_mib > 0) {
      g.memory_limited_ = write_limit(d->path + "/memory.limit_in_bytes", std::to_string(mem_bytes));
      // Swap counted too where the kernel accounts it; optional.
      if (g.memory_limited_ && exists(d->path + "/memory.memsw.limit_in_bytes"))
        write_control(d->path + "/memory.memsw.limit_in_bytes", std::to_string(mem_bytes));
    }
    if (const Dir* d = find_dir(g.dirs_, "cpu"); d != nullptr && limits.cpu_milli > 0) {
      if (write_limit(d->path + "/cpu.cfs_period_us", "100000"))
        write_limit(d->path + "/cpu.cfs_quota_us", std::to_string(quota_us));
    }
    if (const Dir* d = find_dir(g.dirs_, "pids"); d != nullptr && limits.pids > 0)
      write_limit(d->path + "/pids.max", std::to_string(limits.pids));
  }
  return g;
}

std::vector<int> TaskCgroup::open_procs_for_child() const {
  std::vector<int> fds;
  for (const auto& d : dirs_) fds.push_back(::open((d.path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  return fds;
}

void TaskCgroup::drop(size_t i) {
  if (i >= dirs_.size()) return;
  spdlog::warn("event=cgroup_join_failed group={}", dirs_[i].path);
  if (dirs_[i].controller == "memory") memory_limited_ = false;
  remove_dir(dirs_[i].path);
  dirs_.erase(dirs_.begin() + static_cast<std::ptrdiff_t>(i));
  if (dirs_.empty()) version_ = 0;
}

std::vector<pid_t> TaskCgroup::procs() const { return procs_of(dirs_); }

int TaskCgroup::kill_all(std::chrono::milliseconds budget) const { return kill_dirs(version_, dirs_, budget); }

int TaskCgroup::signal_outside(pid_t pgid, int sig) const {
  int n = 0;
  const pid_t self = ::getpid();
  for (pid_t p : procs())
    if (p != self && p > 1 && ::getpgid(p) != pgid && ::kill(p, sig) == 0) ++n;
  return n;
}

bool TaskCgroup::oom_killed(bool main_sigkilled) const {
  if (version_ == 2) return !dirs_.empty() && keyed_value(dirs_[0].path + "/memory.events", "oom_kill") > 0;
  const Dir* d = find_dir(dirs_, "memory");
  if (d == nullptr) return false;
  int64_t kills = keyed_value(d->path + "/memory.oom_control", "oom_kill");
  if (kills >= 0) return kills > 0;
  return main_sigkilled && number_in(d->path + "/memory.failcnt") > 0;
}

bool TaskCgroup::remove() {
  bool ok = true;
  for (const auto& d : dirs_) ok = remove_dir(d.path) && ok;
  dirs_.clear();
  version_ = 0;
  memory_limited_ = false;
  return ok;
}

int kill_cgroup_leftovers(const std::string& prefix) {
  const std::string p = sanitize_component(prefix);
  if (p.empty()) return 0;
  CgroupSupport cg = cgroup_support();
  if (!cg.available) return 0;
  std::vector<TaskCgroup::Dir> bases;
  if (cg.version == 2) {
    bases.push_back({"", cg.root + "/" + p});
  } else {
    for (const auto& [c, dir] : cg.v1_dirs) bases.push_back({c, dir + "/" + p});
  }
  // Every group below the prefix in any hierarchy, deepest first; each killed across all hierarchies.
  std::vector<std::string> rels;
  std::set<std::string> seen;
  for (const auto& b : bases) {
    std::vector<std::string> found;
    subgroups(b.path, "", found);
    for (auto& r : found)
      if (seen.insert(r).second) rels.push_back(r);
  }
  std::stable_sort(rels.begin(), rels.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
  });
  int killed = 0;
  // Processes directly in the prefix group too (it is the agent's, never a task's, but they are left over all the same).
  rels.push_back("");
  for (const auto& r : rels) {
    std::vector<TaskCgroup::Dir> dirs;
    for (const auto& b : bases) {
      std::string path = r.empty() ? b.path : b.path + "/" + r;
      if (exists(path)) dirs.push_back({b.controller, path});
    }
    // Freeze through the freezer hierarchy's directory even when found only there: order does not matter.
    killed += kill_dirs(cg.version, dirs, std::chrono::seconds(2));
    if (!r.empty())
      for (const auto& d : dirs) remove_dir(d.path);
  }
  if (killed > 0) spdlog::info("event=cgroup_leftovers_killed prefix={} processes={}", p, killed);
  return killed;
}

}  // namespace tessera::agent
