#include "agent/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

#include "agent/agent_internal.h"
#include "agent/log_server.h"
#include "agent/task_env.h"

namespace tessera::agent {

namespace fs = std::filesystem;

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

// To the controller that answered last; with several (--server a,b,c), a failed connection moves to
// the next and a standby's redirect to the leader, each tried once per call (what agents send is
// idempotent: a registration, or a level-triggered heartbeat).
httplib::Result Agent::Impl::post(const std::string& path, const Json& body) {
  const std::string text = body.dump();
  std::vector<std::string> tried;
  for (;;) {
    const std::string url = servers.current();
    tried.push_back(url);
    httplib::Client cli(url);
    cli.set_connection_timeout(3, 0);
    // An answer that takes longer than a quarter of the task lease is as good as none: the loop must
    // come back in time to fence its tasks (fence_if_lease_expired).
    const int64_t read_ms = lease_ms > 0 ? std::clamp<int64_t>(lease_ms / 4, 500, 15000) : 15000;
    cli.set_read_timeout(std::chrono::milliseconds(read_ms));
    cli.set_bearer_token_auth(opt.token);
    cli.set_tcp_nodelay(true);  // headers and body go out at once: no Nagle + delayed-ACK wait (40 ms)
    auto r = cli.Post(path, text, "application/json");
    const bool untried_left = tried.size() < servers.size();
    if (!r && untried_left) {
      servers.next();
      continue;
    }
    if (r && r->status == 307) {
      std::string loc = r->get_header_value("Location");
      const size_t scheme = loc.find("://");
      if (const size_t p = loc.find('/', scheme == std::string::npos ? 0 : scheme + 3); p != std::string::npos) loc.resize(p);
      if (!loc.empty() && std::find(tried.begin(), tried.end(), loc) == tried.end() && tried.size() <= servers.size()) {
        spdlog::info("event=leader_followed node={} from={} to={}", opt.node, url, loc);
        servers.follow(loc);
        continue;
      }
    }
    if (r && r->status == 503 && r->body.find("standby") != std::string::npos && untried_left) {
      servers.next();
      continue;
    }
    return r;
  }
}

void Agent::Impl::log_error(const std::string& what) {
  // At most one line every 10 s while the controller is away.
  const auto now = Clock::now();
  if (now - last_error_log < std::chrono::seconds(10)) return;
  last_error_log = now;
  spdlog::warn("event=controller_unreachable node={} error=\"{}\" (tasks keep running; retrying)", opt.node, what);
}

std::string Agent::Impl::error_message(const httplib::Response& r) {
  Json e = Json::parse(r.body, nullptr, false);
  if (e.is_object() && e.contains("error") && e["error"].is_object()) return e["error"].value("message", r.body);
  return r.body;
}

bool Agent::Impl::do_register() {
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
  if (ans.is_object()) lease_ms = ans.value("task_lease_ms", int64_t(0));
  last_ok_beat = Clock::now();
  spdlog::info("event=registered node={} server={} gpus={} source={} heartbeat_ms={}", opt.node, servers.current(),
               inventory.gpus.size(), inventory.source, interval_ms);
  registered = true;
  return true;
}

Json Agent::Impl::heartbeat_body() {
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
    if (!t.reason.empty()) e["message"] = t.reason;
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
  if (leaving) body["leaving"] = true;
  if (round_trip_ms >= 0) body["round_trip_ms"] = round_trip_ms;
  if (Json n = interruption_notice(); !n.is_null()) body["interruption_notice"] = n;
  return body;
}

// The spot interruption notice file, when it exists: {noticed_at (its mtime), reclaim_at (its
// first line, when that is unix seconds)}. Level-triggered: reported at every beat while it exists.
Json Agent::Impl::interruption_notice() {
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

bool Agent::Impl::heartbeat() {
  const auto sent = Clock::now();
  auto r = post("/api/v1/agent/heartbeat", heartbeat_body());
  if (!r) return log_error(httplib::to_string(r.error())), false;
  if (r->status == 409 && r->body.find("not_registered") != std::string::npos) {
    spdlog::info("event=reregister node={} reason=\"the controller does not know this agent (it restarted)\"", opt.node);
    registered = false;
    return false;
  }
  if (r->status != 200) return log_error("heartbeat: HTTP " + std::to_string(r->status) + ": " + error_message(*r)), false;
  Json ans = Json::parse(r->body, nullptr, false);
  if (!ans.is_object()) return log_error("heartbeat: the answer is not JSON"), false;
  if (opt.heartbeat_interval_ms <= 0) interval_ms = ans.value("heartbeat_interval_ms", interval_ms);
  lease_ms = ans.value("task_lease_ms", lease_ms);
  last_ok_beat = sent;
  round_trip_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent).count();
  last_answer_empty = ans.value("run", Json::array()).empty();
  converge(ans);
  const Json& seq = ans.contains("seq") ? ans["seq"] : Json();
  seq_seen.store(seq.is_number_integer() ? seq.get<int64_t>() : -1);
  wake_cv.notify_all();  // the watch waits for a new number after it fired
  return true;
}

// The watch thread. A watch answered with a number other than the one seen wakes run(), which
// heartbeats; the next watch waits for that heartbeat's number. A controller without watches (404)
// is asked again a minute later; heartbeats carry on meanwhile.
void Agent::Impl::watch_loop() {
  constexpr int64_t kWaitMs = 20000;
  auto pause = [this](std::chrono::milliseconds d, int64_t until_not = INT64_MIN) {
    std::unique_lock lock(wake_mu);
    wake_cv.wait_for(lock, d, [&] { return watch_stop.load() || (until_not != INT64_MIN && seq_seen.load() != until_not); });
  };
  while (!watch_stop.load()) {
    const int64_t seen = seq_seen.load();
    if (seen < 0) {
      pause(std::chrono::milliseconds(500), seen);
      continue;
    }
    httplib::Client cli(servers.current());  // run()'s calls find the leader; the watch follows
    cli.set_connection_timeout(3, 0);
    cli.set_read_timeout(std::chrono::milliseconds(kWaitMs + 10000));
    cli.set_bearer_token_auth(opt.token);
    cli.set_tcp_nodelay(true);
    {
      std::lock_guard lock(wake_mu);
      if (watch_stop.load()) break;
      watch_cli = &cli;
    }
    auto r = cli.Post("/api/v1/agent/watch", Json{{"node", opt.node}, {"seen", seen}, {"wait_ms", kWaitMs}}.dump(),
                      "application/json");
    {
      std::lock_guard lock(wake_mu);
      watch_cli = nullptr;
    }
    if (watch_stop.load()) break;
    if (!r || r->status != 200) {
      if (r && r->status == 404) {
        spdlog::info("event=watch_unsupported node={} (the controller has no watch; heartbeats only)", opt.node);
        pause(std::chrono::seconds(60));
      } else {
        pause(std::chrono::seconds(1));
      }
      continue;
    }
    const Json ans = Json::parse(r->body, nullptr, false);
    const Json& seq = ans.is_object() && ans.contains("seq") ? ans["seq"] : Json();
    if (seq.is_number_integer() && seq.get<int64_t>() != seen) {
      wake_up();
      pause(std::chrono::seconds(2), seen);  // until run()'s heartbeat brings the new number
    }
  }
}

void Agent::Impl::stop_watch() {
  std::lock_guard lock(wake_mu);
  watch_stop.store(true);
  if (watch_cli) watch_cli->stop();
  wake_cv.notify_all();
}

void Agent::Impl::converge(const Json& ans) {
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
    // A user's signal (cancel --signal): each seq once; those sent before this agent knew the task are past.
    const int64_t seq = a.value("signal_seq", int64_t(0));
    LocalTask& lt = it->second;
    if (lt.signal_done < 0 || seq < lt.signal_done) lt.signal_done = seq;
    if (seq > lt.signal_done && lt.proc && !lt.terminal()) {
      auto sig = signal_number(a.value("signal", ""));
      if (sig.ok()) {
        lt.proc->signal(*sig);
        spdlog::info("event=task_signalled node={} job={} task={} signal={}", opt.node, lt.job, lt.task, a.value("signal", ""));
      }
      lt.signal_done = seq;
    }
    it->second.save_every_s = std::max<int64_t>(0, a.value("checkpoint_every_s", int64_t(0)));
    it->second.save_anchor = a.value("checkpoint_anchor", int64_t(0));
    if (it->second.state == "starting") {
      if (leaving) stop_task(it->second, "the agent is leaving (a planned stop)");  // nothing new starts now
      else try_start(it->second);
    }
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
      it->second.close_output();
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

void Agent::Impl::apply_mig(const Json& desired) {
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
      write_cdi_spec();  // the new instances' devices
      next_beat = Clock::now();  // report the new layout
    } else
      spdlog::warn("event=mig_refused node={} gpu={} reason=\"{}\"", opt.node, gi, st.message());
  }
}

