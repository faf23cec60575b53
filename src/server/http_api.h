// The REST API of `tessera server` (docs/api.md) on HttpServer (libmicrohttpd): routing, bearer-token
// authentication before any body is read, body limits, JSON/YAML bodies checked to be UTF-8, and one
// error shape for every failure. Handlers run on the server's workers; they parse and check requests
// there and hand the rest to the Controller (which owns the state). Agents may have a listener of
// their own, so that users' connections never delay heartbeats. Thread-safe. The Controller must
// outlive the HttpApi.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "server/controller.h"
#include "server/http_server.h"
#include "server/route_groups.h"


namespace tessera::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8420;               // 0 = any free port (see HttpApi::port)
  int threads = 64;              // handler threads (submissions wait for durability on them)
  size_t max_body_bytes = 1 << 20;
  int max_connections = 4096;    // open connections in all
  int max_connections_per_ip = 0;  // 0 = no per-address cap
  int idle_timeout_s = 30;       // a connection silent this long is closed
  // Agents' own listener (the agent routes and /healthz only): -1 = none, 0 = any free port.
  std::string agent_host;        // "" = host
  int agent_port = -1;
  int agent_max_connections = 0;  // on the agents' listener; 0 = max_connections
};

class HttpApi {
 public:
  // `reload` re-reads the config file (POST /admin/reload).
  HttpApi(Controller& controller, std::function<Status(const std::string& who)> reload);
  ~HttpApi();
  // Binds and starts serving on background threads. Errors name the address and the cause.
  Status start(const HttpOptions& options);
  int port() const { return port_; }
  int agent_port() const { return agent_port_; }  // -1 without an agent listener
  void stop();

 private:
  void configure(HttpServer& s);     // error bodies, the checks before routing, the request log
  void routes(HttpServer& s);        // every route
  void agent_routes(HttpServer& s);  // what agents call, and /healthz
  Authenticator authenticator();
  Controller& controller_;
  std::function<Status(const std::string&)> reload_;
  std::unique_ptr<HttpServer> server_, agent_server_;
  int port_ = 0, agent_port_ = -1;
};

// What HttpApi's listeners run with (the standby's too, standby.h): the API's, and the agents' own
// (o.agent_port; fewer workers, smaller header memory, no per-address cap).
HttpServerOptions api_listener_options(const HttpOptions& o);
HttpServerOptions agent_listener_options(const HttpOptions& o);

// HTTP status for an error code (400, 401, 403, 404, 409, 500, 503).
int http_status(ErrorCode code);
// The error body: {"error": {"code", "message", "field"?}}; the field is the message's leading path
// ("resources.gpus: must be ..." -> "resources.gpus").
std::string error_body(const Error& e);

}  // namespace tessera::server
