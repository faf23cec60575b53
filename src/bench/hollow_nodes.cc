#include "bench/hollow_nodes.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/http_channel.h"
#include "core/gpu_catalog.h"

namespace tessera::bench {

using Json = nlohmann::json;

HollowOutcome hollow_outcome(const std::vector<std::string>& command, double default_s) {
  if (command.empty()) return {default_s, 0};
  std::string prog = command[0];
  if (const size_t slash = prog.rfind('/'); slash != std::string::npos) prog = prog.substr(slash + 1);
  if (prog == "true") return {0, 0};
  if (prog == "false") return {0, 1};
  if (prog == "sleep" && command.size() >= 2) {
    char* end = nullptr;
    const double s = std::strtod(command[1].c_str(), &end);
    if (end != command[1].c_str() && *end == '\0' && s >= 0 && s < 1e9) return {s, 0};
  }
  return {default_s, 0};
}

namespace {

constexpr uint64_t kWakeTag = ~uint64_t(0);
constexpr auto kNever = Clock::time_point::max();

struct TaskKey {
  int64_t job = 0, attempt = 0;
  int task = 0;
  auto operator<=>(const TaskKey&) const = default;
};

struct HTask {
  int tasks = 1, gpus = 0;
  std::vector<int> gpu_index;
  std::string state = "starting";  // starting, running, succeeded, failed, stopped, checkpointed
  int exit_code = 0, master_port = 0;
  HollowOutcome outcome;
  Clock::time_point ends = kNever;
  std::string checkpoint;
  bool checkpoint_requested = false;
  bool terminal() const { return state != "starting" && state != "running"; }
};

enum class Call : uint8_t { kNone, kRegister, kBeat };

struct Node {
  HollowNodeSpec spec;
  size_t index = 0;
  std::string reg_body;
  bool registered = false, silent = false, ever_registered = false;
  HttpChannel hb, watch;
  Call call = Call::kNone;
  Clock::time_point sent{}, next_beat = kNever, next_register{}, last_ok{}, next_watch{}, armed = kNever;
  bool beat_asked = false, watch_in_flight = false, rewatch_after_beat = false;
  int64_t interval_ms = 5000, lease_ms = 0, seen = 0;
  std::map<TaskKey, HTask> tasks;
};

struct Loop {
  int epfd = -1, wakefd = -1;
  // Two libcurl multis, their sockets in epfd: heartbeats and registrations, and the long polls. Apart,
  // so that looking for an idle connection (libcurl walks its cache) does not walk the held watches.
  std::unique_ptr<HttpMulti> http[2];
  std::thread thread;
  std::priority_queue<std::pair<Clock::time_point, size_t>, std::vector<std::pair<Clock::time_point, size_t>>,
                      std::greater<>> timers;
  std::mutex mu;  // guards commands, rtts, arrivals
  std::vector<std::function<void()>> commands;
  std::vector<double> rtts;
  std::vector<TaskArrival> arrivals;
  std::mt19937_64 rng;
  ~Loop() {
    for (auto& h : http) h.reset();
    if (epfd >= 0) ::close(epfd);
    if (wakefd >= 0) ::close(wakefd);
  }
};

}  // namespace

struct HollowFleet::Impl {
  HollowFleetOptions opt;
  std::string base_url;      // http://HOST:PORT
  // Every request's headers: the token, JSON, and no `Expect: 100-continue` wait before a body.
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers{nullptr, curl_slist_free_all};
  // Declared before the nodes, so destroyed after them: a node's channels leave their loop's multi first.
  std::vector<std::unique_ptr<Loop>> loops;
  std::vector<std::unique_ptr<Node>> nodes;
  std::unique_ptr<std::atomic<bool>[]> silent_flags;
  std::atomic<bool> stop{false};
  std::atomic<bool> watch_off{false}, watch_supported{false};
  std::atomic<int64_t> registered{0}, registrations{0}, heartbeats{0}, heartbeat_failures{0}, watches_answered{0},
      watch_wakeups{0}, tasks_started{0}, tasks_ended{0}, tasks_failed{0}, tasks_stopped{0}, tasks_running{0}, gpus_busy{0};
  std::mutex error_mu;
  std::string last_error;

