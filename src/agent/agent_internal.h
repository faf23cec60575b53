// Inside the agent (agent.h): one task's local record and the agent's state, shared by agent.cc
// (controller calls, convergence, the log server) and agent_tasks.cc (starting, stopping,
// checkpointing and polling tasks). Owned by Agent::run()'s thread; see agent.h for threads.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <cstdint>
#include <map>
#include <memory>
#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/container_runtime.h"
#include "agent/running_task.h"
#include "agent/task_process.h"
#include "agent/task_user.h"

namespace tessera::agent {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
inline int64_t unix_now() { return int64_t(std::time(nullptr)); }
std::string random_hex(size_t bytes);
// A port nobody listens on right now (the kernel picks it); the task binds it moments later.
int free_port(const std::string& address);
std::string pid_path(const std::string& state_dir, int64_t job, int64_t attempt, int task);
void append_line(const std::string& path, const std::string& line);
// A string field of the controller's assignment ("" when absent or not a string).
std::string str_field(const nlohmann::json& a, const char* key);

// Kills what the agent `agent_id` (with this state directory) started and may have left: task
// processes by pid file, every process in its task cgroups, its containers (by label), and removes
// its containers' env files. Returns how many it killed. Used at start and by the watchdog.
int kill_leftovers(const std::string& node, const std::string& state_dir, const std::string& agent_id,
                   const PodmanRuntime* podman);

// One task of a job on this node, for one attempt.
struct LocalTask {
  int64_t job = 0, attempt = 0;
  int task = 0;
  Json assignment;
  std::unique_ptr<RunningTask> proc;  // set once started (a process or a container)
  std::string state = "starting";  // starting (waiting for its rendezvous port), running, succeeded, failed, checkpointed, stopped
  int exit_code = 0;
  int master_port = 0;       // task 0 of a gang: the port this agent picked
  std::string ckpt_dir;       // on this host (the checkpoint protocol's files are here)
  std::string ckpt_env;       // as the task sees it (TESSERA_CHECKPOINT_DIR): ckpt_dir, or inside its container
  std::string reason;         // why it failed, when the exit code does not say (reported as "message")
  std::optional<TaskUser> user;  // who it runs as (nullopt: as the agent)
  std::string scratch;           // its own directory under TASK_DIR/work (removed when forgotten)
  int64_t ckpt_requested_at = -1;  // unix s; -1 = no checkpoint asked
  Clock::time_point ckpt_deadline{};
  std::string ack;           // the latest acknowledged checkpoint path (periodic or asked for)
  bool request_acked = false;  // the job acknowledged the checkpoint it was asked for
  int64_t started_unix = 0;
  bool stop_asked = false;
  Clock::time_point ckpt_requested_clock{};
  AckStamp ckpt_stamp;  // .ack as it was before the stop request (a newer one answers it)
  // Periodic saves the controller asks for on spot (checkpoint_every_s): a `save` request, then the
  // task goes on. saves/cost_ms: checkpoints timed from request to .ack (reported). Saves fall on
  // save_anchor + k * every (unix s), so a gang's agents on several nodes ask at the same time.
  int64_t save_every_s = 0, save_anchor = 0, next_save = -1;
  Clock::time_point save_requested{}, save_deadline{};
  bool save_pending = false;
  AckStamp save_stamp;
  int64_t saves = 0, cost_ms = -1;
  int64_t signal_done = -1;  // the controller's signal_seq this task has had (-1: not seen yet)
  // The job's `output` file (Slurm's --output), opened as the task's user once it runs, and its own
  // log (out_src), copied there as it grows. -1: none or not open yet. close_output() closes both.
  int out_fd = -1, out_src = -1;
  bool out_tried = false;
  int64_t out_copied = 0;
  void close_output() {
    for (int* fd : {&out_fd, &out_src})
      if (*fd >= 0) ::close(*fd), *fd = -1;
  }
  bool terminal() const { return state != "starting" && state != "running"; }
};

using TaskKey = std::tuple<int64_t, int64_t, int>;  // job, attempt, task

// The controllers an agent talks to (--server URL[,URL...], docs/ha.md): the one that answered last
// first. Thread-safe (run() and the watch thread use it).
class ServerList {
 public:
  ServerList() = default;
  // Parses "URL[,URL...]" (before any other call).
  void set(const std::string& csv) {
    all_.clear();
    size_t start = 0;
    for (;;) {
      const size_t comma = csv.find(',', start);
      std::string one = csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!one.empty() && one.back() == '/') one.pop_back();
      if (!one.empty()) all_.push_back(one);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (all_.empty()) all_.push_back(csv);
    current_ = all_.front();
  }
  std::string current() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  size_t size() const { return all_.size(); }
  // A standby's redirect: the leader's base URL.
  void follow(const std::string& url) {
    std::lock_guard lock(mu_);
    current_ = url;
  }
  // The next one in the list after the current (or the first, when the current came from a redirect).
  void next() {
    std::lock_guard lock(mu_);
    auto it = std::find(all_.begin(), all_.end(), current_);
    current_ = it == all_.end() || it + 1 == all_.end() ? all_.front() : *(it + 1);
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> all_;
  std::string current_;
};

struct Agent::Impl {
  AgentOptions opt;
  ServerList servers;  // from opt.server
  std::unique_ptr<GpuBackend> gpus;
  std::string log_secret = random_hex(16);
  httplib::Server log_server;
  std::thread log_thread;
  int log_port = 0;
  std::map<TaskKey, LocalTask> tasks;
  TaskUserMap task_users;
  int64_t interval_ms = 5000;
  Inventory inventory;
  bool registered = false;
  Clock::time_point next_beat{};
  Clock::time_point last_error_log{};
  std::string notice_seen;  // the notice file's mtime and content last logged
  std::string agent_id;     // NODE-<hash of the state dir>: labels and names this agent's containers and cgroups
  std::optional<PodmanRuntime> podman;  // nullopt: no container runtime (why: runtime_missing)
  std::string runtime_missing;
  int watchdog_fd = -1;     // write end of the watchdog's pipe (never written; its close is the signal)
  // Fencing (docs/containers.md): the controller's task lease; past it without a successful
  // heartbeat, this agent kills its tasks, since the controller restarts them elsewhere after it.
  int64_t lease_ms = 0;
  Clock::time_point last_ok_beat{};  // when the last heartbeat the controller answered was sent

