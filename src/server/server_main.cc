#include "server/server_main.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>

#include "config/log_format.h"
#include "server/controller.h"
#include "server/data_dir.h"
#include "server/http_api.h"
#include "server/leadership.h"
#include "server/store.h"

namespace tessera::server {

const char* default_config_yaml() {
  return R"(# Tessera's built-in demo cluster (tessera server without --config).
name: built-in
levels: [leaf]
nodes:
  - {name: node, count: 4, gpu_model: A100-80GB, gpus: 8, cpu: 128000, memory: 1048576, path: [leaf-0]}
queues:
  - {name: default}
  - {name: team-a, guaranteed: {A100-80GB: 12000}}
  - {name: team-b, guaranteed: {A100-80GB: 12000}}
)";
}

Result<config::ClusterConfig> load_server_config(const std::string& path) {
  if (path.empty()) return config::parse_cluster_config_yaml(default_config_yaml());
  return config::load_cluster_config(path);
}

std::string describe_config(const config::ClusterConfig& c) {
  int64_t gpus = 0;
  for (const NodeSpec& n : c.nodes) gpus += n.gpu_count;
  int leaves = 0;
  for (const QueueSpec& q : c.queues) {
    bool leaf = true;
    for (const QueueSpec& o : c.queues) leaf = leaf && o.parent != q.name;
    leaves += leaf;
  }
  return std::to_string(c.nodes.size()) + " nodes, " + std::to_string(gpus) + " GPUs, " + std::to_string(c.queues.size()) +
         " queues (" + std::to_string(leaves) + " leaves), " + std::to_string(c.scheduler.priority_classes.size()) +
         " priority classes, placement policy " + c.scheduler.policy;
}

namespace {

// Writes the token to DIR/admin.token with mode 0600 (created exclusively: never overwrites).
Status write_admin_token(const std::string& path, const std::string& token) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return invalid_argument("cannot create " + path + ": " + std::strerror(errno));
  const std::string line = token + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == ssize_t(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return invalid_argument("cannot write " + path);
  return {};
}

}  // namespace