  Loop& loop_of(size_t i) { return *loops[i % loops.size()]; }
  void note_error(const std::string& e) {
    std::lock_guard<std::mutex> l(error_mu);
    last_error = e;
  }
  void post(size_t i, std::function<void()> f) {
    Loop& l = loop_of(i);
    {
      std::lock_guard<std::mutex> g(l.mu);
      l.commands.push_back(std::move(f));
    }
    const uint64_t one = 1;
    (void)!::write(l.wakefd, &one, sizeof one);
  }

  // ---- one node's protocol ------------------------------------------------------------------------

  Clock::time_point next_wake(const Node& n) const {
    if (n.silent) return kNever;
    Clock::time_point t = kNever;
    if (n.call != Call::kNone) t = std::min(t, n.hb.deadline());
    if (!n.registered) {
      if (n.call == Call::kNone) t = std::min(t, n.next_register);
      return t;
    }
    if (n.call == Call::kNone) t = std::min(t, n.beat_asked ? Clock::now() : n.next_beat);
    bool live = false;
    for (const auto& [k, task] : n.tasks) {
      if (task.state == "running") t = std::min(t, task.ends);
      live = live || !task.terminal();
    }
    if (live && n.lease_ms > 0) t = std::min(t, n.last_ok + std::chrono::milliseconds(n.lease_ms));
    if (watching() && !n.rewatch_after_beat) t = std::min(t, n.watch_in_flight ? n.watch.deadline() : n.next_watch);
    return t;
  }
  bool watching() const { return opt.watch && !watch_off.load(std::memory_order_relaxed); }

  void rearm(Loop& l, Node& n) {
    const auto want = next_wake(n);
    if (want == kNever) return;
    if (want < n.armed || n.armed == kNever) {
      n.armed = want;
      l.timers.push({want, n.index});
    }
  }

  void end_task(HTask& t, TaskKey k, const std::string& state, int exit_code) {
    const bool was_running = t.state == "running";
    t.state = state;
    t.exit_code = exit_code;
    tasks_ended.fetch_add(1, std::memory_order_relaxed);
    if (state == "failed") tasks_failed.fetch_add(1, std::memory_order_relaxed);
    if (state == "stopped" || state == "checkpointed") tasks_stopped.fetch_add(1, std::memory_order_relaxed);
    if (was_running) {
      tasks_running.fetch_sub(1, std::memory_order_relaxed);
      gpus_busy.fetch_sub(t.gpus, std::memory_order_relaxed);
    }
    if (opt.on_task_end) opt.on_task_end(k.job, t.gpus, state);
  }

  void start_task(HTask& t, Clock::time_point now) {
    t.state = "running";
    t.ends = now + std::chrono::microseconds(int64_t(t.outcome.seconds * 1e6));
    tasks_started.fetch_add(1, std::memory_order_relaxed);
    tasks_running.fetch_add(1, std::memory_order_relaxed);
    gpus_busy.fetch_add(t.gpus, std::memory_order_relaxed);
  }

  std::string beat_body(const Node& n) const {
    Json ts = Json::array();
    std::vector<int> util(size_t(n.spec.gpus), 0);
    for (const auto& [k, t] : n.tasks) {
      Json e{{"job", k.job}, {"attempt", k.attempt}, {"task", k.task}, {"state", t.state}, {"exit_code", t.exit_code}};
      if (t.master_port > 0) e["master_port"] = t.master_port;
      if (!t.checkpoint.empty()) e["checkpoint"] = t.checkpoint;
      if (t.checkpoint_requested) e["checkpoint_requested"] = true;
      ts.push_back(std::move(e));
      if (t.state == "running")
        for (int g : t.gpu_index)
          if (g >= 0 && g < n.spec.gpus) util[size_t(g)] = 100;
    }
    Json gpus = Json::array();
    for (int g = 0; g < n.spec.gpus; ++g)
      gpus.push_back(Json{{"index", g}, {"utilization_pct", util[size_t(g)]}, {"memory_used_mib", util[size_t(g)] ? 1024 : 0}});
    return Json{{"node", n.spec.name}, {"tasks", ts}, {"gpus", gpus}, {"mig", Json::array()}}.dump();
  }

