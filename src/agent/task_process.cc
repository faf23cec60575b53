// TaskProcess: fork/exec of one task with its own process group, its user, exact environment, log
// file and (where cgroup v2 is delegated to us) memory/CPU limits. See task_process.h.
#include "agent/task_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace tessera::agent {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCgroupMount = "/sys/fs/cgroup";
constexpr const char* kTasksGroup = "tessera-tasks";

std::string errno_text(int err) { return std::strerror(err); }

int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Whole file as a string; nullopt when it cannot be read.
std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

// Makes sure memory and cpu are enabled for the children of `dir`; returns an empty string or why not.
std::string enable_controllers(const std::string& dir) {
  auto sub = read_text(dir + "/cgroup.subtree_control");
  if (!sub) return "cannot read " + dir + "/cgroup.subtree_control";
  if (has_word(*sub, "memory") && has_word(*sub, "cpu")) return "";
  int err = write_control(dir + "/cgroup.subtree_control", "+memory +cpu");
  if (err == 0) return "";
  std::string why = "cannot enable memory and cpu in " + dir + "/cgroup.subtree_control: " + errno_text(err);
  if (err == EBUSY)
    why += " (the group holds processes itself; run the agent in a delegated group, e.g. "
           "systemd-run --property=Delegate=yes)";
  return why;
}

// Path of this process's cgroup v2 group relative to the mount ("0::/path" in /proc/self/cgroup).
std::optional<std::string> own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return std::nullopt;
}

// A cgroup name safe to use as one directory name.
std::string sanitize_group_name(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  if (out.empty() || out == "." || out == "..") {
    static std::atomic<int> counter{0};
    out = "task-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }
  return out;
}

// Resolves argv[0] like execvp, but against the PATH of the task's environment (else the agent's).
// Relative paths are taken relative to the working directory, where the child will be.
Result<std::string> resolve_executable(const TaskLaunch& launch) {
  const std::string& cmd = launch.argv[0];
  fs::path base = launch.working_dir.empty() ? fs::current_path() : fs::path(launch.working_dir);
  auto is_exec = [](const fs::path& p) {
    struct stat st{};
    // AT_EACCESS: checked with the file-system identity (the task's user, see ScopedFsUser).
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::faccessat(AT_FDCWD, p.c_str(), X_OK, AT_EACCESS) == 0;
  };
  if (cmd.find('/') != std::string::npos) {
    fs::path p = fs::path(cmd).is_absolute() ? fs::path(cmd) : base / cmd;
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0)
      return errno == EACCES ? permission_denied("command[0] \"" + cmd + "\": a directory on its path is not searchable by the task's user")
                             : not_found("command[0] \"" + cmd + "\": no such file");
    if (!is_exec(p)) return permission_denied("command[0] \"" + cmd + "\": not an executable file (for the task's user)");
    return p.string();
  }
  std::string path;
  if (auto it = launch.env.find("PATH"); it != launch.env.end()) {
    path = it->second;
  } else if (const char* p = std::getenv("PATH")) {
    path = p;
  } else {
    path = "/usr/local/bin:/usr/bin:/bin";
  }
  size_t start = 0;
  while (true) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    fs::path d = dir.empty() ? base : (fs::path(dir).is_absolute() ? fs::path(dir) : base / dir);
    fs::path cand = d / cmd;
    if (is_exec(cand)) return cand.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return not_found("command[0] \"" + cmd + "\": not found in PATH (" + path + ")");
}

// What the child reports over the close-on-exec pipe: the step that failed and its errno.
enum ChildStep : int32_t { kStepCgroup = 1, kStepUser, kStepChdir, kStepStdio, kStepExec };
struct ChildReport {
  int32_t step;
  int32_t err;
};

const char* step_text(int32_t step) {
  switch (step) {
    case kStepCgroup: return "joining the cgroup";
    case kStepUser: return "switching to the task's user";
    case kStepChdir: return "changing to the working directory";
    case kStepStdio: return "redirecting stdin/stdout/stderr";
    case kStepExec: return "exec";
  }
  return "starting";
}