  // ---- the watch (a long poll that wakes run() when the controller has something for this node) ----
  // seq_seen: the node's notice number in the latest heartbeat answer (-1: none yet, or a controller
  // without watches). The watch thread holds POST /agent/watch open with it; an answer that differs
  // sets `wake`, and run() heartbeats at once. wake_mu guards wake and watch_cli.
  std::atomic<int64_t> seq_seen{-1};
  std::atomic<bool> watch_stop{false};
  std::mutex wake_mu;
  std::condition_variable wake_cv;
  bool wake = false;
  httplib::Client* watch_cli = nullptr;  // the watch in flight, for stop
  Clock::time_point last_start{};        // the latest task start (run() polls faster just after)
  int64_t round_trip_ms = -1;            // the latest heartbeat's, reported with the next
  void watch_loop();
  void stop_watch();
  void wake_up() {
    {
      std::lock_guard lock(wake_mu);
      wake = true;
    }
    wake_cv.notify_all();
  }
  bool has_live_tasks() const {
    for (const auto& [key, t] : tasks)
      if (!t.terminal()) return true;
    return false;
  }
  // ---- controller calls ---------------------------------------------------------------------------
  httplib::Result post(const std::string& path, const Json& body);
  void log_error(const std::string& what);
  static std::string error_message(const httplib::Response& r);
  bool do_register();
  Json heartbeat_body();
  // The spot interruption notice file, when it exists: {noticed_at (its mtime), reclaim_at (its
  // first line, when that is unix seconds)}. Level-triggered: reported at every beat while it exists.
  Json interruption_notice();
  // Sends the node's report and converges to the answer; true when the controller answered.
  bool heartbeat();
  // A planned stop (stop() with stop_tasks_on_exit): tells the controller this node is leaving, lets
  // it checkpoint and requeue the node's jobs (no restart counted), and returns once nothing runs
  // here and the controller wants nothing more of it, or by the deadline (then stops what is left).
  void leave();
  bool leaving = false;          // reported at every heartbeat once the planned stop began
  bool last_answer_empty = false;  // the latest answer asked this node to run nothing

  // ---- convergence ------------------------------------------------------------------------------
  void converge(const Json& ans);
  void apply_mig(const Json& desired);
  // Environment of a task (task_env.h).
  std::map<std::string, std::string> task_env(const LocalTask& t, int master_port);
  void try_start(LocalTask& t);
  // A task whose assignment names a container (container_runtime.h).
  void start_container(LocalTask& t, int port);
  void fail_start(LocalTask& t, const std::string& log, const std::string& why);
  // The task's scratch directory (TASK_DIR/work/job-J-aA-tT with tmp/, owned by its user) and its
  // checkpoint directory: the default one under TASK_DIR/checkpoints is made and given to the user;
  // one the job named is made as the user (it may only make what the user could).
  // In a container the checkpoint directory is the cluster's checkpoint store's (checkpoint.host_dir)
  // or the default, mounted where the job said (or /tessera/checkpoint).
  Status prepare_dirs(LocalTask& t, bool container);
  void request_checkpoint(LocalTask& t, const Json& s);
  void stop_task(LocalTask& t, const std::string& why);
  // Periodic `save` requests (file only, no signal: a job that acts on the signal alone is not
  // stopped by them). Returns true when a save was acknowledged.
  bool drive_saves(LocalTask& t);
  // Exits, checkpoint acknowledgements and deadlines. Returns true when something changed.
  bool poll_tasks();
  // Copies what the task's log gained since the last call into its `output` file (opening it as the
  // task's user the first time); `final`: the task ended, so close it.
  void mirror_output(LocalTask& t, bool final);
  // Task processes a previous agent left (it was killed): stop them, their jobs were requeued.
  void reap_leftovers();
  void stop_all_tasks();
  // Kills every task now when the lease ran out without a heartbeat answered. Returns true if it did.
  bool fence_if_lease_expired();
  // The CDI spec of fake GPUs (cdi.h), rewritten when the inventory's MIG instances change.
  void write_cdi_spec();
  // Forks the watchdog (before any thread starts); see Agent::create.
  Status start_watchdog();

  // ---- the log server -----------------------------------------------------------------------------
  Status start_log_server();
};

}  // namespace tessera::agent