  void send_call(Node& n, Clock::time_point now) {
    n.sent = now;
    const auto deadline = now + std::chrono::milliseconds(opt.heartbeat_timeout_ms);
    if (!n.registered) {
      n.call = Call::kRegister;
      n.hb.post("/api/v1/agent/register", n.reg_body, deadline);
    } else {
      n.call = Call::kBeat;
      n.beat_asked = false;
      n.next_beat = now + std::chrono::milliseconds(n.interval_ms);
      n.hb.post("/api/v1/agent/heartbeat", beat_body(n), deadline);
    }
  }

  void send_watch(Node& n) {
    const Json body{{"node", n.spec.name}, {"seen", n.seen}, {"wait_ms", opt.watch_wait_ms}};
    n.watch_in_flight = true;
    n.watch.post("/api/v1/agent/watch", body.dump(), Clock::now() + std::chrono::milliseconds(opt.watch_wait_ms + 10000));
  }

  // Everything due for the node at `now`.
  void tick(Loop& l, Node& n, Clock::time_point now) {
    if (n.silent) return;
    if (n.call != Call::kNone && now >= n.hb.deadline()) {
      n.hb.fail("no answer within " + std::to_string(opt.heartbeat_timeout_ms) + " ms");
      on_call_answer(l, n, now);
    }
    if (n.watch_in_flight && now >= n.watch.deadline()) {
      n.watch.fail("watch: no answer");
      on_watch_answer(l, n, now);
    }
    bool changed = false;
    for (auto& [k, t] : n.tasks) {
      if (t.state != "running" || now < t.ends) continue;
      end_task(t, k, t.outcome.exit_code == 0 ? "succeeded" : "failed", t.outcome.exit_code);
      changed = true;
    }
    // Fencing: no heartbeat answered for the task lease: stop everything (as the real agent does).
    if (n.registered && n.lease_ms > 0 && now - n.last_ok >= std::chrono::milliseconds(n.lease_ms))
      for (auto& [k, t] : n.tasks)
        if (!t.terminal()) end_task(t, k, "stopped", 143), changed = true;
    if (changed) n.beat_asked = true;
    if (n.call == Call::kNone) {
      if (!n.registered && now >= n.next_register) send_call(n, now);
      else if (n.registered && (n.beat_asked || now >= n.next_beat)) send_call(n, now);
      if (n.hb.finished()) on_call_answer(l, n, now);
    }
    if (n.registered && watching() && !n.watch_in_flight && !n.rewatch_after_beat && now >= n.next_watch) {
      send_watch(n);
      if (n.watch.finished()) on_watch_answer(l, n, now);
    }
  }