// Who the child becomes before exec (prepared before fork).
struct ChildUser {
  bool change = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  size_t ngroups = 0;
};

// Child side between fork and exec: async-signal-safe calls only, no allocation. Order: process
// group, cgroup (as root), signals, then the user (groups, gid, uid: raw system calls, the child has
// one thread), then the working directory and stdio as that user, then exec.
[[noreturn]] void child_exec(int report_fd, int log_fd, int cgroup_procs_fd, const ChildUser& user, const char* dir,
                             const char* exe, char* const* argv, char* const* envp, int max_fd) {
  auto report = [&](int32_t step, int err) {
    ChildReport r{step, static_cast<int32_t>(err)};
    ssize_t ignored = ::write(report_fd, &r, sizeof r);
    (void)ignored;
  };
  ::setpgid(0, 0);
  // Into the task's cgroup before exec, so everything the task runs is inside its limits.
  if (cgroup_procs_fd >= 0) {
    if (::write(cgroup_procs_fd, "0", 1) != 1) report(kStepCgroup, errno);  // not fatal
  }
  // Default signal dispositions and an empty mask (the agent may ignore or block some).
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  if (user.change) {
    errno = EPERM;
    if (::syscall(SYS_setgroups, user.ngroups, user.groups) != 0 || ::syscall(SYS_setresgid, user.gid, user.gid, user.gid) != 0 ||
        ::syscall(SYS_setresuid, user.uid, user.uid, user.uid) != 0 || ::getuid() != user.uid || ::geteuid() != user.uid ||
        ::getegid() != user.gid || ::getuid() == 0) {
      report(kStepUser, errno);
      ::_exit(127);
    }
  }
  if (dir != nullptr && ::chdir(dir) != 0) {
    report(kStepChdir, errno);
    ::_exit(127);
  }
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) {
    report(kStepStdio, errno);
    ::_exit(127);
  }
  // Keep only 0-2 and the report pipe (moved to fd 3, still close-on-exec).
  if (report_fd != 3) {
    if (::dup3(report_fd, 3, O_CLOEXEC) < 0) ::_exit(127);
    report_fd = 3;
  }
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
#endif
    for (int fd = 4; fd < max_fd; ++fd) ::close(fd);
  ::execve(exe, argv, envp);
  report(kStepExec, errno);
  ::_exit(127);
}

}  // namespace

CgroupSupport cgroup_support() {
  CgroupSupport s;
  const std::string mount = kCgroupMount;
  if (!fs::exists(mount + "/cgroup.controllers")) {
    s.reason = "no cgroup v2 mounted at " + mount + " (cgroup.controllers missing; cgroup v1 or hybrid)";
    return s;
  }
  auto own = own_cgroup();
  if (!own) {
    s.reason = "no cgroup v2 entry (\"0::\") in /proc/self/cgroup";
    return s;
  }
  std::string dir = mount + (*own == "/" ? "" : *own);
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
  if (::mkdir(tasks.c_str(), 0755) != 0 && errno != EEXIST) {
    s.reason = "cannot create " + tasks + ": " + errno_text(errno);
    return s;
  }
  if (std::string why = enable_controllers(tasks); !why.empty()) {
    s.reason = why;
    return s;
  }
  s.available = true;
  s.root = tasks;
  return s;
}

