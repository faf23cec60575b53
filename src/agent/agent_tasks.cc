// Starting, stopping, checkpointing and polling a node's tasks (agent_internal.h).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "agent/agent_internal.h"
#include "agent/log_server.h"
#include "agent/cdi.h"
#include "agent/task_cgroup.h"
#include "agent/task_env.h"

namespace tessera::agent {

namespace fs = std::filesystem;


std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned b = rd() & 0xff;
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

int free_port(const std::string& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_ANY);
  int port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

std::string pid_path(const std::string& state_dir, int64_t job, int64_t attempt, int task) {
  return state_dir + "/run/" + std::to_string(job) + "-" + std::to_string(attempt) + "-" + std::to_string(task) + ".pid";
}

void append_line(const std::string& path, const std::string& line) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
}

std::string str_field(const nlohmann::json& a, const char* key) {
  const auto it = a.find(key);
  return it != a.end() && it->is_string() ? it->get<std::string>() : "";
}




// Environment of a task (task_env.h).
std::map<std::string, std::string> Agent::Impl::task_env(const LocalTask& t, int master_port) {
  return task_environment(TaskEnvInput{&t.assignment, t.job, t.attempt, t.task, master_port, opt.node, opt.address,
                                       &inventory, t.ckpt_env, t.scratch, t.user});
}

void Agent::Impl::try_start(LocalTask& t) {
  const Json& a = t.assignment;
  const int world = a.value("tasks", 1);
  int port = a.value("master_port", 0);
  if (port == 0) {  // every job gets the whole torchrun contract, a single task too
    if (t.task == 0) {
      if (t.master_port == 0) t.master_port = free_port(opt.address);
      port = t.master_port;
    } else {
      // Task 0 may be here too: use the port this agent picked for it.
      auto it0 = tasks.find({t.job, t.attempt, 0});
      if (it0 != tasks.end() && it0->second.master_port > 0) port = it0->second.master_port;
    }
    if (port == 0) return;  // waits for task 0's agent to report its port
  }
  // A MIG task waits until its instance exists (the layout may still be applying).
  if (const Json mig = a.value("mig", Json(nullptr)); mig.is_object()) {
    const int gi = mig.value("gpu", -1), start = mig.value("start", -1);
    bool exists = false;
    if (gi >= 0 && size_t(gi) < inventory.gpus.size())
      for (const MigInstanceInfo& m : inventory.gpus[size_t(gi)].instances) exists = exists || m.start == start;
    if (!exists) return;
  }
  if (a.value("container", Json(nullptr)).is_object()) return start_container(t, port);
  TaskLaunch launch;
  launch.log_path = log_path(opt.state_dir, t.job, t.attempt, t.task);
  // Its user (by submitting user, then queue, then the default) and the directories it owns.
  t.user = task_users.pick(str_field(a, "user"), str_field(a, "queue"));
  if (Status st = prepare_dirs(t, false); !st.ok()) return fail_start(t, launch.log_path, st.message());
  launch.user = t.user;
  for (const Json& c : a.value("command", Json::array())) launch.argv.push_back(c.get<std::string>());
  launch.env = task_env(t, port);
  launch.working_dir = str_field(a, "working_dir");
  if (launch.working_dir.empty()) launch.working_dir = t.scratch;
  launch.memory_limit_mib = a.value("memory_mib", int64_t(0));
  launch.cpu_limit_milli = a.value("cpu_milli", int64_t(0));
  launch.pids_limit = opt.pids_limit;
  launch.cgroup_name = "tessera-" + agent_id + "/job-" + std::to_string(t.job) + "-a" + std::to_string(t.attempt) + "-t" +
                       std::to_string(t.task);
  const auto started = Clock::now();
  auto p = TaskProcess::start(launch);
  if (!p.ok()) return fail_start(t, launch.log_path, p.error().message);
  t.proc = std::make_unique<ProcessTask>(std::move(*p), launch.memory_limit_mib);
  const auto start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  t.state = "running";
  t.started_unix = unix_now();
  {
    std::ofstream pf(pid_path(opt.state_dir, t.job, t.attempt, t.task));
    pf << t.proc->pid() << "\n";
  }
  spdlog::info("event=task_started node={} job={} attempt={} task={} runtime=process pid={} rank={}/{} master={}:{} limits={} "
               "user={} start_ms={}", opt.node, t.job, t.attempt, t.task, t.proc->pid(), t.task, world, launch.env["MASTER_ADDR"],
               port, t.proc->limits_enforced() ? "cgroup" : "none", t.user ? t.user->name : "agent", start_ms);
  next_beat = Clock::now();  // report the start (and task 0's port) now
  last_start = next_beat;
}