  void converge(Node& n, const Json& ans, Clock::time_point now, Loop& l) {
    bool changed = false;
    std::map<TaskKey, const Json*> wanted;
    const Json empty = Json::array();
    const Json& run = ans.contains("run") && ans["run"].is_array() ? ans["run"] : empty;
    for (const Json& a : run) {
      const TaskKey key{a.value("job", int64_t(0)), a.value("attempt", int64_t(0)), a.value("task", 0)};
      wanted[key] = &a;
      auto it = n.tasks.find(key);
      if (it == n.tasks.end()) {
        HTask t;
        t.tasks = a.value("tasks", 1);
        std::vector<std::string> argv;
        if (a.contains("command") && a["command"].is_array())
          for (const Json& c : a["command"])
            if (c.is_string()) argv.push_back(c.get<std::string>());
        t.outcome = hollow_outcome(argv, opt.default_task_s);
        if (a.contains("gpus") && a["gpus"].is_array())
          for (const Json& g : a["gpus"])
            if (g.is_number_integer()) t.gpu_index.push_back(g.get<int>());
        t.gpus = int(t.gpu_index.size());
        it = n.tasks.emplace(key, std::move(t)).first;
        std::lock_guard<std::mutex> g(l.mu);
        l.arrivals.push_back(TaskArrival{n.index, key.job, key.attempt, key.task, it->second.tasks, now});
      }
      HTask& t = it->second;
      if (t.state != "starting") continue;
      // Rendezvous as the real agent: task 0 picks the port; the others wait until it is known.
      int port = a.value("master_port", 0);
      if (key.task == 0) port = t.master_port = 20000 + int(key.job % 40000);
      if (port == 0)
        if (auto t0 = n.tasks.find({key.job, key.attempt, 0}); t0 != n.tasks.end()) port = t0->second.master_port;
      if (port > 0) start_task(t, now), changed = true;
    }
    std::map<TaskKey, bool> stops;  // -> checkpoint first
    if (ans.contains("stop") && ans["stop"].is_array())
      for (const Json& s : ans["stop"])
        stops[{s.value("job", int64_t(0)), s.value("attempt", int64_t(0)), s.value("task", 0)}] = s.value("checkpoint", false);
    for (auto& [k, t] : n.tasks) {
      if (t.terminal()) continue;
      auto s = stops.find(k);
      const bool is_wanted = wanted.count(k) > 0;
      if (s != stops.end() && is_wanted && s->second) {
        // The hollow task acknowledges at once and stops: checkpointed, as a job that saves quickly.
        t.checkpoint = "/hollow/checkpoints/job-" + std::to_string(k.job) + "/a" + std::to_string(k.attempt);
        t.checkpoint_requested = true;
        end_task(t, k, "checkpointed", 0);
        changed = true;
      } else if (!is_wanted || s != stops.end()) {
        end_task(t, k, "stopped", 143);
        changed = true;
      }
    }
    for (auto it = n.tasks.begin(); it != n.tasks.end();) {
      if (it->second.terminal() && !wanted.count(it->first)) it = n.tasks.erase(it);
      else ++it;
    }
    if (changed) n.beat_asked = true;
  }

  void on_call_answer(Loop& l, Node& n, Clock::time_point now) {
    HttpAnswer a = n.hb.take();
    const Call call = n.call;
    n.call = Call::kNone;
    if (call == Call::kRegister) {
      if (a.status != 200) {
        heartbeat_failures.fetch_add(1, std::memory_order_relaxed);
        note_error("register " + n.spec.name + ": " + (a.status ? "HTTP " + std::to_string(a.status) + " " + a.body.substr(0, 300) : a.error));
        n.next_register = now + std::chrono::seconds(1);
        return;
      }
      const Json ans = Json::parse(a.body, nullptr, false);
      if (ans.is_object()) {
        n.interval_ms = std::max<int64_t>(10, ans.value("heartbeat_interval_ms", int64_t(5000)));
        n.lease_ms = ans.value("task_lease_ms", int64_t(0));
      }
      n.registered = true;
      n.last_ok = n.sent;
      registered.fetch_add(1, std::memory_order_relaxed);
      registrations.fetch_add(1, std::memory_order_relaxed);
      // The first time: a random phase, so that the fleet does not beat in step; later: at once.
      std::uniform_int_distribution<int64_t> phase(0, n.interval_ms);
      n.next_beat = n.ever_registered ? now : now + std::chrono::milliseconds(phase(l.rng));
      n.ever_registered = true;
      n.next_watch = now;
      return;
    }
    if (a.status == 409 && a.body.find("not_registered") != std::string::npos) {
      n.registered = false;
      registered.fetch_sub(1, std::memory_order_relaxed);
      n.next_register = now;
      return;
    }
    if (a.status != 200) {
      heartbeat_failures.fetch_add(1, std::memory_order_relaxed);
      note_error("heartbeat " + n.spec.name + ": " + (a.status ? "HTTP " + std::to_string(a.status) + " " + a.body.substr(0, 300) : a.error));
      return;
    }
    const Json ans = Json::parse(a.body, nullptr, false);
    if (!ans.is_object()) {
      heartbeat_failures.fetch_add(1, std::memory_order_relaxed);
      note_error("heartbeat " + n.spec.name + ": the answer is not JSON");
      return;
    }
    heartbeats.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> g(l.mu);
      l.rtts.push_back(std::chrono::duration<double, std::milli>(now - n.sent).count());
    }
    n.last_ok = n.sent;
    n.interval_ms = std::max<int64_t>(10, ans.value("heartbeat_interval_ms", n.interval_ms));
    n.lease_ms = ans.value("task_lease_ms", n.lease_ms);
    if (ans.contains("seq") && ans["seq"].is_number_integer()) n.seen = std::max(n.seen, ans["seq"].get<int64_t>());
    converge(n, ans, now, l);
    if (n.rewatch_after_beat) {
      n.rewatch_after_beat = false;
      n.next_watch = now;
    }
  }

