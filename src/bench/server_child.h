// The controller under test as a child process: `tessera server` (the given binary, by default the
// running one) started with its own data directory, a cluster config, a users' port and an agents'
// port on loopback; its output goes to DATA_DIR/../server.log. Reads what the benchmark reports from
// /proc/PID (CPU seconds, peak RSS) and the data directory (store size). Also a small blocking JSON
// client (keep-alive, TCP_NODELAY) for the users' API.
//
// Thread-safety: ServerChild is used from one thread; RestClient is one connection, one thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace httplib {
class Client;
}

namespace tessera::bench {

struct ServerChildOptions {
  std::string binary = "/proc/self/exe";
  std::string dir;          // work directory: the data directory is DIR/data, the log DIR/server.log
  std::string config_path;  // cluster YAML
  std::vector<std::string> args;  // more flags for `tessera server`
  // The store (`--data`): empty = SQLite in DIR/data; else e.g. postgres://... (the admin token goes
  // to DIR/admin.token once the server leads).
  std::string store;
  int start_timeout_s = 60;
  std::optional<int> nice;  // the child's nice value, when set (it may differ from the caller's)
};

class ServerChild {
 public:
  ~ServerChild();  // SIGKILL if still running
  static Result<std::unique_ptr<ServerChild>> start(const ServerChildOptions& o);

  int port() const { return port_; }
  int agent_port() const { return agent_port_; }
  pid_t pid() const { return pid_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& log_path() const { return log_path_; }
  bool running();
  double cpu_seconds() const;        // user + system, from /proc/PID/stat
  int64_t peak_rss_bytes() const;    // VmHWM
  int64_t rss_bytes() const;         // VmRSS
  int64_t store_bytes() const;       // every file under the data directory
  // SIGTERM, then SIGKILL after `grace_s`; returns the exit status text ("exit 0", "signal 9").
  std::string stop(int grace_s = 20);
  std::string log_tail(size_t bytes = 2000) const;

 private:
  ServerChild() = default;
  pid_t pid_ = -1;
  int port_ = 0, agent_port_ = 0;
  std::string admin_token_, data_dir_, log_path_;
};

// A free TCP port on 127.0.0.1 (bound, read, closed: a later bind may race, which is unlikely here).
int free_loopback_port();

struct RestReply {
  int status = 0;  // 0: no answer
  nlohmann::json body;
  std::string raw, error;
};

class RestClient {
 public:
  RestClient(int port, std::string token, int read_timeout_s = 60);
  ~RestClient();
  RestReply get(const std::string& path);
  RestReply post(const std::string& path, const std::string& body);
  // GET /metrics (text).
  std::string metrics_text();

 private:
  std::unique_ptr<httplib::Client> cli_;
  std::string token_;
};

}  // namespace tessera::bench