int run_server(const ServerOptions& o) {
  config::use_safe_log_format();
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  if (o.data_dir.empty()) {
    std::cerr << "tessera server: --data is required: a directory for the embedded store (created if missing), "
                 "or postgres://... for PostgreSQL\n";
    return 2;
  }
  const auto colon = o.listen.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "tessera server: --listen must be HOST:PORT, got \"" << o.listen << "\"\n";
    return 2;
  }
  HttpOptions http;
  http.host = o.listen.substr(0, colon);
  try {
    http.port = std::stoi(o.listen.substr(colon + 1));
  } catch (...) {
    std::cerr << "tessera server: --listen port must be a number, got \"" << o.listen.substr(colon + 1) << "\"\n";
    return 2;
  }
  http.threads = o.http_threads;
  http.max_connections = o.max_connections;
  http.max_connections_per_ip = o.max_connections_per_ip;
  http.idle_timeout_s = o.idle_timeout_s;
  if (!o.agent_listen.empty()) {
    const auto ac = o.agent_listen.rfind(':');
    char* end = nullptr;
    const long p = ac == std::string::npos ? -1 : std::strtol(o.agent_listen.c_str() + ac + 1, &end, 10);
    if (ac == std::string::npos || *end != '\0' || p < 0 || p > 65535) {
      std::cerr << "tessera server: --agent-listen must be HOST:PORT, got \"" << o.agent_listen << "\"\n";
      return 2;
    }
    http.agent_host = o.agent_listen.substr(0, ac);
    http.agent_port = int(p);
  }
  // Every open connection is a descriptor: allow as many as the hard limit does.
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }

  auto cfg = load_server_config(o.config_path);
  if (!cfg.ok()) {
    std::cerr << "tessera server: config: " << cfg.error().message << "\n";
    return 1;
  }
  // Each agent holds up to two connections (a heartbeat and its watch): the agents' listener takes
  // that many for every configured node, and more than --max-connections when the cluster needs it.
  const int agent_connections = int(std::min<size_t>(2 * cfg->nodes.size() + 256, 1 << 20));
  http.agent_max_connections = std::max(http.max_connections, agent_connections);
  if (o.agent_listen.empty() && agent_connections > http.max_connections)
    spdlog::warn("event=connections_low max_connections={} nodes={} (each agent holds up to two connections: "
                 "use --agent-listen, or raise --max-connections to at least {})",
                 http.max_connections, cfg->nodes.size(), agent_connections);
  // Signals go to one waiting thread (blocked everywhere else, before any thread starts).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto where = parse_store_location(o.data_dir);
  if (!where.ok()) {
    std::cerr << "tessera server: " << where.error().message << "\n";
    return 2;
  }
  const bool embedded = where->kind == StoreLocation::Kind::kSqlite;
  const auto warn = [](const std::string& msg) { spdlog::warn("event=data_dir_warning detail=\"{}\"", msg); };
  // One controller per data directory: a second one would write the same store. The lock is on the
  // directory itself (no file to remove from under it), held until this function returns; the kernel
  // drops it when the process dies, so a restart after kill -9 is not blocked. (PostgreSQL: the
  // database is shared by design.)
  std::optional<DataDirLock> dir_lock;
  if (embedded) {
    auto lock = lock_data_dir(where->dir, warn);
    if (!lock.ok()) {
      if (lock.error().code == ErrorCode::kUnavailable) {
        std::cerr << "tessera server: " << where->dir << " is in use by another tessera server: " << lock.error().message
                  << " or pick another --data\n";
      } else {
        std::cerr << "tessera server: " << lock.error().message << "\n";
      }
      return 1;
    }
    dir_lock.emplace(std::move(*lock));
  }
  SqliteOpenOptions store_options;
  store_options.check = o.store_check;
  store_options.warn = warn;
  // PostgreSQL: controllers elect a leader (docs/ha.md); every write is fenced on its lease's epoch.
  auto epoch = std::make_shared<std::atomic<int64_t>>(0);
  PostgresOpenOptions pg_options;
  if (!embedded) {
    pg_options.epoch = [epoch] { return epoch->load(); };
    pg_options.on_fenced = [](const std::string& why) { step_down(why); };
  }
  auto store = open_store(*where, store_options, pg_options);
  if (!store.ok()) {
    std::cerr << "tessera server: store: " << store.error().message << "\n";
    return 1;
  }
  std::unique_ptr<LeaderLease> lease;
  std::unique_ptr<LeaseKeeper> keeper;
  bool announced = false;
  std::unique_ptr<StandbyServer> standby;  // PostgreSQL: serves the ports until this controller leads
  if (!embedded) {
    standby = std::make_unique<StandbyServer>();
    if (Status st = standby->start(http); !st.ok()) {
      std::cerr << "tessera server: " << st.message() << "\n";
      return 1;
    }
    // The same ports when this controller leads (port 0 picked one).
    http.port = standby->port();
    if (standby->agent_port() >= 0) http.agent_port = standby->agent_port();
    LeaseOptions lo;
    lo.lease_ms = o.lease_ms;
    lo.holder = http.host + ":" + std::to_string(http.port) + " pid " + std::to_string(::getpid());
    lo.url = !o.advertise_url.empty() ? o.advertise_url : "http://" + http.host + ":" + std::to_string(http.port);
    lo.agent_url = !o.advertise_agent_url.empty() ? o.advertise_agent_url
                   : standby->agent_port() >= 0
                       ? "http://" + (http.agent_host.empty() ? http.host : http.agent_host) + ":" + std::to_string(http.agent_port)
                       : lo.url;
    auto opened = LeaderLease::open(where->dsn, lo);
    if (!opened.ok()) {
      std::cerr << "tessera server: leader lease: " << opened.error().message << "\n";
      return 1;
    }
    lease = std::move(*opened);
    // Knows the leader before it says it listens: a request then is redirected, not told "no leader".
    if (auto who = lease->current(); who.ok()) standby->set_leader(*who);
    std::cout << "tessera server listening on http://" << http.host << ":" << http.port << " (standby until it leads)"
              << std::endl;
    announced = true;
    int sig = 0;
    if (!wait_for_leadership(*lease, *standby, signals, std::max<int64_t>(100, o.lease_ms / 5), &sig)) {
      spdlog::info("event=stopping signal={} role=standby", sig);
      return 0;
    }
    standby->taking_over();  // 503 "retry in a moment" until the API below listens
    epoch->store(lease->epoch());
    keeper = std::make_unique<LeaseKeeper>(*lease, std::max<int64_t>(50, o.lease_ms / 5));
    spdlog::info("event=leading epoch={} url={}", lease->epoch(), lo.url);
  }
  // First start: an admin token.
  auto loaded = (*store)->load();
  if (!loaded.ok()) {
    std::cerr << "tessera server: store: " << loaded.error().message << "\n";
    return 1;
  }
  const std::string token_path = !o.admin_token_file.empty() ? o.admin_token_file
                                 : embedded                   ? where->dir + "/admin.token"
                                                              : std::string();
  if (loaded->tokens.empty()) {
    if (token_path.empty()) {
      std::cerr << "tessera server: this PostgreSQL store is new and its first admin token must go somewhere: "
                   "give --admin-token-file PATH (a file that does not exist yet, written 0600)\n";
      return 2;
    }
    if (Status st = make_file_private(token_path, warn); !st.ok()) {
      std::cerr << "tessera server: " << st.message() << "\n";
      return 1;
    }
    const std::string token = new_token();
    WriteBatch b;
    b.tokens.push_back(TokenRow{sha256_hex(token), "admin", "admin", "", int64_t(std::time(nullptr)), false, ""});
    std::error_code ec;
    if (embedded && o.admin_token_file.empty()) std::filesystem::remove(token_path, ec);
    if (Status st = write_admin_token(token_path, token); !st.ok()) {
      std::cerr << "tessera server: " << st.message() << "\n";
      return 1;
    }
    if (Status st = (*store)->write_sync(std::move(b)); !st.ok()) {
      std::cerr << "tessera server: store: " << st.message() << "\n";
      return 1;
    }
    spdlog::info("event=admin_token_created path={}", token_path);
  } else if (embedded) {
    if (Status st = make_file_private(token_path, warn); !st.ok()) {
      std::cerr << "tessera server: " << st.message() << "\n";
      return 1;
    }
  }

  ControllerOptions copt;
  copt.agents_required = !o.agentless;
  copt.viewers_see_job_details = o.viewers_see_job_details;
  copt.heartbeat_interval_ms = o.heartbeat_interval_ms;
  copt.agent_timeout_ms = o.agent_timeout_ms;
  copt.task_lease_ms = o.task_lease_ms;
  auto controller = Controller::start(*cfg, store->get(), copt);
  if (!controller.ok()) {
    std::cerr << "tessera server: " << controller.error().message << "\n";
    return 1;
  }
  auto reload = [&](const std::string& who) -> Status {
    auto next = load_server_config(o.config_path);
    if (!next.ok()) {
      spdlog::warn("event=reload_refused by={} reason=\"{}\"", who, next.error().message);
      return invalid_argument("reload refused, the old config stays: " + next.error().message);
    }
    Status st = (*controller)->reload(std::move(*next), who);
    if (!st.ok()) {
      spdlog::warn("event=reload_refused by={} reason=\"{}\"", who, st.message());
      return Error{st.error().code, "reload refused, the old config stays: " + st.message()};
    }
    spdlog::info("event=config_reloaded by={} path={}", who, o.config_path.empty() ? "(built-in)" : o.config_path);
    return {};
  };
  HttpApi api(**controller, reload);
  if (standby) standby->stop();  // frees the ports for the API, which binds them at once
  if (Status st = api.start(http); !st.ok()) {
    std::cerr << "tessera server: " << st.message() << "\n";
    return 1;
  }
  spdlog::info("event=listening address={}:{} data={} config=\"{}\" cluster=\"{}\"", http.host, api.port(), where->describe(),
               o.config_path.empty() ? "(built-in)" : o.config_path, describe_config(*cfg));
  if (api.agent_port() >= 0)
    spdlog::info("event=agent_listener address={}:{} (agents' --server)", http.agent_host, api.agent_port());
  if (o.agentless) {  // say why jobs never run, once at start (each placed job's reason says it too)
    std::cout << "--agentless: no agent runs tasks on this server (placement only): jobs are placed and shown "
                 "running but never execute, and end only when cancelled. To run them, start the server without "
                 "--agentless with an agent on each node (docs/agent.md), or use `tessera up`."
              << std::endl;
    spdlog::warn("event=agentless reason=\"{}\"", kAgentlessReason);
  }
  if (!announced) std::cout << "tessera server listening on http://" << http.host << ":" << api.port() << std::endl;
  if (lease) std::cout << "tessera server leads (epoch " << lease->epoch() << ")" << std::endl;
  if (!o.agentless)
    spdlog::info("event=waiting_for_agents nodes={} heartbeat_ms={} timeout_ms={} (nodes take work once their agent registers)",
                 cfg->nodes.size(), o.heartbeat_interval_ms, o.agent_timeout_ms);
  if (o.on_listening) o.on_listening(api.port());

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      (void)reload("SIGHUP");
      continue;
    }
    spdlog::info("event=stopping signal={}", sig);
    break;
  }
  if (o.on_stopping) o.on_stopping();
  api.stop();
  controller->reset();
  (*store)->flush();
  keeper.reset();
  if (lease) lease->release();  // a standby takes over at once
  spdlog::info("event=stopped");
  return 0;
}

}  // namespace tessera::server
