// The REST API of `tessera server` (docs/api.md) over cpp-httplib: routing, bearer-token
// authentication, body limits, JSON/YAML bodies, and one error shape for every failure. Handlers run
// on the HTTP thread pool; they parse and check requests there and hand the rest to the Controller
// (which owns the state). Thread-safe. The Controller must outlive the HttpApi.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "server/controller.h"

namespace httplib {
class Server;
}

namespace tessera::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8420;               // 0 = any free port (see HttpApi::port)
  int threads = 64;              // handler threads (submissions wait for durability on them)
  size_t max_body_bytes = 1 << 20;
};

class HttpApi {
 public:
  // `reload` re-reads the config file (POST /admin/reload); `backup` writes an online copy to a path.
  HttpApi(Controller& controller, std::function<Status(const std::string& who)> reload);
  ~HttpApi();
  // Binds and starts serving on a background thread. Errors name the address and the cause.
  Status start(const HttpOptions& options);
  int port() const { return port_; }
  void stop();

 private:
  void routes();
  Controller& controller_;
  std::function<Status(const std::string&)> reload_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::string backup_dir_;
};

// HTTP status for an error code (400, 401, 403, 404, 409, 500, 503).
int http_status(ErrorCode code);
// The error body: {"error": {"code", "message", "field"?}}; the field is the message's leading path
// ("resources.gpus: must be ..." -> "resources.gpus").
std::string error_body(const Error& e);

}  // namespace tessera::server
