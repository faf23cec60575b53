// `tessera server`: wires the config, the store, the controller and the HTTP API together, writes
// the first admin token, reloads the config on SIGHUP (a bad one is refused and the old kept), and
// stops cleanly on SIGTERM/SIGINT. Without --config it runs a small built-in cluster (default_config_yaml).
#pragma once

#include <functional>
#include <string>

#include "config/cluster_config.h"
#include "core/status.h"
#include "server/store.h"

namespace tessera::server {

struct ServerOptions {
  std::string data_dir;  // --data: a directory (SQLite), sqlite:DIR, or a PostgreSQL DSN (StoreLocation)
  // Where the first start writes the admin token (created 0600, must not exist). Default: DIR/admin.token
  // for SQLite; required on the first start with PostgreSQL.
  std::string admin_token_file;
  // PostgreSQL only (docs/ha.md): the lease a leader renews every lease_ms / 5, and the URLs standbys
  // redirect clients and agents to (default http://HOST:PORT of --listen and --agent-listen).
  int64_t lease_ms = 5000;
  std::string advertise_url;
  std::string advertise_agent_url;
  std::string listen = "127.0.0.1:8420";  // HOST:PORT; port 0 = any free port (printed)
  std::string config_path;                // empty = the built-in default
  int http_threads = 64;
  // Agents' own listener, HOST:PORT ("" = none: agents use --listen). Point agents' --server here.
  std::string agent_listen;
  int max_connections = 4096;       // open HTTP connections in all, per listener
  int max_connections_per_ip = 0;   // 0 = no cap per client address
  int idle_timeout_s = 30;          // an HTTP connection silent this long is closed
  bool viewers_see_job_details = false;  // viewers may read jobs' commands, environments and logs
  std::string log_level = "info";
  // The check of an existing store at start (--check-store): quick, or full (also every index).
  StoreCheck store_check = StoreCheck::kQuick;
  // Agents (docs/agent.md). agentless: nodes are ready as configured and nothing runs tasks.
  bool agentless = false;
  int64_t heartbeat_interval_ms = 5000;
  int64_t agent_timeout_ms = 15000;
  int64_t task_lease_ms = 0;  // 0 = max(60 s, 4 x agent_timeout_ms) (ControllerOptions)
  // Embedding (`tessera up`): a call once the API listens (its port), and one before the server
  // stops (after SIGINT/SIGTERM).
  std::function<void(int port)> on_listening;
  std::function<void()> on_stopping;
};

// The built-in cluster: 4 nodes of 8 A100-80GB (two with MIG on), queues default/team-a/team-b.
const char* default_config_yaml();
Result<config::ClusterConfig> load_server_config(const std::string& path);
// A one-paragraph summary of a valid config (for --check-config).
std::string describe_config(const config::ClusterConfig& c);
// Runs until SIGTERM or SIGINT. Returns the process exit status (0 = clean stop).
int run_server(const ServerOptions& options);

}  // namespace tessera::server
