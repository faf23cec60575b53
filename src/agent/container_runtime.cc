// Containers through podman. See container_runtime.h.
#include "agent/container_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

extern char** environ;

namespace tessera::agent {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Starts argv with stdin, stdout and stderr on /dev/null; returns its pid (or -1). The caller reaps it.
pid_t spawn_quiet(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) ::dup2(null, 0), ::dup2(null, 1), ::dup2(null, 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

// The last "Error: ..." line podman wrote to the task's log (its own failures), "" if none.
std::string podman_error_in_log(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > 8192 ? size - 8192 : 0;
  in.seekg(from);
  std::string line, last;
  while (std::getline(in, line))
    if (line.rfind("Error: ", 0) == 0) last = line.substr(7);
  return last.substr(0, 1000);
}

std::string mount_arg(const ContainerMount& m) {
  return "type=bind,source=" + m.source + ",destination=" + m.target + (m.read_only ? ",ro=true" : "");
}

class PodmanTask final : public RunningTask {
 public:
  PodmanTask(PodmanOptions o, ContainerLaunch l, TaskProcess client)
      : o_(std::move(o)), l_(std::move(l)), client_(std::move(client)) {}
  ~PodmanTask() override {
    for (pid_t p : helpers_) ::waitpid(p, nullptr, 0);
  }

  pid_t pid() const override { return client_.pid(); }
  bool limits_enforced() const override { return l_.memory_limit_mib > 0 || l_.cpu_limit_milli > 0 || l_.pids_limit > 0; }
  std::string exit_reason() const override { return reason_; }
  const char* runtime() const override { return "podman"; }

  std::optional<int> poll() override {
    if (code_) return code_;
    reap_helpers();
    const auto c = client_.poll();
    if (!c) return std::nullopt;
    finish(*c);
    return code_;
  }

  // To the process group of the container's main process, as for a bare process (a shell that runs
  // the trainer passes nothing on; its process group has both); through podman until the container
  // is up.
  void signal(int sig) override {
    if (code_) return;
    if (const pid_t init = init_pid(); init > 0 && (::kill(-init, sig) == 0 || ::kill(init, sig) == 0)) return;
    helper({"kill", "--signal", std::to_string(sig), l_.name});
  }

  void terminate(int64_t grace_s) override {
    if (code_ || term_sent_) return;
    signal(SIGTERM);
    term_sent_ = true;
    kill_at_ = Clock::now() + std::chrono::seconds(std::max<int64_t>(0, grace_s));
  }

  void kill_now() override {
    if (code_) return;
    term_sent_ = true;
    kill_at_ = Clock::now();
    tick();
  }

  void tick() override {
    reap_helpers();
    if (code_ || !term_sent_) return;
    const auto now = Clock::now();
    if (now < kill_at_) return;
    if (!kill_sent_) {
      kill_sent_ = true;
      escalate_at_ = now + std::chrono::seconds(2);
      helper({"kill", "--signal", "KILL", l_.name});
    } else if (now >= escalate_at_) {
      // The container is not there to kill (still being created) or the client hangs: end the
      // client; poll() then removes whatever was created.
      ::kill(client_.pid(), SIGKILL);
      escalate_at_ = now + std::chrono::seconds(2);
    }
  }

 private:
  // The host pid of the container's main process (asked once; 0 while it is not running).
  pid_t init_pid() {
    if (init_pid_ > 0) return init_pid_;
    std::string out;
    if (run_command(podman({"inspect", "--type", "container", "--format", "{{.State.Pid}}", l_.name}), &out) == 0) {
      try {
        init_pid_ = pid_t(std::stol(out));
      } catch (...) {
        init_pid_ = 0;
      }
    }
    return init_pid_;
  }

  std::vector<std::string> podman(std::vector<std::string> verb) const {
    std::vector<std::string> a{o_.podman};
    a.insert(a.end(), verb.begin(), verb.end());
    return a;
  }
  void helper(std::vector<std::string> verb) {
    const pid_t p = spawn_quiet(podman(std::move(verb)));
    if (p > 0) helpers_.push_back(p);
  }
  void reap_helpers() {
    std::erase_if(helpers_, [](pid_t p) { return ::waitpid(p, nullptr, WNOHANG) != 0; });
  }

  // The client exited with `client_code`: the container's own exit and why, then remove it.
  void finish(int client_code) {
    std::string out;
    const int rc = run_command(podman({"inspect", "--type", "container", "--format",
                                       "{{.State.ExitCode}}|{{.State.OOMKilled}}|{{.State.Error}}", l_.name}),
                               &out);
    int code = client_code;
    if (rc == 0) {
      std::istringstream in(out);
      std::string exit_text, oom, error;
      std::getline(in, exit_text, '|');
      std::getline(in, oom, '|');
      std::getline(in, error);
      try {
        if (!exit_text.empty() && client_code != 125) code = std::stoi(exit_text);
      } catch (...) {
      }
      if (oom == "true")
        reason_ = "killed at its memory limit of " + std::to_string(l_.memory_limit_mib) + " MiB (out of memory)";
      else if (!error.empty())
        reason_ = "podman: " + error;
      else if (code == 128 + SIGKILL && !term_sent_ && l_.memory_limit_mib > 0)
        // Killed, not by us: with a memory limit that is the kernel's OOM killer, though some kernels
        // (and sandboxes) do not tell podman so.
        reason_ = "killed (SIGKILL) with its memory limit of " + std::to_string(l_.memory_limit_mib) +
                  " MiB: most likely out of memory (the runtime did not report it)";
    }
    if (reason_.empty() && (rc != 0 || (client_code >= 125 && client_code <= 127))) {
      const std::string e = podman_error_in_log(l_.log_path);
      if (!e.empty()) reason_ = "podman: " + e;
    }
    // Gone for good, whatever state it was in (created and never started, still running).
    std::string ignored;
    run_command(podman({"rm", "--force", "--time", "0", l_.name}), &ignored);
    std::error_code ec;
    if (!l_.env_file.empty()) fs::remove(l_.env_file, ec);
    code_ = code;
  }

  PodmanOptions o_;
  ContainerLaunch l_;
  TaskProcess client_;
  std::optional<int> code_;
  std::string reason_;
  std::vector<pid_t> helpers_;
  pid_t init_pid_ = 0;
  bool term_sent_ = false, kill_sent_ = false;
  Clock::time_point kill_at_{}, escalate_at_{};
};

}  // namespace

int run_command(const std::vector<std::string>& argv, std::string* output, size_t max_bytes) {
  int fds[2];
  if (argv.empty() || ::pipe2(fds, O_CLOEXEC) != 0) return -1;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(fds[1], 1), ::dup2(fds[1], 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (output && output->size() < max_bytes) output->append(buf, size_t(std::min<ssize_t>(n, ssize_t(max_bytes - output->size()))));
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (output)
    while (!output->empty() && (output->back() == '\n' || output->back() == '\r')) output->pop_back();
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Result<std::vector<std::string>> podman_run_args(const PodmanOptions& o, const ContainerLaunch& l) {
  if (l.image.empty()) return invalid_argument("container image is empty");
  if (l.argv.empty() || l.argv[0].empty()) return invalid_argument("command is empty: give at least the program to run");
  const auto colon = l.user.find(':');
  const std::string uid = l.user.substr(0, colon), gid = colon == std::string::npos ? "" : l.user.substr(colon + 1);
  if (uid.empty() || uid == "0" || gid == "0" || uid.find_first_not_of("0123456789") != std::string::npos ||
      gid.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("container user \"" + l.user + "\": must be UID[:GID], never 0 (containers never run as root)");
  for (const auto& [k, v] : l.env)
    if (v.find('\n') != std::string::npos || k.find('=') != std::string::npos)
      return invalid_argument("env " + k + ": a value with a newline cannot be passed to a container");
  for (const ContainerMount& m : l.mounts)
    if (m.source.find(',') != std::string::npos || m.target.find(',') != std::string::npos)
      return invalid_argument("mount " + m.source + " -> " + m.target + ": paths with ',' cannot be mounted");
  std::vector<std::string> a{o.podman, "run", "--name", l.name, "--pull", o.pull, "--sig-proxy=false", "--log-driver=none",
                             "--network", l.network == "none" ? "none" : "host", "--user", l.user,
                             "--security-opt", "no-new-privileges", "--cap-drop", "all"};
  if (!l.env_file.empty()) a.insert(a.end(), {"--env-file", l.env_file});
  if (!l.working_dir.empty()) a.insert(a.end(), {"--workdir", l.working_dir});
  for (const auto& [k, v] : l.labels) a.insert(a.end(), {"--label", k + "=" + v});
  for (const ContainerMount& m : l.mounts) a.insert(a.end(), {"--mount", mount_arg(m)});
  for (const std::string& d : l.devices) a.insert(a.end(), {"--device", d});
  if (l.memory_limit_mib > 0) {
    const std::string mem = std::to_string(l.memory_limit_mib) + "m";
    a.insert(a.end(), {"--memory", mem, "--memory-swap", mem});  // no swap beyond the limit
  }
  if (l.cpu_limit_milli > 0) {
    // Whole and thousandths of CPUs as text ("1.500"): podman's unit; no arithmetic in floats.
    std::string frac = std::to_string(l.cpu_limit_milli % 1000);
    frac.insert(0, 3 - frac.size(), '0');
    a.insert(a.end(), {"--cpus", std::to_string(l.cpu_limit_milli / 1000) + "." + frac});
  }
  if (l.pids_limit > 0) a.insert(a.end(), {"--pids-limit", std::to_string(l.pids_limit)});
  a.push_back(l.image);
  a.insert(a.end(), l.argv.begin(), l.argv.end());
  return a;
}

Status PodmanRuntime::check() const {
  std::string out;
  const int rc = run_command({o_.podman, "version", "--format", "{{.Client.Version}}"}, &out);
  if (rc != 0) return failed_precondition("\"" + o_.podman + " version\" failed (exit " + std::to_string(rc) + "): " + out.substr(0, 300));
  return {};
}

Result<std::unique_ptr<RunningTask>> PodmanRuntime::start(const ContainerLaunch& l) const {
  auto args = podman_run_args(o_, l);
  if (!args.ok()) return args.error();
  if (!l.env_file.empty()) {
    std::error_code ec;
    fs::create_directories(fs::path(l.env_file).parent_path(), ec);
    const int fd = ::open(l.env_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return failed_precondition("cannot write the env file " + l.env_file + ": " + std::strerror(errno));
    std::string text;
    for (const auto& [k, v] : l.env) text += k + "=" + v + "\n";
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    ::close(fd);
    if (!ok) return failed_precondition("cannot write the env file " + l.env_file);
  }
  // A container of this name left by an earlier start of the same task (the agent restarted).
  std::string ignored;
  run_command({o_.podman, "rm", "--force", "--time", "0", l.name}, &ignored);
  TaskLaunch client;
  client.argv = *args;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) client.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  client.log_path = l.log_path;
  // conmon, which podman starts beside the container, writes an "oom" marker into its working
  // directory when the kernel kills the container for memory: keep it in the agent's own directory,
  // not wherever the agent was started. (Only for absolute paths: the client's arguments may name
  // files relative to the agent's directory; the agent's own are absolute.)
  if (const fs::path own = fs::path(!l.env_file.empty() ? l.env_file : l.log_path).parent_path(); own.is_absolute()) {
    std::error_code ec;
    fs::create_directories(own, ec);
    client.working_dir = own.string();
  }
  auto p = TaskProcess::start(client);
  if (!p.ok()) return p.error();
  return std::unique_ptr<RunningTask>(new PodmanTask(o_, l, std::move(*p)));
}

int PodmanRuntime::remove_labelled(const std::string& key, const std::string& value) const {
  std::string out;
  if (run_command({o_.podman, "ps", "--all", "--quiet", "--filter", "label=" + key + "=" + value}, &out) != 0) return 0;
  std::istringstream in(out);
  std::vector<std::string> ids;
  for (std::string id; in >> id;) ids.push_back(id);
  if (ids.empty()) return 0;
  std::vector<std::string> rm{o_.podman, "rm", "--force", "--time", "0"};
  rm.insert(rm.end(), ids.begin(), ids.end());
  std::string ignored;
  run_command(rm, &ignored);
  return int(ids.size());
}

}  // namespace tessera::agent