Status Agent::Impl::start_log_server() {
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
  a->impl_->servers.set(a->impl_->opt.server);
  a->impl_->gpus = std::move(gpus);
  a->impl_->task_users = std::move(*users);
  auto inv = a->impl_->gpus->inventory();
  if (!inv.ok()) return inv.error();
  a->impl_->inventory = *inv;
  Impl& m = *a->impl_;
  // This agent's id: its node and state directory (stable across restarts, distinct for two agents
  // on one host). Names its containers and task cgroups.
  m.agent_id = m.opt.node + "-" + std::to_string(std::hash<std::string>{}(m.opt.state_dir) % 0xffffffu);
  if (m.opt.runtime != "none") {
    PodmanRuntime rt(PodmanOptions{m.opt.podman, m.opt.pull});
    if (Status st = rt.check(); st.ok()) {
      m.podman.emplace(std::move(rt));
    } else if (m.opt.runtime == "podman") {
      return failed_precondition("--runtime podman: " + st.message() + " (install podman and runc: docs/containers.md)");
    } else {
      m.runtime_missing = "podman does not run here (" + st.message() + ")";
    }
  } else {
    m.runtime_missing = "the agent was started with --runtime none";
  }
  spdlog::info("event=container_runtime node={} runtime={} {}", m.opt.node, m.podman ? "podman" : "none", m.runtime_missing);
  m.reap_leftovers();
  m.write_cdi_spec();
  if (Status st = m.start_watchdog(); !st.ok()) return st.error();
  if (Status st = m.start_log_server(); !st.ok()) return st.error();
  return a;
}