Result<TaskProcess> TaskProcess::start(const TaskLaunch& launch) {
  if (launch.argv.empty() || launch.argv[0].empty())
    return invalid_argument("command is empty: give at least the program to run");
  if (launch.log_path.empty()) return invalid_argument("log_path is empty");
  ChildUser child_user;
  if (launch.user) {
    const TaskUser& u = *launch.user;
    if (u.uid == 0 || u.gid == 0) return invalid_argument("task user \"" + u.name + "\": tasks never run as root (uid or gid 0)");
    child_user.change = u.uid != ::geteuid() || u.gid != ::getegid();
    if (child_user.change && !can_switch_users())
      return failed_precondition("task user \"" + u.name + "\": the agent is not root and cannot start tasks as another user");
    child_user.uid = u.uid, child_user.gid = u.gid, child_user.groups = u.groups.data(), child_user.ngroups = u.groups.size();
  }
  Result<std::string> exe = std::string();
  {
    // What the task can reach, checked as the task's user.
    ScopedFsUser as_task(child_user.change ? launch.user : std::nullopt);
    if (!launch.working_dir.empty()) {
      std::error_code ec;
      if (!fs::is_directory(launch.working_dir, ec))
        return not_found("working_dir \"" + launch.working_dir + "\" does not exist or is not a directory" +
                         (child_user.change ? " that " + launch.user->name + " can reach" : std::string()));
    }
    exe = resolve_executable(launch);
  }
  if (!exe.ok()) return exe.error();

  // Log file: parent directories and the file itself are made here so errors are reported here.
  {
    std::error_code ec;
    fs::path parent = fs::path(launch.log_path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec) return failed_precondition("cannot create the log directory " + parent.string() + ": " + ec.message());
  }
  int log_fd = ::open(launch.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd < 0)
    return failed_precondition("cannot open the log file " + launch.log_path + ": " + errno_text(errno));

  // Cgroup with the limits, when limits are asked for and cgroup v2 is delegated to us.
  std::string cgroup_path;
  int procs_fd = -1;
  if (launch.memory_limit_mib > 0 || launch.cpu_limit_milli > 0) {
    CgroupSupport cg = cgroup_support();
    if (cg.available) {
      std::string path = cg.root + "/" + sanitize_group_name(launch.cgroup_name);
      ::rmdir(path.c_str());  // a stale, empty group of an earlier run
      bool ok = ::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST;
      if (ok && launch.memory_limit_mib > 0)
        ok = write_control(path + "/memory.max", std::to_string(launch.memory_limit_mib * 1048576)) == 0;
      if (ok && launch.cpu_limit_milli > 0)
        ok = write_control(path + "/cpu.max", std::to_string(launch.cpu_limit_milli * 100) + " 100000") == 0;
      if (ok) procs_fd = ::open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
      if (procs_fd >= 0) {
        cgroup_path = path;
      } else {
        spdlog::warn("event=cgroup_setup_failed group={} error=\"{}\" (limits not enforced)", path,
                     errno_text(errno));
        ::rmdir(path.c_str());
      }
    } else {
      spdlog::debug("event=cgroup_unavailable reason=\"{}\"", cg.reason);
    }
  }

  // Everything the child needs, prepared before fork (no allocation after it).
  std::vector<std::string> env_strings;
  env_strings.reserve(launch.env.size());
  for (const auto& [k, v] : launch.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = launch.argv;
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const char* dir = launch.working_dir.empty() ? nullptr : launch.working_dir.c_str();
  struct rlimit rl{};
  int max_fd = (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 65536)
                   ? static_cast<int>(rl.rlim_cur)
                   : 65536;

  auto cleanup = [&] {
    ::close(log_fd);
    if (procs_fd >= 0) ::close(procs_fd);
  };
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    int err = errno;
    cleanup();
    if (!cgroup_path.empty()) ::rmdir(cgroup_path.c_str());
    return internal_error("pipe: " + errno_text(err));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    cleanup();
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    if (!cgroup_path.empty()) ::rmdir(cgroup_path.c_str());
    return internal_error("fork: " + errno_text(err));
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    child_exec(pipefd[1], log_fd, procs_fd, child_user, dir, exe->c_str(), argv.data(), envp.data(), max_fd);
  }
  ::close(pipefd[1]);
  ::setpgid(pid, pid);  // also in the child; whichever runs first (EACCES after exec is fine)
  cleanup();

  // Reports until EOF (the pipe closes on exec or exit).
  std::optional<ChildReport> fatal;
  bool cgroup_failed = false;
  while (true) {
    ChildReport r{};
    ssize_t n = ::read(pipefd[0], &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof r)) break;
    if (r.step == kStepCgroup) {
      cgroup_failed = true;
    } else {
      fatal = r;
    }
  }
  ::close(pipefd[0]);

  if (fatal) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!cgroup_path.empty()) ::rmdir(cgroup_path.c_str());
    std::string what = "command[0] \"" + launch.argv[0] + "\" (" + *exe + "): " + step_text(fatal->step);
    if (fatal->step == kStepChdir) what += " \"" + launch.working_dir + "\"";
    if (fatal->step == kStepUser) what += " " + launch.user->name;
    what += " failed: " + errno_text(fatal->err);
    return failed_precondition(what);
  }
  if (cgroup_failed) {
    spdlog::warn("event=cgroup_join_failed group={} pid={} (limits not enforced)", cgroup_path, pid);
    ::rmdir(cgroup_path.c_str());  // empty: the child never joined it
    cgroup_path.clear();
  }

  TaskProcess p;
  p.pid_ = pid;
  p.cgroup_path_ = cgroup_path;
  return p;
}