namespace {

// "UID" or "UID:GID" (the job's container.user; the controller checked it) as a TaskUser.
std::optional<TaskUser> numeric_user(const std::string& text) {
  const auto colon = text.find(':');
  const std::string u = text.substr(0, colon), g = colon == std::string::npos ? u : text.substr(colon + 1);
  if (u.empty() || g.empty() || u.size() > 9 || g.size() > 9 || u.find_first_not_of("0123456789") != std::string::npos ||
      g.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  TaskUser t;
  t.uid = uid_t(std::stoul(u)), t.gid = gid_t(std::stoul(g));
  t.name = std::to_string(t.uid) + ":" + std::to_string(t.gid);
  t.groups = {t.gid};
  if (t.uid == 0 || t.gid == 0) return std::nullopt;
  return t;
}

constexpr const char* kScratchInside = "/tessera/scratch";
constexpr const char* kCheckpointInside = "/tessera/checkpoint";

}  // namespace

void Agent::Impl::start_container(LocalTask& t, int port) {
  const Json& a = t.assignment;
  const Json c = a.value("container", Json::object());
  const std::string log = log_path(opt.state_dir, t.job, t.attempt, t.task);
  if (!podman) return fail_start(t, log, "this node runs no container runtime: " + runtime_missing);
  // Who: the job's container.user, else the task user the agent's map picks, else the agent itself
  // when it is not root (rootless podman), else nobody. Never uid or gid 0.
  const std::string asked = str_field(c, "user");
  if (!asked.empty()) {
    t.user = numeric_user(asked);
    if (!t.user) return fail_start(t, log, "container.user \"" + asked + "\" is not UID[:GID] of a user other than root");
  } else {
    t.user = task_users.pick(str_field(a, "user"), str_field(a, "queue"));
    if (!t.user) t.user = numeric_user(::geteuid() == 0 ? "65534:65534" : std::to_string(::geteuid()) + ":" + std::to_string(::getegid()));
  }
  if (Status st = prepare_dirs(t, true); !st.ok()) return fail_start(t, log, st.message());
  ContainerLaunch l;
  l.name = "tessera-" + agent_id + "-j" + std::to_string(t.job) + "-a" + std::to_string(t.attempt) + "-t" + std::to_string(t.task);
  l.image = str_field(c, "image");
  l.network = str_field(c, "network") == "none" ? "none" : "host";
  l.user = std::to_string(t.user->uid) + ":" + std::to_string(t.user->gid);
  for (const Json& x : a.value("command", Json::array())) l.argv.push_back(x.get<std::string>());
  const std::string host_scratch = t.scratch;
  t.scratch = kScratchInside;  // the environment names paths inside the container
  l.env = task_env(t, port);
  t.scratch = host_scratch;
  l.working_dir = str_field(a, "working_dir");
  if (l.working_dir.empty()) l.working_dir = kScratchInside;
  l.mounts.push_back({t.scratch, kScratchInside, false});
  l.mounts.push_back({t.ckpt_dir, t.ckpt_env, false});
  for (const Json& m : a.value("mounts", Json::array()))
    l.mounts.push_back({str_field(m, "source"), str_field(m, "path"), m.value("read_only", true)});
  // GPUs the controller placed, as CDI devices.
  std::vector<int> gpu_indices;
  for (const Json& g : a.value("gpus", Json::array()))
    if (g.is_number_integer()) gpu_indices.push_back(g.get<int>());
  const Json mig = a.value("mig", Json(nullptr));
  auto devices = mig.is_object() ? cdi_devices(inventory, {}, mig.value("gpu", -1), mig.value("start", -1))
                                 : cdi_devices(inventory, gpu_indices);
  if (!devices.ok()) return fail_start(t, log, "CDI: " + devices.error().message);
  l.devices = *devices;
  l.labels = {{"tessera.agent", agent_id}, {"tessera.job", std::to_string(t.job)},
              {"tessera.attempt", std::to_string(t.attempt)}, {"tessera.task", std::to_string(t.task)}};
  l.memory_limit_mib = a.value("memory_mib", int64_t(0));
  l.cpu_limit_milli = a.value("cpu_milli", int64_t(0));
  l.pids_limit = opt.pids_limit;
  l.log_path = log;
  l.env_file = opt.state_dir + "/env/" + l.name + ".env";
  const auto started = Clock::now();
  auto p = podman->start(l);
  if (!p.ok()) return fail_start(t, log, p.error().message);
  t.proc = std::move(*p);
  t.state = "running";
  t.started_unix = unix_now();
  spdlog::info("event=task_started node={} job={} attempt={} task={} runtime=podman container={} image={} pid={} rank={}/{} "
               "master={}:{} user={} devices={} mounts={} start_ms={}",
               opt.node, t.job, t.attempt, t.task, l.name, l.image, t.proc->pid(), t.task, a.value("tasks", 1),
               l.env["MASTER_ADDR"], port, l.user, l.devices.size(), l.mounts.size(),
               std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
  next_beat = Clock::now();
  last_start = next_beat;
}

void Agent::Impl::fail_start(LocalTask& t, const std::string& log, const std::string& why) {
  append_line(log, "tessera-agent: could not start the task: " + why);
  spdlog::warn("event=task_start_failed node={} job={} attempt={} task={} reason=\"{}\"", opt.node, t.job, t.attempt, t.task, why);
  t.state = "failed";
  t.exit_code = 127;
  t.reason = "could not start: " + why;
  next_beat = Clock::now();
}

// The task's scratch directory (TASK_DIR/work/job-J-aA-tT with tmp/, owned by its user) and its
// checkpoint directory: the cluster's checkpoint store's (checkpoint.host_dir, the same on every
// node of the pool) or the default one under TASK_DIR/checkpoints, made and given to the user; for
// a bare process, a directory the job named is made as the user (it may only make what the user could).
Status Agent::Impl::prepare_dirs(LocalTask& t, bool container) {
  t.scratch = opt.task_dir + "/work/job-" + std::to_string(t.job) + "-a" + std::to_string(t.attempt) + "-t" + std::to_string(t.task);
  if (Status st = remove_tree(t.scratch); !st.ok()) return st;  // a leftover of an earlier start
  for (const auto& [dir, owner] : {std::pair{t.scratch, std::optional<TaskUser>()}, {t.scratch + "/tmp", t.user}, {t.scratch, t.user}})
    if (Status st = make_task_owned_dir(dir, owner); !st.ok()) return st;
  const Json ckpt = t.assignment.value("checkpoint", Json::object());
  const std::string dir = str_field(ckpt, "dir"), store = str_field(ckpt, "host_dir");
  if (container || dir.empty()) {
    t.ckpt_dir = !store.empty() ? store : opt.task_dir + "/checkpoints/job-" + std::to_string(t.job);
    if (Status st = make_task_owned_dir(t.ckpt_dir, t.user); !st.ok()) return st;
    t.ckpt_env = container ? (dir.empty() ? std::string(kCheckpointInside) : dir) : t.ckpt_dir;
  } else {
    t.ckpt_dir = t.ckpt_env = dir;
    ScopedFsUser as_task(t.user);
    std::error_code ec;
    fs::create_directories(t.ckpt_dir, ec);
    if (ec) spdlog::warn("event=checkpoint_dir_failed node={} job={} dir={} reason=\"{}\"", opt.node, t.job, dir, ec.message());
  }
  clear_checkpoint_request(t.ckpt_dir, t.user);  // a stale request must not stop the new attempt at once
  return {};
}

void Agent::Impl::request_checkpoint(LocalTask& t, const Json& s) {
  if (t.ckpt_requested_at >= 0 || !t.proc) return;
  auto sig = signal_number(s.value("signal", "SIGUSR1"));
  t.ckpt_requested_at = unix_now();
  t.ckpt_requested_clock = Clock::now();
  t.ckpt_stamp = checkpoint_ack_stamp(t.ckpt_dir, t.user);
  t.save_pending = false;  // the stop request replaces a save in flight
  t.ckpt_deadline = Clock::now() + std::chrono::seconds(std::max<int64_t>(0, s.value("grace", int64_t(300))));
  if (Status st = write_checkpoint_request(t.ckpt_dir, t.ckpt_requested_at, "preempted", "stop", t.user); !st.ok())
    spdlog::warn("event=checkpoint_request_file_failed job={} reason=\"{}\"", t.job, st.message());
  t.proc->signal(sig.ok() ? *sig : SIGUSR1);
  spdlog::info("event=checkpoint_requested node={} job={} attempt={} task={} signal={}", opt.node, t.job, t.attempt, t.task,
               s.value("signal", "SIGUSR1"));
}

void Agent::Impl::stop_task(LocalTask& t, const std::string& why) {
  if (t.stop_asked) return;
  t.stop_asked = true;
  if (!t.proc) {  // never started (waiting for its port)
    t.state = "stopped";
    return;
  }
  spdlog::info("event=task_stopping node={} job={} attempt={} task={} reason=\"{}\" grace_s={}", opt.node, t.job, t.attempt,
               t.task, why, opt.stop_grace_s);
  t.proc->terminate(opt.stop_grace_s);
}

// Periodic `save` requests (file only, no signal: a job that acts on the signal alone is not
// stopped by them). Returns true when a save was acknowledged.
bool Agent::Impl::drive_saves(LocalTask& t) {
  const auto now = Clock::now();
  const int64_t now_s = unix_now(), anchor = t.save_anchor > 0 ? t.save_anchor : t.started_unix;
  // The first anchor + k * every after now.
  auto next_after = [&](int64_t x) { return anchor + t.save_every_s * ((std::max<int64_t>(x, anchor) - anchor) / t.save_every_s + 1); };
  if (t.save_pending) {
    if (auto ack = read_checkpoint_ack_since(t.ckpt_dir, t.save_stamp, t.user)) {
      t.cost_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - t.save_requested).count();
      ++t.saves;
      t.ack = *ack;
      t.save_pending = false;
      t.next_save = -1;
      clear_checkpoint_request(t.ckpt_dir, t.user);
      spdlog::info("event=checkpoint_saved node={} job={} task={} path={} cost_ms={}", opt.node, t.job, t.task, t.ack,
                   t.cost_ms);
      return true;
    }
    if (now >= t.save_deadline) {
      t.save_pending = false;
      t.next_save = -1;
      clear_checkpoint_request(t.ckpt_dir, t.user);
      spdlog::warn("event=checkpoint_save_unanswered node={} job={} task={} (no .ack within its grace; the task goes on)",
                   opt.node, t.job, t.task);
    }
    return false;
  }
  if (t.save_every_s <= 0) {
    t.next_save = -1;
    return false;
  }
  if (t.next_save < 0) t.next_save = next_after(now_s);
  if (now_s < t.next_save) return false;
  t.save_stamp = checkpoint_ack_stamp(t.ckpt_dir, t.user);
  if (Status st = write_checkpoint_request(t.ckpt_dir, now_s, "periodic save on spot", "save", t.user); !st.ok()) {
    spdlog::warn("event=checkpoint_request_file_failed job={} reason=\"{}\"", t.job, st.message());
    t.next_save = next_after(now_s);
    return false;
  }
  t.save_pending = true;
  t.save_requested = now;
  const int64_t grace = t.assignment.value("checkpoint", Json::object()).value("grace", int64_t(300));
  t.save_deadline = now + std::chrono::seconds(std::max<int64_t>(1, grace));
  spdlog::info("event=checkpoint_save_requested node={} job={} attempt={} task={} every_s={}", opt.node, t.job, t.attempt,
               t.task, t.save_every_s);
  return false;
}

// Exits, checkpoint acknowledgements and deadlines. Returns true when something changed.
void Agent::Impl::mirror_output(LocalTask& t, bool final) {
  if (!t.proc || (t.out_tried && t.out_fd < 0)) return;  // no output file, or it could not be opened
  if (!t.out_tried) {
    t.out_tried = true;
    const std::string path = str_field(t.assignment, "output");
    if (path.empty()) return;
    {
      // As the task's user (a path it could not write stays unwritten), no link followed, and only a
      // regular file: a FIFO there must not stall the agent. Truncated at each attempt, as Slurm does.
      ScopedFsUser as_task(t.user);
      t.out_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    }
    const int err = errno;
    struct stat st {};
    const bool regular = t.out_fd >= 0 && ::fstat(t.out_fd, &st) == 0 && S_ISREG(st.st_mode);
    if (regular) t.out_src = ::open(log_path(opt.state_dir, t.job, t.attempt, t.task).c_str(), O_RDONLY | O_CLOEXEC);
    if (!regular || t.out_src < 0) {
      spdlog::warn("event=output_file_unwritable node={} job={} task={} path={} reason=\"{}\" (its log stays in the API)",
                   opt.node, t.job, t.task, path,
                   t.out_fd < 0 ? std::strerror(err) : !regular ? "not a regular file" : "its log cannot be read");
      t.close_output();
      return;
    }
  }
  char buf[65536];
  for (int rounds = 0; rounds < 64; ++rounds) {  // at most 4 MiB a call: the loop stays responsive
    const ssize_t n = ::pread(t.out_src, buf, sizeof buf, t.out_copied);
    if (n <= 0) break;
    if (::write(t.out_fd, buf, size_t(n)) != n) break;
    t.out_copied += n;
  }
  if (final) t.close_output();
}

bool Agent::Impl::poll_tasks() {
  bool changed = false;
  for (auto& [key, t] : tasks) {
    if (!t.proc || t.terminal()) continue;
    t.proc->tick();
    mirror_output(t, false);
    if (t.state == "running" && t.ckpt_requested_at < 0 && !t.stop_asked && drive_saves(t)) changed = true;
    // The .ack that answers the checkpoint request, if it is there now (true once taken).
    auto take_requested_ack = [&] {
      if (t.ckpt_requested_at < 0 || t.request_acked) return false;
      auto ack = read_checkpoint_ack_since(t.ckpt_dir, t.ckpt_stamp, t.user);
      if (!ack) return false;
      t.ack = *ack;
      t.request_acked = true;
      t.cost_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.ckpt_requested_clock).count();
      ++t.saves;
      changed = true;
      spdlog::info("event=checkpoint_acknowledged node={} job={} task={} path={}", opt.node, t.job, t.task, t.ack);
      clear_checkpoint_request(t.ckpt_dir, t.user);
      return true;
    };
    if (take_requested_ack()) stop_task(t, "checkpoint acknowledged");
    else if (t.ckpt_requested_at >= 0 && !t.request_acked && Clock::now() >= t.ckpt_deadline)
      stop_task(t, "checkpoint grace ran out");
    if (auto code = t.proc->poll()) {
      // A task that writes its .ack and exits at once may do both after the look above: look again
      // before its end is recorded, or the checkpoint it saved would never be reported.
      take_requested_ack();
      t.exit_code = *code;
      if (t.ckpt_requested_at >= 0 && (*code == 0 || t.request_acked))
        t.state = "checkpointed";
      else if (t.stop_asked)
        t.state = "stopped";
      else
        t.state = *code == 0 ? "succeeded" : "failed";
      if (t.ckpt_requested_at >= 0) clear_checkpoint_request(t.ckpt_dir, t.user);
      if (t.state == "failed") t.reason = t.proc->exit_reason();
      mirror_output(t, true);
      std::error_code ec;
      fs::remove(pid_path(opt.state_dir, t.job, t.attempt, t.task), ec);
      spdlog::info("event=task_exited node={} job={} attempt={} task={} exit_code={} state={} reason=\"{}\"", opt.node, t.job,
                   t.attempt, t.task, *code, t.state, t.reason);
      changed = true;
    }
  }
  return changed;
}