Agent::~Agent() {
  if (!impl_) return;
  if (impl_->watchdog_fd >= 0) ::close(impl_->watchdog_fd);
  impl_->log_server.stop();
  if (impl_->log_thread.joinable()) impl_->log_thread.join();
}

int Agent::log_port() const { return impl_->log_port; }

void Agent::stop() {
  stop_.store(true);
  impl_->wake_up();
}

void Agent::run() {
  Impl& m = *impl_;
  auto next_register = Clock::now();
  std::thread watcher([&m] { m.watch_loop(); });
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
    if (m.fence_if_lease_expired()) m.next_beat = now;
    if (m.poll_tasks()) m.next_beat = now;
    {
      std::lock_guard lock(m.wake_mu);
      if (m.wake) m.wake = false, m.next_beat = now;
    }
    if (m.registered && now >= m.next_beat) {
      m.next_beat = now + std::chrono::milliseconds(m.interval_ms);
      if (!m.heartbeat() && !m.registered) m.seq_seen.store(-1);
    }
    // Tasks are polled every 50 ms while any runs (10 ms in the 2 s after a start, so that a short
    // task's exit is reported as it happens); an idle agent sleeps until its next heartbeat (at most
    // a second) unless the watch or stop() wakes it.
    auto wait = std::chrono::milliseconds(Clock::now() - m.last_start < std::chrono::seconds(2) ? 10 : 50);
    if (m.registered && !m.has_live_tasks())
      wait = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(m.next_beat - Clock::now()),
                        std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
    std::unique_lock lock(m.wake_mu);
    m.wake_cv.wait_for(lock, wait, [&] { return m.wake || stop_.load(); });
  }
  m.stop_watch();
  watcher.join();
  if (m.opt.stop_tasks_on_exit) {
    m.leave();
    m.stop_all_tasks();               // whatever the controller did not settle in time
    if (m.registered) m.heartbeat();  // report the stops
  }
}

void Agent::Impl::leave() {
  if (!registered) return;
  leaving = true;
  // Checkpoints get their grace (the longest of the node's tasks), then a margin for the reports.
  int64_t grace = opt.stop_grace_s;
  for (const auto& [key, t] : tasks)
    if (!t.terminal()) grace = std::max<int64_t>(grace, t.assignment.value("checkpoint", Json::object()).value("grace", int64_t(0)));
  const auto until = Clock::now() + std::chrono::seconds(grace + 5);
  spdlog::info("event=agent_leaving node={} tasks={} deadline_s={} (a planned stop: the controller checkpoints and requeues "
               "this node's jobs)", opt.node, tasks.size(), grace + 5);
  auto next = Clock::now();
  int unanswered = 0;
  while (Clock::now() < until) {
    poll_tasks();
    if (Clock::now() >= next) {
      next = Clock::now() + std::chrono::milliseconds(200);
      if (!heartbeat()) {
        if (++unanswered < 5) continue;  // a busy controller gets a second or so
        spdlog::warn("event=agent_leaving_unanswered node={} (stopping the tasks here)", opt.node);
        return;
      }
      unanswered = 0;
      bool left = false;
      for (const auto& [key, t] : tasks) left = left || !t.terminal();
      if (!left && last_answer_empty) {
        spdlog::info("event=agent_left node={} (its jobs are requeued)", opt.node);
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  spdlog::warn("event=agent_leaving_timeout node={} (stopping the tasks here)", opt.node);
}

}  // namespace tessera::agent