  void on_watch_answer(Loop& l, Node& n, Clock::time_point now) {
    (void)l;
    HttpAnswer a = n.watch.take();
    n.watch_in_flight = false;
    if (a.status == 404) {
      watch_off.store(true);
      note_error("watch: the server answered 404 (no watch here): plain heartbeats");
      n.watch.close();
      return;
    }
    if (a.status != 200) {
      n.next_watch = now + std::chrono::seconds(1);
      if (a.status != 0 || !n.silent) note_error("watch " + n.spec.name + ": " + (a.status ? "HTTP " + std::to_string(a.status) : a.error));
      return;
    }
    watch_supported.store(true, std::memory_order_relaxed);
    watches_answered.fetch_add(1, std::memory_order_relaxed);
    const Json ans = Json::parse(a.body, nullptr, false);
    const int64_t seq = ans.is_object() ? ans.value("seq", int64_t(0)) : 0;
    if (seq > n.seen) {  // news for this node: heartbeat now, then watch again from what it says
      watch_wakeups.fetch_add(1, std::memory_order_relaxed);
      n.beat_asked = true;
      n.rewatch_after_beat = true;
      return;
    }
    n.next_watch = now;
  }

  // A channel's request finished (answer or failure).
  void on_finished(Loop& l, HttpChannel& c) {
    Node& n = *nodes[size_t(c.tag() >> 1)];
    const bool is_watch = c.tag() & 1;
    if (!c.finished()) return;
    const auto now = Clock::now();
    if (is_watch) on_watch_answer(l, n, now);
    else on_call_answer(l, n, now);
    tick(l, n, now);
    rearm(l, n);
  }

  void drain_finished(Loop& l, HttpMulti& h) {
    while (HttpChannel* c = h.next_finished()) on_finished(l, *c);
  }

  // libcurl's timeouts that are due, and the requests they finished.
  void run_curl_timeouts(Loop& l) {
    for (auto& h : l.http) {
      h->on_timeout(Clock::now());
      drain_finished(l, *h);
    }
  }

  void run_loop(Loop& l) {
    std::vector<epoll_event> events(512);
    while (!stop.load()) {
      auto now = Clock::now();
      Clock::time_point wake = std::min(l.http[0]->next_timeout(), l.http[1]->next_timeout());
      const bool curl_due = wake <= now;  // libcurl asked to be called at once
      if (!l.timers.empty()) wake = std::min(wake, l.timers.top().first);
      int timeout_ms = 100;
      if (wake != kNever)
        timeout_ms = int(std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1, 0, 100));
      if (curl_due) timeout_ms = 0;
      const int k = ::epoll_wait(l.epfd, events.data(), int(events.size()), timeout_ms);
      for (int e = 0; e < k; ++e) {
        if (events[size_t(e)].data.u64 == kWakeTag) {
          uint64_t v = 0;
          (void)!::read(l.wakefd, &v, sizeof v);
          continue;
        }
        const uint64_t tag = events[size_t(e)].data.u64;
        const uint32_t id = HttpMulti::id_of(tag);
        if (id >= 2) continue;
        l.http[id]->on_socket(HttpMulti::fd_of(tag), events[size_t(e)].events);
        drain_finished(l, *l.http[id]);
      }
      run_curl_timeouts(l);
      std::vector<std::function<void()>> cmds;
      {
        std::lock_guard<std::mutex> g(l.mu);
        cmds.swap(l.commands);
      }
      for (auto& f : cmds) f();
      now = Clock::now();
      while (!l.timers.empty() && l.timers.top().first <= now) {
        const auto [t, i] = l.timers.top();
        l.timers.pop();
        Node& n = *nodes[i];
        if (t != n.armed) continue;  // superseded by an earlier wake
        n.armed = kNever;
        tick(l, n, now);
        rearm(l, n);
      }
      run_curl_timeouts(l);  // starts the requests just added
    }
  }
};

