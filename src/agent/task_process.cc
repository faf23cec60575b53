// TaskProcess: fork/exec of one task with its own process group, its user, exact environment, log
// file and (where cgroups are usable, task_cgroup.h) its own cgroup with memory/CPU/pids limits,
// killed as a whole. See task_process.h.
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
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

namespace tessera::agent {
namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
  int32_t index;  // kStepCgroup: which of the group's directories could not be joined
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
[[noreturn]] void child_exec(int report_fd, int log_fd, const int* cgroup_procs_fds, size_t n_cgroup_fds,
                             const ChildUser& user, const char* dir, const char* exe, char* const* argv,
                             char* const* envp, int max_fd) {
  auto report = [&](int32_t step, int err, int32_t index = 0) {
    ChildReport r{step, static_cast<int32_t>(err), index};
    ssize_t ignored = ::write(report_fd, &r, sizeof r);
    (void)ignored;
  };
  ::setpgid(0, 0);
  // Into the task's cgroup (each hierarchy's directory) before exec, so everything the task runs,
  // whatever it forks, is inside its limits and found when it is killed.
  for (size_t i = 0; i < n_cgroup_fds; ++i) {
    if (cgroup_procs_fds[i] < 0 || ::write(cgroup_procs_fds[i], "0", 1) != 1)
      report(kStepCgroup, cgroup_procs_fds[i] < 0 ? EBADF : errno, static_cast<int32_t>(i));  // not fatal
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

  // The task's own cgroup (every hierarchy used) with its limits, when it has a group name or a
  // limit and cgroups are usable; the child joins it before exec. Without one the task still runs,
  // without limits or a group kill.
  TaskCgroup cgroup;
  const bool limited = launch.memory_limit_mib > 0 || launch.cpu_limit_milli > 0 || launch.pids_limit > 0;
  if (limited || !launch.cgroup_name.empty()) {
    CgroupSupport cg = cgroup_support();
    if (cg.available) {
      cgroup = TaskCgroup::create(cg, launch.cgroup_name,
                                  CgroupLimits{launch.memory_limit_mib, launch.cpu_limit_milli, launch.pids_limit});
    } else {
      spdlog::debug("event=cgroup_unavailable reason=\"{}\"", cg.reason);
    }
  }
  std::vector<int> procs_fds = cgroup.open_procs_for_child();

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
    for (int fd : procs_fds)
      if (fd >= 0) ::close(fd);
  };
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    int err = errno;
    cleanup();
    cgroup.remove();
    return internal_error("pipe: " + errno_text(err));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    cleanup();
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    cgroup.remove();
    return internal_error("fork: " + errno_text(err));
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    child_exec(pipefd[1], log_fd, procs_fds.data(), procs_fds.size(), child_user, dir, exe->c_str(), argv.data(),
               envp.data(), max_fd);
  }
  ::close(pipefd[1]);
  ::setpgid(pid, pid);  // also in the child; whichever runs first (EACCES after exec is fine)
  cleanup();

  // Reports until EOF (the pipe closes on exec or exit).
  std::optional<ChildReport> fatal;
  std::vector<size_t> not_joined;
  while (true) {
    ChildReport r{};
    ssize_t n = ::read(pipefd[0], &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof r)) break;
    if (r.step == kStepCgroup) {
      spdlog::warn("event=cgroup_join_failed pid={} error=\"{}\"", pid, errno_text(r.err));
      not_joined.push_back(static_cast<size_t>(r.index));
    } else {
      fatal = r;
    }
  }
  ::close(pipefd[0]);

  if (fatal) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    cgroup.remove();  // the child is gone and started nothing
    std::string what = "command[0] \"" + launch.argv[0] + "\" (" + *exe + "): " + step_text(fatal->step);
    if (fatal->step == kStepChdir) what += " \"" + launch.working_dir + "\"";
    if (fatal->step == kStepUser) what += " " + launch.user->name;
    what += " failed: " + errno_text(fatal->err);
    return failed_precondition(what);
  }
  // Directories the child could not join hold nothing of it: dropped (highest index first).
  std::sort(not_joined.rbegin(), not_joined.rend());
  for (size_t i : not_joined) cgroup.drop(i);

  TaskProcess p;
  p.pid_ = pid;
  p.memory_limited_ = cgroup.memory_limited();
  p.cgroup_ = std::move(cgroup);
  return p;
}

TaskProcess::TaskProcess(TaskProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      exit_code_(std::exchange(o.exit_code_, std::nullopt)),
      term_sent_(std::exchange(o.term_sent_, false)),
      kill_sent_(std::exchange(o.kill_sent_, false)),
      kill_at_ms_(std::exchange(o.kill_at_ms_, 0)),
      cgroup_(std::move(o.cgroup_)),
      memory_limited_(std::exchange(o.memory_limited_, false)),
      oom_killed_(std::exchange(o.oom_killed_, false)) {}

TaskProcess& TaskProcess::operator=(TaskProcess&& o) noexcept {
  if (this != &o) {
    release();
    pid_ = std::exchange(o.pid_, -1);
    exit_code_ = std::exchange(o.exit_code_, std::nullopt);
    term_sent_ = std::exchange(o.term_sent_, false);
    kill_sent_ = std::exchange(o.kill_sent_, false);
    kill_at_ms_ = std::exchange(o.kill_at_ms_, 0);
    cgroup_ = std::move(o.cgroup_);
    memory_limited_ = std::exchange(o.memory_limited_, false);
    oom_killed_ = std::exchange(o.oom_killed_, false);
  }
  return *this;
}

TaskProcess::~TaskProcess() { release(); }

void TaskProcess::release() {
  if (pid_ <= 0) return;
  // Reaps when exited, which settles the group too (see poll()). A running task keeps its group
  // (the agent's restart cleanup, kill_cgroup_leftovers, finds it).
  poll();
  pid_ = -1;
  cgroup_ = TaskCgroup();
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
  if (exit_code_ && cgroup_.active()) {
    // The task is over: its verdict first (the counters go with the group), then whatever it left
    // running (daemons), then the group itself.
    oom_killed_ = cgroup_.oom_killed(*exit_code_ == 128 + SIGKILL);
    if (int left = cgroup_.kill_all(); left > 0)
      spdlog::info("event=task_leftovers_killed pid={} processes={}", pid_, left);
    cgroup_.remove();
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
    // Processes of the task that left its process group (setsid daemons) are asked too.
    if (cgroup_.active() && cgroup_.signal_outside(pid_, SIGTERM) > 0) cgroup_.signal_outside(pid_, SIGCONT);
  }
  tick();
}

void TaskProcess::kill_everything() {
  ::kill(-pid_, SIGKILL);
  // Everything else the task started (setsid, double fork): frozen, killed, until none is left.
  if (cgroup_.active()) cgroup_.kill_all();
}

void TaskProcess::kill_now() {
  if (pid_ <= 0) return;
  term_sent_ = true;
  kill_sent_ = true;
  kill_at_ms_ = monotonic_ms();
  kill_everything();
}

void TaskProcess::tick() {
  if (pid_ <= 0) return;
  poll();
  if (!term_sent_ || kill_sent_ || monotonic_ms() < kill_at_ms_) return;
  kill_sent_ = true;
  // The leader may be gone; members of its process group may not (kill(-pgid, 0) finds them), nor
  // members of its cgroup.
  if (::kill(-pid_, 0) == 0 || cgroup_.active()) kill_everything();
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
