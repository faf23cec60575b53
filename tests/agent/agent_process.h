// Test harness: runs the real `tessera agent` binary as a child process against a ServerProcess,
// with a declared fake GPU inventory and its own state directory (removed at the end, after any
// task processes it left are killed). Run as root (CI), the agent starts tasks as `nobody`: the
// harness's directory is 0711 so they reach their task directory (DIR/state-tasks), and tests give
// tasks output directories from task_writable_dir(). Not thread-safe; one instance per agent.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../server/server_process.h"

namespace tessera::testing {

// A temporary directory any task user can write (tasks run as nobody under a root agent).
inline std::string task_writable_dir(const std::string& prefix) {
  const std::string dir = make_temp_dir(prefix);
  ::chmod(dir.c_str(), 0777);
  return dir;
}

class AgentProcess {
 public:
  AgentProcess(std::string node, std::string gpus) : node_(std::move(node)), gpus_(std::move(gpus)), dir_(make_temp_dir("tessera-agent")) {
    ::chmod(dir_.c_str(), 0711);  // searchable, not listable: tasks reach state-tasks/, not state/
  }
  ~AgentProcess() {
    kill(SIGKILL);
    kill_leftover_tasks();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const std::string& dir() const { return dir_; }
  const std::string& node() const { return node_; }
  // The agent's own heartbeat interval (200 ms by default; "0": the controller's).
  void set_heartbeat_ms(int ms) { heartbeat_ms_ = std::to_string(ms); }
  std::string output() const { return read_file(dir_ + "/agent.out"); }

  // Starts (or, after kill(), restarts) the agent on the same state directory.
  void start(int server_port, const std::string& token, std::vector<std::string> extra = {}) {
    start("http://127.0.0.1:" + std::to_string(server_port), token, std::move(extra));
  }
  // `servers`: the agent's --server (one URL, or several separated by commas).
  void start(const std::string& servers, const std::string& token, std::vector<std::string> extra = {}) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open((dir_ + "/agent.out").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<std::string> args = {TESSERA_BINARY, "agent", "--server", servers,
                                        "--token", token, "--node", node_, "--gpus", gpus_, "--state-dir", dir_ + "/state",
                                        "--heartbeat-interval-ms", heartbeat_ms_, "--stop-grace", "3", "--log-level", "info"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  // Sends a signal; for KILL/TERM/INT waits for the exit and returns the wait status.
  int kill(int sig) { return signal_and_wait(pid_, sig); }

  // Task processes the agent started and that still run (by its pid files).
  std::vector<pid_t> task_pids() const {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/state/run", ec)) {
      std::ifstream in(e.path());
      pid_t p = 0;
      in >> p;
      if (p > 1 && ::kill(p, 0) == 0) out.push_back(p);
    }
    return out;
  }

  void kill_leftover_tasks() {
    for (pid_t p : task_pids()) {
      ::kill(-p, SIGKILL);
      ::kill(p, SIGKILL);
    }
  }

 private:
  std::string heartbeat_ms_ = "200";
  std::string node_, gpus_, dir_;
  pid_t pid_ = -1;
};

// Where `tessera up --node local` run as root keeps its tasks' directories: /var/tmp/tessera-up-local-HASH,
// HASH the FNV-1a of the data directory's absolute path (src/cli/cmd_agent.cc, up_task_dir). A test
// removes only its own: other tests' `up`s may run beside it. (Not root: DATA-tasks, under the data's
// parent, removed with the test's directory.)
inline std::string up_task_dir(const std::string& data) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return "/var/tmp/tessera-up-local-" + std::string(hex, 8);
}

}  // namespace tessera::testing