Result<std::unique_ptr<HollowFleet>> HollowFleet::start(std::vector<HollowNodeSpec> specs, HollowFleetOptions o) {
  if (specs.empty()) return invalid_argument("hollow nodes: no nodes");
  if (o.loops < 1 || o.loops > 64) return invalid_argument("hollow nodes: loops must be 1..64, got " + std::to_string(o.loops));
  auto m = std::make_unique<Impl>();
  if (!server_base_url(o.server, &m->base_url))
    return invalid_argument("hollow nodes: server must be HOST:PORT with an IPv4 address, got \"" + o.server + "\"");
  m->opt = std::move(o);
  curl_slist* headers = nullptr;
  for (const std::string& h : {"Authorization: Bearer " + m->opt.token, std::string("Content-Type: application/json"),
                               std::string("Expect:")})
    headers = curl_slist_append(headers, h.c_str());
  m->headers.reset(headers);
  // Connections kept per loop: one per node for the watches (each holds one); for heartbeats, what
  // a loop's nodes have in flight at once at most in steady state (the beats spread over an interval),
  // so that a burst (registration) does not leave thousands idle.
  const long per_loop = long((specs.size() + size_t(m->opt.loops) - 1) / size_t(m->opt.loops));
  m->silent_flags = std::make_unique<std::atomic<bool>[]>(specs.size());
  for (size_t i = 0; i < size_t(m->opt.loops); ++i) {
    auto l = std::make_unique<Loop>();
    l->epfd = ::epoll_create1(EPOLL_CLOEXEC);
    l->wakefd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->epfd < 0 || l->wakefd < 0) return internal_error("hollow nodes: cannot create an epoll set");
    l->http[0] = std::make_unique<HttpMulti>(l->epfd, 0, std::min(per_loop, 256L) + 16);
    l->http[1] = std::make_unique<HttpMulti>(l->epfd, 1, per_loop + 16);
    if (!l->http[0]->ok() || !l->http[1]->ok()) return internal_error("hollow nodes: cannot create a curl multi handle");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeTag;
    ::epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev);
    l->rng.seed(m->opt.seed * 7919 + i);
    m->loops.push_back(std::move(l));
  }
  std::mt19937_64 rng(m->opt.seed);
  std::uniform_int_distribution<int64_t> spread(0, std::max<int64_t>(0, m->opt.register_spread_ms));
  const auto now = Clock::now();
  for (size_t i = 0; i < specs.size(); ++i) {
    auto n = std::make_unique<Node>();
    n->spec = std::move(specs[i]);
    n->index = i;
    auto model = GpuCatalog::builtin().find(n->spec.gpu_model);
    if (!model.ok()) return invalid_argument("hollow nodes: " + n->spec.name + ": " + model.error().message);
    Json gpus = Json::array();
    for (int g = 0; g < n->spec.gpus; ++g) {
      char uuid[64];
      std::snprintf(uuid, sizeof uuid, "GPU-hollow-%08zx-%04x", i, g);
      gpus.push_back(Json{{"index", g}, {"uuid", uuid}, {"model", (*model)->name}, {"nvml_name", (*model)->name},
                          {"memory_mib", (*model)->memory.v}, {"mig_enabled", false}, {"instances", Json::array()},
                          {"utilization_pct", 0}, {"memory_used_mib", 0}});
    }
    n->reg_body = Json{{"node", n->spec.name}, {"address", "127.0.0.1"}, {"log_port", 0}, {"log_secret", ""},
                       {"version", "hollow"}, {"topology", Json::object()},
                       {"inventory", {{"source", "fake"}, {"driver_version", "hollow"}, {"gpus", gpus}, {"links", Json::array()}}}}
                      .dump();
    Loop& l = m->loop_of(i);
    if (!n->hb.configure(l.http[0].get(), m->base_url, m->headers.get(), uint64_t(i) << 1) ||
        !n->watch.configure(l.http[1].get(), m->base_url, m->headers.get(), (uint64_t(i) << 1) | 1))
      return internal_error("hollow nodes: cannot create a curl easy handle");
    n->next_register = now + std::chrono::milliseconds(spread(rng));
    n->armed = n->next_register;
    l.timers.push({n->armed, i});
    m->nodes.push_back(std::move(n));
  }
  Impl* raw = m.get();
  for (auto& l : m->loops) {
    Loop* lp = l.get();
    l->thread = std::thread([raw, lp] { raw->run_loop(*lp); });
  }
  return std::unique_ptr<HollowFleet>(new HollowFleet(std::move(m)));
}