TaskProcess::TaskProcess(TaskProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      exit_code_(std::exchange(o.exit_code_, std::nullopt)),
      term_sent_(std::exchange(o.term_sent_, false)),
      kill_sent_(std::exchange(o.kill_sent_, false)),
      kill_at_ms_(std::exchange(o.kill_at_ms_, 0)),
      cgroup_path_(std::exchange(o.cgroup_path_, {})) {}

TaskProcess& TaskProcess::operator=(TaskProcess&& o) noexcept {
  if (this != &o) {
    release();
    pid_ = std::exchange(o.pid_, -1);
    exit_code_ = std::exchange(o.exit_code_, std::nullopt);
    term_sent_ = std::exchange(o.term_sent_, false);
    kill_sent_ = std::exchange(o.kill_sent_, false);
    kill_at_ms_ = std::exchange(o.kill_at_ms_, 0);
    cgroup_path_ = std::exchange(o.cgroup_path_, {});
  }
  return *this;
}

TaskProcess::~TaskProcess() { release(); }

void TaskProcess::release() {
  if (pid_ <= 0) return;
  // Reaps when exited; the group can go only once nothing runs in it (rmdir fails with EBUSY otherwise).
  if (poll().has_value() && !cgroup_path_.empty()) {
    if (::rmdir(cgroup_path_.c_str()) != 0 && errno != ENOENT)
      spdlog::warn("event=cgroup_remove_failed group={} error=\"{}\"", cgroup_path_, errno_text(errno));
  }
  pid_ = -1;
  cgroup_path_.clear();
}

std::optional<int> TaskProcess::poll() {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    if (WIFEXITED(st)) exit_code_ = WEXITSTATUS(st);
    else if (WIFSIGNALED(st)) exit_code_ = 128 + WTERMSIG(st);
  } else if (r < 0 && errno == ECHILD) {
    exit_code_ = 255;  // reaped elsewhere: the status is lost
  }
  return exit_code_;
}

void TaskProcess::signal(int sig) {
  if (pid_ <= 0 || poll().has_value()) return;
  ::kill(-pid_, sig);
}

void TaskProcess::terminate(int64_t grace_s) {
  if (pid_ <= 0) return;
  int64_t at = monotonic_ms() + std::max<int64_t>(grace_s, 0) * 1000;
  if (term_sent_) {  // a second call can only bring the KILL forward
    kill_at_ms_ = std::min(kill_at_ms_, at);
  } else {
    term_sent_ = true;
    kill_at_ms_ = at;
    // The whole group, even when the leader is gone (its children may remain); CONT wakes stopped ones.
    ::kill(-pid_, SIGTERM);
    ::kill(-pid_, SIGCONT);
  }
  tick();
}

void TaskProcess::kill_now() {
  if (pid_ <= 0) return;
  term_sent_ = true;
  kill_sent_ = true;
  kill_at_ms_ = monotonic_ms();
  ::kill(-pid_, SIGKILL);
}

