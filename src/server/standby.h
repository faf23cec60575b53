// What a controller serves while another one leads (docs/ha.md): on its API listener and on its
// agents' listener, /healthz answers 200 (the process is alive, role "standby"), /readyz answers 503
// with the leader, and every other request is redirected (307, so a POST stays a POST with its
// body) to the same path on the leader's URL (agents' listener: the leader's agents' URL). While no
// controller leads, those requests get 503 "no leader yet". Bodies are read within the usual limits
// and dropped.
// Thread-safety: set_leader from any thread; start/stop from one thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "server/http_api.h"
#include "server/http_server.h"
#include "server/leader_lease.h"

namespace tessera::server {

class StandbyServer {
 public:
  // Binds the listeners `o` names (port 0: any free port, see port()).
  Status start(const HttpOptions& o);
  void set_leader(const LeaderInfo& leader);
  // This controller holds the lease and is loading its state: requests other than /healthz and
  // /readyz get 503 "retry in a moment" rather than a redirect to itself.
  void taking_over();
  int port() const { return port_; }
  int agent_port() const { return agent_port_; }
  void stop();

 private:
  void routes(HttpServer& s, bool agents);
  mutable std::mutex mu_;
  LeaderInfo leader_;
  bool taking_over_ = false;
  std::unique_ptr<HttpServer> server_, agent_server_;
  int port_ = 0, agent_port_ = -1;
};

}  // namespace tessera::server