int kill_leftovers(const std::string& node, const std::string& state_dir, const std::string& agent_id,
                   const PodmanRuntime* podman) {
  int killed = 0;
  std::error_code ec;
  const fs::path run = state_dir + "/run";
  fs::create_directories(run, ec);
  for (const auto& e : fs::directory_iterator(run, ec)) {
    std::ifstream in(e.path());
    pid_t pid = 0;
    in >> pid;
    const std::string name = e.path().stem().string();  // JOB-ATTEMPT-TASK
    const std::string job = name.substr(0, name.find('-'));
    // Only a process that is still that task (pids get reused).
    std::ifstream envf("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string environ_text((std::istreambuf_iterator<char>(envf)), std::istreambuf_iterator<char>());
    if (pid > 1 && environ_text.find(std::string("TESSERA_JOB_ID=") + job + '\0') != std::string::npos) {
      spdlog::warn("event=leftover_task_killed node={} pid={} task={} (left by a previous agent)", node, pid, name);
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ++killed;
    }
    fs::remove(e.path(), ec);
  }
  // Whatever they started, daemons included: every process in their cgroups.
  if (const int n = kill_cgroup_leftovers("tessera-" + agent_id); n > 0) {
    spdlog::warn("event=leftover_processes_killed node={} count={} (in the task cgroups of a previous agent)", node, n);
    killed += n;
  }
  if (podman)
    if (const int n = podman->remove_labelled("tessera.agent", agent_id); n > 0) {
      spdlog::warn("event=leftover_containers_removed node={} count={} label=tessera.agent={}", node, n, agent_id);
      killed += n;
    }
  fs::remove_all(state_dir + "/env", ec);  // env files of containers (secrets)
  return killed;
}

void Agent::Impl::reap_leftovers() {
  kill_leftovers(opt.node, opt.state_dir, agent_id, podman ? &*podman : nullptr);
  // Their scratch directories (no task runs yet).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(opt.task_dir + "/work", ec))
    if (Status st = remove_tree(e.path().string()); !st.ok())
      spdlog::warn("event=scratch_remove_failed node={} dir={} reason=\"{}\"", opt.node, e.path().string(), st.message());
}

bool Agent::Impl::fence_if_lease_expired() {
  if (lease_ms <= 0) return false;
  // Fence a little before the controller's hold ends (it counts from when it got the last beat).
  const int64_t margin = std::min<int64_t>(lease_ms / 4, 5000);
  if (Clock::now() - last_ok_beat < std::chrono::milliseconds(lease_ms - margin)) return false;
  bool any = false;
  for (auto& [key, t] : tasks) {
    if (!t.proc || t.terminal()) continue;
    if (!any)
      spdlog::error("event=tasks_fenced node={} lease_ms={} (no heartbeat answered within the task lease: the controller "
                    "restarts these jobs elsewhere, so they are killed here; docs/containers.md)", opt.node, lease_ms);
    any = true;
    t.stop_asked = true;
    t.proc->kill_now();
  }
  return any;
}

void Agent::Impl::write_cdi_spec() {
  if (!podman || inventory.source == "nvml") return;  // NVML nodes use the host's spec (nvidia-ctk)
  if (Status st = write_fake_cdi_spec(opt.cdi_dir, opt.node, inventory); !st.ok())
    spdlog::warn("event=cdi_spec_failed node={} reason=\"{}\" (containers cannot get GPUs)", opt.node, st.message());
}

Status Agent::Impl::start_watchdog() {
  int fds[2];
  if (::pipe(fds) != 0) return internal_error(std::string("watchdog pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) return internal_error(std::string("watchdog fork: ") + std::strerror(errno));
  if (pid == 0) {
    // The watchdog: holds nothing of the agent's but the read end; EOF means the agent is gone.
    ::close(fds[1]);
    ::setsid();  // signals to the agent's process group (Ctrl-C) do not end it early
    ::prctl(PR_SET_NAME, "tessera-watchdog");
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != fds[0]) ::close(fd);
    char c;
    for (;;) {
      const ssize_t r = ::read(fds[0], &c, 1);
      if (r == 0 || (r < 0 && errno != EINTR)) break;
    }
    const int n = kill_leftovers(opt.node, opt.state_dir, agent_id, podman ? &*podman : nullptr);
    spdlog::warn("event=watchdog_cleanup node={} killed={} (the agent ended; its tasks end with it)", opt.node, n);
    ::_exit(0);
  }
  ::close(fds[0]);
  ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  watchdog_fd = fds[1];
  return {};
}

void Agent::Impl::stop_all_tasks() {
  for (auto& [key, t] : tasks)
    if (!t.terminal()) stop_task(t, "the agent is stopping");
  const auto until = Clock::now() + std::chrono::seconds(opt.stop_grace_s + 2);
  for (;;) {
    poll_tasks();  // drives TERM->KILL and records the exits (as stopped, since asked)
    bool left = false;
    for (const auto& [key, t] : tasks) left = left || (t.proc && !t.terminal());
    if (!left || Clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace tessera::agent
