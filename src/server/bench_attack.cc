#include "server/bench_attack.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "server/bench_stats.h"
#include "server/controller.h"
#include "server/event_kind.h"
#include "server/http_api.h"
#include "server/server_main.h"
#include "server/store.h"

namespace tessera::server {

namespace {

using bench::Clock;
using bench::ms_since;
using bench::percentile;

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server still holds the connection (no FIN or RST seen).
bool still_open(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  char b;
  return ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

}  // namespace

Result<BenchAttackResult> run_bench_attack(const BenchAttackOptions& o, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  // Both ends of every connection live in this process: allow as many descriptors as the hard limit.
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  char tmpl[] = "/tmp/tessera-bench-attack-XXXXXX";
  if (!mkdtemp(tmpl)) return internal_error("bench attack: cannot create a temporary directory in /tmp");
  const std::string dir = tmpl;
  BenchAttackResult out;
  {
    auto store = open_sqlite_store(dir);
    if (!store.ok()) return store.error();
    auto cfg = load_server_config("");
    if (!cfg.ok()) return cfg.error();
    ControllerOptions copt;
    copt.agents_required = true;
    copt.heartbeat_interval_ms = o.heartbeat_ms;
    copt.agent_timeout_ms = 3 * o.heartbeat_ms;
    auto controller = Controller::start(*cfg, store->get(), copt);
    if (!controller.ok()) return controller.error();
    const std::string admin = new_token(), agent = new_token();
    for (const TokenRow& t : {TokenRow{sha256_hex(admin), "bench", "admin", "", 0, false, ""},
                              TokenRow{sha256_hex(agent), "agent", "agent", "", 0, false, "*"}}) {
      if (Status st = (*store)->write_sync(WriteBatch{{}, {}, {t}, {}}); !st.ok()) return st.error();
      (*controller)->tokens().add(t);
    }
    HttpApi api(**controller, [](const std::string&) { return Status(); });
    HttpOptions http;
    http.port = 0;
    http.threads = 16;
    http.max_connections = o.max_connections;
    if (o.agent_listener) http.agent_port = 0;
    if (Status st = api.start(http); !st.ok()) return st.error();
    const int port = api.port(), agent_port = o.agent_listener ? api.agent_port() : api.port();
    // The agents: register every node, then heartbeat on keep-alive connections.
    std::vector<std::string> nodes;
    for (const NodeSpec& n : cfg->nodes) nodes.push_back(n.name);
    const httplib::Headers agent_auth{{"Authorization", "Bearer " + agent}};
    for (const NodeSpec& n : cfg->nodes) {
      Json gpus = Json::array();
      for (int i = 0; i < n.gpu_count; ++i) gpus.push_back(Json{{"model", n.gpu_model}, {"mig_enabled", false}});
      for (int gi : n.mig_gpus) gpus[size_t(gi)]["mig_enabled"] = true;
      httplib::Client cli("127.0.0.1", agent_port);
      auto r = cli.Post("/api/v1/agent/register", agent_auth,
                        Json{{"node", n.name}, {"address", "127.0.0.1"}, {"log_port", 0}, {"inventory", {{"gpus", gpus}}}}.dump(),
                        "application/json");
      if (!r || r->status != 200)
        return internal_error("bench attack: registering " + n.name + " failed: " + (r ? r->body : httplib::to_string(r.error())));
    }
    const int64_t seq_before = [&] {
      auto ev = (*store)->events_after(0, 1000000);
      return ev.ok() && !ev->empty() ? ev->back().seq : int64_t(0);
    }();
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::vector<double> beats, probes;
    std::vector<std::thread> threads;
    for (const std::string& node : nodes)
      threads.emplace_back([&, node] {
        httplib::Client cli("127.0.0.1", agent_port);
        cli.set_keep_alive(true);
        cli.set_tcp_nodelay(true);  // as the agent does
        cli.set_read_timeout(30, 0);
        const std::string body = Json{{"node", node}, {"tasks", Json::array()}}.dump();
        while (!stop) {
          const auto t0 = Clock::now();
          auto r = cli.Post("/api/v1/agent/heartbeat", agent_auth, body, "application/json");
          const double ms = ms_since(t0);
          {
            std::lock_guard l(mu);
            if (r && r->status == 200) beats.push_back(ms);
            else ++out.heartbeats_failed;
          }
          std::this_thread::sleep_until(t0 + std::chrono::milliseconds(o.heartbeat_ms));
        }
      });
    // The attack: slow and idle connections, opened in batches.
    std::vector<int> slow_fds, idle_fds;
    for (int i = 0; i < o.slow + o.idle; ++i) {
      const int fd = connect_loopback(port);
      if (fd < 0) continue;
      if (i < o.slow) {
        const std::string start = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n";
        (void)::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
        slow_fds.push_back(fd);
      } else {
        idle_fds.push_back(fd);
      }
    }
    say("attack: " + std::to_string(slow_fds.size()) + " slow and " + std::to_string(idle_fds.size()) + " idle connections open");
    threads.emplace_back([&] {  // one header line per slow connection every slow_line_ms
      int64_t line = 0;
      while (!stop) {
        const auto t0 = Clock::now();
        const std::string h = "X-Slow-" + std::to_string(line++) + ": y\r\n";
        for (int fd : slow_fds) (void)::send(fd, h.data(), h.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        while (!stop && Clock::now() < t0 + std::chrono::milliseconds(o.slow_line_ms))
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    threads.emplace_back([&] {  // the prober: a new connection each time, as a load balancer's would be
      while (!stop) {
        const auto t0 = Clock::now();
        httplib::Client cli("127.0.0.1", port);
        cli.set_read_timeout(30, 0);
        auto r = cli.Get("/healthz");
        const double ms = ms_since(t0);
        {
          std::lock_guard l(mu);
          if (r && r->status == 200) probes.push_back(ms);
          else ++out.probes_failed;
        }
        std::this_thread::sleep_until(t0 + std::chrono::milliseconds(50));
      }
    });
    const auto until = Clock::now() + std::chrono::milliseconds(int64_t(o.seconds * 1000));
    while (Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int fd : slow_fds) out.attack_connections_open += still_open(fd);
    for (int fd : idle_fds) out.attack_connections_open += still_open(fd);
    stop = true;
    for (std::thread& t : threads) t.join();
    for (int fd : slow_fds) ::close(fd);
    for (int fd : idle_fds) ::close(fd);
    out.heartbeats = int64_t(beats.size());
    out.heartbeat_ms_p50 = percentile(beats, 0.5);
    out.heartbeat_ms_p99 = percentile(beats, 0.99);
    out.heartbeat_ms_max = beats.empty() ? 0 : *std::max_element(beats.begin(), beats.end());
    out.probes = int64_t(probes.size());
    out.healthz_ms_p50 = percentile(probes, 0.5);
    out.healthz_ms_p99 = percentile(probes, 0.99);
    out.healthz_ms_max = probes.empty() ? 0 : *std::max_element(probes.begin(), probes.end());
    api.stop();
    controller->reset();
    (*store)->flush();
    auto ev = (*store)->events_after(seq_before, 1000000);
    if (!ev.ok()) return ev.error();
    for (const EventRow& e : *ev) out.not_ready += parse_event_kind(e.kind) == EventKind::kNodeNotReady;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return out;
}

}  // namespace tessera::server