HollowFleet::HollowFleet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HollowFleet::~HollowFleet() {
  impl_->stop.store(true);
  for (auto& l : impl_->loops) {
    const uint64_t one = 1;
    (void)!::write(l->wakefd, &one, sizeof one);
    if (l->thread.joinable()) l->thread.join();
  }
  for (auto& n : impl_->nodes) n->hb.close(), n->watch.close();
  // The rest goes with impl_: the nodes' easy handles, then each loop's multi and epoll set.
}

size_t HollowFleet::size() const { return impl_->nodes.size(); }
const HollowNodeSpec& HollowFleet::node(size_t i) const { return impl_->nodes.at(i)->spec; }
bool HollowFleet::silent(size_t i) const { return impl_->silent_flags[i].load(); }

void HollowFleet::go_silent(size_t i) {
  if (i >= size()) return;
  impl_->silent_flags[i].store(true);
  Impl* m = impl_.get();
  m->post(i, [m, i] {
    Node& n = *m->nodes[i];
    if (n.silent) return;
    n.silent = true;
    n.hb.close();
    n.watch.close();
    n.call = Call::kNone;
    n.watch_in_flight = n.rewatch_after_beat = n.beat_asked = false;
    for (auto& [k, t] : n.tasks)
      if (!t.terminal()) m->end_task(t, k, "stopped", 137);
    n.tasks.clear();
    if (n.registered) m->registered.fetch_sub(1);
    n.registered = false;
  });
}

void HollowFleet::come_back(size_t i) {
  if (i >= size()) return;
  impl_->silent_flags[i].store(false);
  Impl* m = impl_.get();
  m->post(i, [m, i] {
    Node& n = *m->nodes[i];
    if (!n.silent) return;
    n.silent = false;
    n.next_register = Clock::now();
    n.armed = kNever;
    m->rearm(m->loop_of(i), n);
  });
}

FleetStats HollowFleet::stats() const {
  const Impl& m = *impl_;
  FleetStats s;
  s.registered = m.registered.load();
  s.registrations = m.registrations.load();
  s.heartbeats = m.heartbeats.load();
  s.heartbeat_failures = m.heartbeat_failures.load();
  s.watches_answered = m.watches_answered.load();
  s.watch_wakeups = m.watch_wakeups.load();
  s.watch_supported = m.watch_supported.load();
  s.watch_off = m.watch_off.load();
  s.tasks_started = m.tasks_started.load();
  s.tasks_ended = m.tasks_ended.load();
  s.tasks_failed = m.tasks_failed.load();
  s.tasks_stopped = m.tasks_stopped.load();
  s.tasks_running = m.tasks_running.load();
  s.gpus_busy = m.gpus_busy.load();
  std::lock_guard<std::mutex> g(impl_->error_mu);
  s.last_error = m.last_error;
  return s;
}

std::vector<double> HollowFleet::heartbeat_rtts_ms() const {
  std::vector<double> out;
  for (auto& l : impl_->loops) {
    std::lock_guard<std::mutex> g(l->mu);
    out.insert(out.end(), l->rtts.begin(), l->rtts.end());
  }
  return out;
}

void HollowFleet::reset_heartbeat_rtts() {
  for (auto& l : impl_->loops) {
    std::lock_guard<std::mutex> g(l->mu);
    l->rtts.clear();
  }
}

std::vector<TaskArrival> HollowFleet::arrivals() const {
  std::vector<TaskArrival> out;
  for (auto& l : impl_->loops) {
    std::lock_guard<std::mutex> g(l->mu);
    out.insert(out.end(), l->arrivals.begin(), l->arrivals.end());
  }
  return out;
}

}  // namespace tessera::bench
