#include "agent/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "agent/log_server.h"
#include "agent/task_env.h"
#include "agent/task_process.h"
#include "agent/task_user.h"

extern char** environ;

namespace tessera::agent {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

int64_t unix_now() { return int64_t(std::time(nullptr)); }

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

// A port nobody listens on right now (the kernel picks it); the task binds it moments later.
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

// A string field of the controller's assignment ("" when absent or not a string).
std::string str_field(const nlohmann::json& a, const char* key) {
  const auto it = a.find(key);
  return it != a.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> parse_topology_flag(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string part;
  auto ok_chars = [](const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
    return true;
  };
  while (std::getline(ss, part, ',')) {
    const auto eq = part.find('=');
    if (eq == std::string::npos || !ok_chars(part.substr(0, eq)) || !ok_chars(part.substr(eq + 1)))
      return invalid_argument("--topology: \"" + part + "\" is not LEVEL=NAME (letters, digits, . _ -), e.g. zone=a,spine=s1,leaf=l3");
    out.emplace_back(part.substr(0, eq), part.substr(eq + 1));
  }
  return out;
}

// One task of a job on this node, for one attempt.
struct LocalTask {
  int64_t job = 0, attempt = 0;
  int task = 0;
  Json assignment;
  std::optional<TaskProcess> proc;
  std::string state = "starting";  // starting (waiting for its rendezvous port), running, succeeded, failed, checkpointed, stopped
  int exit_code = 0;
  int master_port = 0;       // task 0 of a gang: the port this agent picked
  std::string ckpt_dir;
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
  bool terminal() const { return state != "starting" && state != "running"; }
};

using TaskKey = std::tuple<int64_t, int64_t, int>;  // job, attempt, task

struct Agent::Impl {
  AgentOptions opt;
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

  // ---- controller calls ---------------------------------------------------------------------------

  httplib::Result post(const std::string& path, const Json& body) {
    httplib::Client cli(opt.server);
    cli.set_connection_timeout(3, 0);
    cli.set_read_timeout(15, 0);
    cli.set_bearer_token_auth(opt.token);
    cli.set_tcp_nodelay(true);  // headers and body go out at once: no Nagle + delayed-ACK wait (40 ms)
    return cli.Post(path, body.dump(), "application/json");
  }

  void log_error(const std::string& what) {
    // At most one line every 10 s while the controller is away.
    const auto now = Clock::now();
    if (now - last_error_log < std::chrono::seconds(10)) return;
    last_error_log = now;
    spdlog::warn("event=controller_unreachable node={} error=\"{}\" (tasks keep running; retrying)", opt.node, what);
  }

  static std::string error_message(const httplib::Response& r) {
    Json e = Json::parse(r.body, nullptr, false);
    if (e.is_object() && e.contains("error") && e["error"].is_object()) return e["error"].value("message", r.body);
    return r.body;
  }

  bool do_register() {
    auto inv = gpus->inventory();
    if (!inv.ok()) {
      log_error("GPU inventory: " + inv.error().message);
      return false;
    }
    inventory = *inv;
    Json topo = Json::object();
    if (auto t = parse_topology_flag(opt.topology); t.ok())
      for (const auto& [k, v] : *t) topo[k] = v;
    Json reg{{"node", opt.node},         {"address", opt.address},   {"log_port", log_port},
             {"log_secret", log_secret}, {"version", opt.version},   {"topology", topo},
             {"inventory", inventory_to_json(inventory)}};
    auto r = post("/api/v1/agent/register", reg);
    if (!r) {
      log_error(httplib::to_string(r.error()));
      return false;
    }
    if (r->status != 200) {
      const auto now = Clock::now();
      if (now - last_error_log >= std::chrono::seconds(10)) {
        last_error_log = now;
        spdlog::error("event=register_refused node={} status={} reason=\"{}\"", opt.node, r->status, error_message(*r));
      }
      return false;
    }
    Json ans = Json::parse(r->body, nullptr, false);
    if (ans.is_object() && ans.contains("warning")) spdlog::warn("event=register_warning node={} warning=\"{}\"", opt.node, ans.value("warning", ""));
    if (opt.heartbeat_interval_ms > 0)
      interval_ms = opt.heartbeat_interval_ms;
    else if (ans.is_object())
      interval_ms = ans.value("heartbeat_interval_ms", int64_t(5000));
    spdlog::info("event=registered node={} server={} gpus={} source={} heartbeat_ms={}", opt.node, opt.server,
                 inventory.gpus.size(), inventory.source, interval_ms);
    registered = true;
    return true;
  }

  Json heartbeat_body() {
    // Checkpoints the job took on its own (periodic): the newest .ack since the task started.
    for (auto& [key, t] : tasks)
      if (t.state == "running" && !t.ckpt_dir.empty())
        if (auto ack = read_checkpoint_ack(t.ckpt_dir, t.started_unix, t.user); ack && *ack != t.ack) t.ack = *ack;
    Json ts = Json::array();
    for (const auto& [key, t] : tasks) {
      Json e{{"job", t.job}, {"attempt", t.attempt}, {"task", t.task}, {"state", t.state}, {"exit_code", t.exit_code}};
      if (!t.ack.empty()) e["checkpoint"] = t.ack;
      if (t.request_acked) e["checkpoint_requested"] = true;  // the ack answers this attempt's request
      if (t.master_port > 0) e["master_port"] = t.master_port;
      if (t.saves > 0) e["checkpoint_saves"] = t.saves, e["checkpoint_cost_ms"] = t.cost_ms;
      ts.push_back(std::move(e));
    }
    // What runs where, for fake utilisation and busy MIG instances.
    std::vector<int64_t> load(inventory.gpus.size(), 0);
    for (const auto& [key, t] : tasks) {
      if (t.state != "running") continue;
      const Json& a = t.assignment;
      for (const Json& g : a.value("gpus", Json::array()))
        if (g.is_number_integer() && g.get<size_t>() < load.size()) load[g.get<size_t>()] += a.value("gpu_milli", int64_t(1000));
    }
    gpus->set_fake_load(load);
    Json stats = Json::array(), mig = Json::array();
    if (auto inv = gpus->inventory(); inv.ok()) {
      inventory = *inv;
      for (const GpuInfo& g : inventory.gpus) {
        stats.push_back(Json{{"index", g.index}, {"utilization_pct", g.utilization_pct}, {"memory_used_mib", g.memory_used_mib}});
        if (!g.mig_enabled) continue;
        Json inst = Json::array();
        for (const MigInstanceInfo& m : g.instances) inst.push_back(Json{{"profile", m.profile}, {"start", m.start}, {"uuid", m.uuid}});
        mig.push_back(Json{{"gpu", g.index}, {"instances", inst}});
      }
    }
    Json body{{"node", opt.node}, {"tasks", ts}, {"gpus", stats}, {"mig", mig}};
    if (Json n = interruption_notice(); !n.is_null()) body["interruption_notice"] = n;
    return body;
  }

  // The spot interruption notice file, when it exists: {noticed_at (its mtime), reclaim_at (its
  // first line, when that is unix seconds)}. Level-triggered: reported at every beat while it exists.
  Json interruption_notice() {
    if (opt.interruption_notice_file.empty()) return nullptr;
    struct stat st{};
    if (::stat(opt.interruption_notice_file.c_str(), &st) != 0) return nullptr;
    std::ifstream in(opt.interruption_notice_file);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.erase(0, 1);
    Json n{{"noticed_at", int64_t(st.st_mtime)}};
    bool digits = !line.empty() && line.size() < 19;
    for (char c : line) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) n["reclaim_at"] = std::stoll(line);
    const std::string seen = std::to_string(st.st_mtime) + "/" + line;
    if (seen != notice_seen) {
      notice_seen = seen;
      if (digits || line.empty())
        spdlog::warn("event=interruption_notice node={} file={} reclaim_at={}", opt.node, opt.interruption_notice_file,
                     digits ? line : "pool notice");
      else
        spdlog::warn("event=interruption_notice node={} file={} reclaim_at=\"pool notice\" (first line \"{}\" is not unix "
                     "seconds)", opt.node, opt.interruption_notice_file, line.substr(0, 80));
    }
    return n;
  }

  void heartbeat() {
    auto r = post("/api/v1/agent/heartbeat", heartbeat_body());
    if (!r) return log_error(httplib::to_string(r.error()));
    if (r->status == 409 && r->body.find("not_registered") != std::string::npos) {
      spdlog::info("event=reregister node={} reason=\"the controller does not know this agent (it restarted)\"", opt.node);
      registered = false;
      return;
    }
    if (r->status != 200) return log_error("heartbeat: HTTP " + std::to_string(r->status) + ": " + error_message(*r));
    Json ans = Json::parse(r->body, nullptr, false);
    if (!ans.is_object()) return log_error("heartbeat: the answer is not JSON");
    if (opt.heartbeat_interval_ms <= 0) interval_ms = ans.value("heartbeat_interval_ms", interval_ms);
    converge(ans);
  }

  // ---- convergence ------------------------------------------------------------------------------

  void converge(const Json& ans) {
    // MIG layouts first: a new task's instance must exist (with its UUID) before the task starts.
    apply_mig(ans.value("mig", Json::array()));
    std::set<TaskKey> wanted;
    for (const Json& a : ans.value("run", Json::array())) {
      const TaskKey key{a.value("job", int64_t(0)), a.value("attempt", int64_t(0)), a.value("task", 0)};
      wanted.insert(key);
      auto it = tasks.find(key);
      if (it == tasks.end()) {
        LocalTask t;
        t.job = std::get<0>(key), t.attempt = std::get<1>(key), t.task = std::get<2>(key);
        t.assignment = a;
        it = tasks.emplace(key, std::move(t)).first;
      } else {
        // The rendezvous port may have arrived since.
        if (it->second.state == "starting") it->second.assignment = a;
      }
      it->second.save_every_s = std::max<int64_t>(0, a.value("checkpoint_every_s", int64_t(0)));
      it->second.save_anchor = a.value("checkpoint_anchor", int64_t(0));
      if (it->second.state == "starting") try_start(it->second);
    }
    // Stops the controller asks for (checkpoint first, or now).
    std::map<TaskKey, Json> stops;
    for (const Json& s : ans.value("stop", Json::array()))
      stops[{s.value("job", int64_t(0)), s.value("attempt", int64_t(0)), s.value("task", 0)}] = s;
    for (auto& [key, t] : tasks) {
      auto s = stops.find(key);
      const bool is_wanted = wanted.count(key) > 0;
      if (t.terminal()) continue;
      if (s != stops.end() && is_wanted && s->second.value("checkpoint", false)) {
        request_checkpoint(t, s->second);
      } else if (!is_wanted || s != stops.end()) {
        stop_task(t, "no longer wanted on this node");
      }
    }
    // Forget tasks that ended and are no longer wanted (the controller has their final state).
    for (auto it = tasks.begin(); it != tasks.end();) {
      if (it->second.terminal() && !wanted.count(it->first)) {
        std::error_code ec;
        fs::remove(pid_path(opt.state_dir, it->second.job, it->second.attempt, it->second.task), ec);
        if (!it->second.scratch.empty())
          if (Status st = remove_tree(it->second.scratch); !st.ok())
            spdlog::warn("event=scratch_remove_failed node={} dir={} reason=\"{}\"", opt.node, it->second.scratch, st.message());
        it = tasks.erase(it);
      } else {
        ++it;
      }
    }
  }

  void apply_mig(const Json& desired) {
    for (const Json& d : desired) {
      const int gi = d.value("gpu", -1);
      if (gi < 0 || size_t(gi) >= inventory.gpus.size()) continue;
      const GpuInfo& g = inventory.gpus[size_t(gi)];
      std::set<std::pair<std::string, int>> want, have;
      MigLayout layout{gi, {}};
      for (const Json& i : d.value("instances", Json::array())) {
        want.insert({i.value("profile", ""), i.value("start", 0)});
        layout.instances.emplace_back(i.value("profile", ""), i.value("start", 0));
      }
      for (const MigInstanceInfo& m : g.instances) have.insert({m.profile, m.start});
      if (want == have) continue;
      std::vector<std::string> busy;
      for (const auto& [key, t] : tasks) {
        if (t.terminal() || t.state == "starting") continue;
        const Json& mig = t.assignment.value("mig", Json(nullptr));
        if (!mig.is_object() || mig.value("gpu", -1) != gi) continue;
        for (const MigInstanceInfo& m : g.instances)
          if (m.start == mig.value("start", -1)) busy.push_back(m.uuid);
      }
      Status st = gpus->apply_mig_layout(layout, busy);
      if (st.ok()) {
        spdlog::info("event=mig_applied node={} gpu={} instances={}", opt.node, gi, layout.instances.size());
        if (auto inv = gpus->inventory(); inv.ok()) inventory = *inv;
        next_beat = Clock::now();  // report the new layout
      } else
        spdlog::warn("event=mig_refused node={} gpu={} reason=\"{}\"", opt.node, gi, st.message());
    }
  }

  // Environment of a task (task_env.h).
  std::map<std::string, std::string> task_env(const LocalTask& t, int master_port) {
    return task_environment(TaskEnvInput{&t.assignment, t.job, t.attempt, t.task, master_port, opt.node, opt.address,
                                         &inventory, t.ckpt_dir, t.scratch, t.user});
  }

  void try_start(LocalTask& t) {
    const Json& a = t.assignment;
    const int world = a.value("tasks", 1);
    int port = a.value("master_port", 0);
    if (world > 1 && port == 0) {
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
    TaskLaunch launch;
    launch.log_path = log_path(opt.state_dir, t.job, t.attempt, t.task);
    // Its user (by submitting user, then queue, then the default) and the directories it owns.
    t.user = task_users.pick(str_field(a, "user"), str_field(a, "queue"));
    if (Status st = prepare_dirs(t); !st.ok()) return fail_start(t, launch.log_path, st.message());
    launch.user = t.user;
    for (const Json& c : a.value("command", Json::array())) launch.argv.push_back(c.get<std::string>());
    launch.env = task_env(t, port);
    launch.working_dir = str_field(a, "working_dir");
    if (launch.working_dir.empty()) launch.working_dir = t.scratch;
    launch.memory_limit_mib = a.value("memory_mib", int64_t(0));
    launch.cpu_limit_milli = a.value("cpu_milli", int64_t(0));
    launch.cgroup_name = "job-" + std::to_string(t.job) + "-a" + std::to_string(t.attempt) + "-t" + std::to_string(t.task);
    auto p = TaskProcess::start(launch);
    if (!p.ok()) return fail_start(t, launch.log_path, p.error().message);
    t.proc.emplace(std::move(*p));
    t.state = "running";
    t.started_unix = unix_now();
    {
      std::ofstream pf(pid_path(opt.state_dir, t.job, t.attempt, t.task));
      pf << t.proc->pid() << "\n";
    }
    spdlog::info("event=task_started node={} job={} attempt={} task={} pid={} rank={}/{} master={}:{} limits={} user={}", opt.node,
                 t.job, t.attempt, t.task, t.proc->pid(), t.task, world, launch.env["MASTER_ADDR"], port,
                 t.proc->limits_enforced() ? "cgroup" : "none", t.user ? t.user->name : "agent");
    next_beat = Clock::now();  // report the start (and task 0's port) now
  }

  void fail_start(LocalTask& t, const std::string& log, const std::string& why) {
    append_line(log, "tessera-agent: could not start the task: " + why);
    spdlog::warn("event=task_start_failed node={} job={} attempt={} task={} reason=\"{}\"", opt.node, t.job, t.attempt, t.task, why);
    t.state = "failed";
    t.exit_code = 127;
    next_beat = Clock::now();
  }

  // The task's scratch directory (TASK_DIR/work/job-J-aA-tT with tmp/, owned by its user) and its
  // checkpoint directory: the default one under TASK_DIR/checkpoints is made and given to the user;
  // one the job named is made as the user (it may only make what the user could).
  Status prepare_dirs(LocalTask& t) {
    t.scratch = opt.task_dir + "/work/job-" + std::to_string(t.job) + "-a" + std::to_string(t.attempt) + "-t" + std::to_string(t.task);
    if (Status st = remove_tree(t.scratch); !st.ok()) return st;  // a leftover of an earlier start
    for (const auto& [dir, owner] : {std::pair{t.scratch, std::optional<TaskUser>()}, {t.scratch + "/tmp", t.user}, {t.scratch, t.user}})
      if (Status st = make_task_owned_dir(dir, owner); !st.ok()) return st;
    const std::string dir = str_field(t.assignment.value("checkpoint", Json::object()), "dir");
    if (dir.empty()) {
      t.ckpt_dir = opt.task_dir + "/checkpoints/job-" + std::to_string(t.job);
      if (Status st = make_task_owned_dir(t.ckpt_dir, t.user); !st.ok()) return st;
    } else {
      t.ckpt_dir = dir;
      ScopedFsUser as_task(t.user);
      std::error_code ec;
      fs::create_directories(t.ckpt_dir, ec);
      if (ec) spdlog::warn("event=checkpoint_dir_failed node={} job={} dir={} reason=\"{}\"", opt.node, t.job, dir, ec.message());
    }
    clear_checkpoint_request(t.ckpt_dir, t.user);  // a stale request must not stop the new attempt at once
    return {};
  }

  void request_checkpoint(LocalTask& t, const Json& s) {
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

  void stop_task(LocalTask& t, const std::string& why) {
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
  bool drive_saves(LocalTask& t) {
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
  bool poll_tasks() {
    bool changed = false;
    for (auto& [key, t] : tasks) {
      if (!t.proc || t.terminal()) continue;
      t.proc->tick();
      if (t.state == "running" && t.ckpt_requested_at < 0 && !t.stop_asked && drive_saves(t)) changed = true;
      if (t.ckpt_requested_at >= 0 && !t.request_acked) {
        if (auto ack = read_checkpoint_ack_since(t.ckpt_dir, t.ckpt_stamp, t.user)) {
          t.ack = *ack;
          t.request_acked = true;
          t.cost_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.ckpt_requested_clock).count();
          ++t.saves;
          changed = true;
          spdlog::info("event=checkpoint_acknowledged node={} job={} task={} path={}", opt.node, t.job, t.task, t.ack);
          clear_checkpoint_request(t.ckpt_dir, t.user);
          stop_task(t, "checkpoint acknowledged");
        } else if (Clock::now() >= t.ckpt_deadline) {
          stop_task(t, "checkpoint grace ran out");
        }
      }
      if (auto code = t.proc->poll()) {
        t.exit_code = *code;
        if (t.ckpt_requested_at >= 0 && (*code == 0 || t.request_acked))
          t.state = "checkpointed";
        else if (t.stop_asked)
          t.state = "stopped";
        else
          t.state = *code == 0 ? "succeeded" : "failed";
        if (t.ckpt_requested_at >= 0) clear_checkpoint_request(t.ckpt_dir, t.user);
        std::error_code ec;
        fs::remove(pid_path(opt.state_dir, t.job, t.attempt, t.task), ec);
        spdlog::info("event=task_exited node={} job={} attempt={} task={} exit_code={} state={}", opt.node, t.job, t.attempt,
                     t.task, *code, t.state);
        changed = true;
      }
    }
    return changed;
  }

  // Task processes a previous agent left (it was killed): stop them, their jobs were requeued.
  void reap_leftovers() {
    std::error_code ec;
    const fs::path run = opt.state_dir + "/run";
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
        spdlog::warn("event=leftover_task_killed node={} pid={} task={} (left by a previous agent)", opt.node, pid, name);
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);
      }
      fs::remove(e.path(), ec);
    }
    // Their scratch directories (no task runs yet).
    for (const auto& e : fs::directory_iterator(opt.task_dir + "/work", ec))
      if (Status st = remove_tree(e.path().string()); !st.ok())
        spdlog::warn("event=scratch_remove_failed node={} dir={} reason=\"{}\"", opt.node, e.path().string(), st.message());
  }

  void stop_all_tasks() {
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

  // ---- the log server -----------------------------------------------------------------------------

  Status start_log_server() {
    const auto colon = opt.log_listen.rfind(':');
    if (colon == std::string::npos) return invalid_argument("--listen: must be HOST:PORT, got \"" + opt.log_listen + "\"");
    const std::string host = opt.log_listen.substr(0, colon);
    int port = 0;
    try {
      port = std::stoi(opt.log_listen.substr(colon + 1));
    } catch (...) {
      return invalid_argument("--listen: port must be a number, got \"" + opt.log_listen.substr(colon + 1) + "\"");
    }
    const std::string dir = opt.state_dir, secret = log_secret;
    log_server.Get("/logs", [dir, secret](const httplib::Request& req, httplib::Response& res) {
      // Constant-time secret check first, then each parameter (a 400 names it): log_server.h.
      const LogReply r = serve_log(dir, secret, req.get_header_value("X-Tessera-Log-Secret"), req.params);
      res.status = r.status;
      if (r.status != 200) return res.set_content(r.body, "application/json");
      res.set_header("X-Tessera-Next-Offset", std::to_string(r.next_offset));
      res.set_content(r.body, "text/plain");
    });
    if (port == 0) {
      log_port = log_server.bind_to_any_port(host);
      if (log_port <= 0) return invalid_argument("--listen: cannot listen on " + host);
    } else {
      if (!log_server.bind_to_port(host, port)) return invalid_argument("--listen: cannot listen on " + opt.log_listen + " (in use?)");
      log_port = port;
    }
    log_thread = std::thread([this] { log_server.listen_after_bind(); });
    return {};
  }
};

Result<std::unique_ptr<Agent>> Agent::create(AgentOptions options, std::unique_ptr<GpuBackend> gpus) {
  if (options.node.empty()) return invalid_argument("--node: required (this node's name in the cluster config)");
  if (options.state_dir.empty()) return invalid_argument("--state-dir: required");
  if (options.address.empty()) return invalid_argument("--address: required (where other nodes reach this one)");
  if (auto t = parse_topology_flag(options.topology); !t.ok()) return t.error();
  if (!gpus) return invalid_argument("gpus: no GPU backend");
  auto users = make_task_user_map(options.task_user, options.task_user_map);
  if (!users.ok()) return users.error();
  auto absolute = [](const std::string& p) {
    std::string out = fs::absolute(p).lexically_normal().string();
    if (out.size() > 1 && out.back() == '/') out.pop_back();
    return out;
  };
  // The state directory (logs, pid files) is the agent's alone; tasks get TASK_DIR, reachable by them.
  options.state_dir = absolute(options.state_dir);
  if (Status st = make_private_dir(options.state_dir, 0700); !st.ok()) return invalid_argument("--state-dir: " + st.message());
  options.task_dir = absolute(options.task_dir.empty() ? options.state_dir + "-tasks" : options.task_dir);
  auto within = [](const std::string& a, const std::string& b) { return a == b || a.rfind(b + "/", 0) == 0 || b == "/"; };
  if (within(options.task_dir, options.state_dir) || within(options.state_dir, options.task_dir))
    return invalid_argument("--task-dir " + options.task_dir + " and --state-dir " + options.state_dir +
                            " must not contain one another (tasks reach the task directory, never the state directory)");
  for (const std::string& d : {options.task_dir, options.task_dir + "/work", options.task_dir + "/checkpoints"})
    if (Status st = make_private_dir(d, 0711); !st.ok()) return invalid_argument("--task-dir: " + st.message());
  for (const TaskUser& u : users->all()) {
    ScopedFsUser as_task(u);
    if (::faccessat(AT_FDCWD, (options.task_dir + "/work").c_str(), X_OK, AT_EACCESS) != 0)
      return failed_precondition("--task-dir " + options.task_dir + ": task user " + u.name + " (uid " + std::to_string(u.uid) +
                                 ") cannot reach it: a directory above it is not searchable by that user (chmod o+x it, "
                                 "or give --task-dir elsewhere)");
  }
  if (!can_switch_users())
    spdlog::warn("event=tasks_run_as_agent uid={} (the agent is not root, so tasks run as its own user and can read its state "
                 "directory, token file and process; run it as root for per-task users: docs/agent.md)", ::geteuid());
  else
    spdlog::info("event=task_users default={} uid={} users={} queues={}", users->fallback->name, users->fallback->uid,
                 users->users.size(), users->queues.size());
  std::unique_ptr<Agent> a(new Agent());
  a->impl_ = std::make_unique<Impl>();
  a->impl_->opt = std::move(options);
  a->impl_->gpus = std::move(gpus);
  a->impl_->task_users = std::move(*users);
  auto inv = a->impl_->gpus->inventory();
  if (!inv.ok()) return inv.error();
  a->impl_->inventory = *inv;
  a->impl_->reap_leftovers();
  if (Status st = a->impl_->start_log_server(); !st.ok()) return st.error();
  return a;
}

Agent::~Agent() {
  if (!impl_) return;
  impl_->log_server.stop();
  if (impl_->log_thread.joinable()) impl_->log_thread.join();
}

int Agent::log_port() const { return impl_->log_port; }

void Agent::run() {
  Impl& m = *impl_;
  auto next_register = Clock::now();
  while (!stop_.load()) {
    const auto now = Clock::now();
    if (!m.registered) {
      if (now >= next_register) {
        if (m.do_register()) {
          m.next_beat = now;
        } else {
          next_register = now + std::chrono::seconds(1);
        }
      }
    }
    if (m.poll_tasks()) m.next_beat = now;
    if (m.registered && now >= m.next_beat) {
      m.next_beat = now + std::chrono::milliseconds(m.interval_ms);
      m.heartbeat();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (m.opt.stop_tasks_on_exit) {
    m.stop_all_tasks();
    if (m.registered) m.heartbeat();  // report the stops
  }
}

}  // namespace tessera::agent