void TaskProcess::tick() {
  if (pid_ <= 0) return;
  poll();
  if (!term_sent_ || kill_sent_ || monotonic_ms() < kill_at_ms_) return;
  kill_sent_ = true;
  // The leader may be gone; members of its group may not (kill(-pgid, 0) finds them).
  if (::kill(-pid_, 0) == 0) ::kill(-pid_, SIGKILL);
}

Result<int> signal_number(const std::string& name) {
  static const std::pair<const char*, int> kSignals[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2},   {"TERM", SIGTERM},   {"CONT", SIGCONT},
      {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
      {"PIPE", SIGPIPE}, {"ABRT", SIGABRT},   {"XCPU", SIGXCPU},   {"PWR", SIGPWR},
  };
  std::string up;
  for (char c : name) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up.rfind("SIG", 0) == 0) up = up.substr(3);
  for (const auto& [n, num] : kSignals)
    if (up == n) return num;
  std::string names;
  for (const auto& [n, num] : kSignals) names += (names.empty() ? "SIG" : ", SIG") + std::string(n);
  return invalid_argument("unknown signal \"" + name + "\"; accepted (with or without SIG, any case): " + names);
}

Status write_checkpoint_request(const std::string& dir, int64_t now_unix_s, const std::string& reason, const std::string& mode,
                                const std::optional<TaskUser>& as) {
  ScopedFsUser as_task(as);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return failed_precondition("cannot create the checkpoint directory " + dir + ": " + ec.message());
  std::string final_path = dir + "/.request";
  std::string tmp = final_path + ".tmp." + std::to_string(::getpid());
  {
    // A fresh file (O_EXCL, no link followed): whatever the task left under this name is replaced.
    ::unlink(tmp.c_str());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return failed_precondition("cannot write " + tmp + ": " + errno_text(errno));
    const std::string text = std::to_string(now_unix_s) + "\n" + reason + "\n" + mode + "\n";
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    ::close(fd);
    if (!ok) {
      fs::remove(tmp, ec);
      return failed_precondition("cannot write " + tmp);
    }
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    int err = errno;
    fs::remove(tmp, ec);
    return failed_precondition("cannot rename " + tmp + " to " + final_path + ": " + errno_text(err));
  }
  return Status::ok_status();
}

std::optional<std::string> read_checkpoint_ack(const std::string& dir, int64_t since_unix_s, const std::optional<TaskUser>& as) {
  ScopedFsUser as_task(as);
  std::string path = dir + "/.ack";
  // Non-blocking and a regular file only: a FIFO or device the task put there must not stall the agent.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st{};
  char buf[4096];
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<int64_t>(st.st_mtime) >= since_unix_s)
    n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  std::string line(buf, size_t(n));
  line = line.substr(0, line.find('\n'));
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  line.erase(line.begin(), std::find_if(line.begin(), line.end(), not_space));
  line.erase(std::find_if(line.rbegin(), line.rend(), not_space).base(), line.end());
  if (line.empty()) return std::nullopt;
  return line;
}

AckStamp checkpoint_ack_stamp(const std::string& dir, const std::optional<TaskUser>& as) {
  ScopedFsUser as_task(as);
  struct stat st{};
  if (::stat((dir + "/.ack").c_str(), &st) != 0) return {};
  return AckStamp{uint64_t(st.st_ino), int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::optional<std::string> read_checkpoint_ack_since(const std::string& dir, const AckStamp& before,
                                                     const std::optional<TaskUser>& as) {
  const AckStamp now = checkpoint_ack_stamp(dir, as);
  if (now == AckStamp{} || now == before) return std::nullopt;
  return read_checkpoint_ack(dir, 0, as);
}

void clear_checkpoint_request(const std::string& dir, const std::optional<TaskUser>& as) {
  ScopedFsUser as_task(as);
  std::error_code ec;
  fs::remove(dir + "/.request", ec);
}

}  // namespace tessera::agent
