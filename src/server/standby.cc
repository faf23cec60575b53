// The standby's listeners (standby.h).
#include "server/standby.h"

#include <nlohmann/json.hpp>

namespace tessera::server {

void StandbyServer::set_leader(const LeaderInfo& leader) {
  std::lock_guard lock(mu_);
  leader_ = leader;
}

void StandbyServer::taking_over() {
  std::lock_guard lock(mu_);
  taking_over_ = true;
}

void StandbyServer::routes(HttpServer& s, bool agents) {
  using Json = nlohmann::json;
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(Json{{"status", "ok"}, {"role", "standby"}}.dump(), "application/json");
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    LeaderInfo l;
    {
      std::lock_guard lock(mu_);
      l = leader_;
    }
    res.status = 503;
    Json body{{"ready", false}, {"role", "standby"}};
    if (l.live) body["leader"] = Json{{"url", l.url}, {"agent_url", l.agent_url}, {"epoch", l.epoch}, {"holder", l.holder}};
    res.set_content(body.dump(), "application/json");
  });
  auto redirect = [this, agents](const httplib::Request& req, httplib::Response& res) {
    LeaderInfo l;
    bool mine = false;
    {
      std::lock_guard lock(mu_);
      l = leader_;
      mine = taking_over_;
    }
    if (mine) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(Json{{"error", {{"code", "unavailable"},
                                      {"message", "this controller is becoming the leader (loading its state); retry in a moment"}}}}
                          .dump(),
                      "application/json");
      return;
    }
    const std::string& base = agents ? l.agent_url : l.url;
    if (!l.live || base.empty()) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(Json{{"error", {{"code", "unavailable"},
                                      {"message", "this controller is a standby and no controller leads yet; retry shortly"}}}}
                          .dump(),
                      "application/json");
      return;
    }
    std::string target = base + req.path;
    if (!req.params.empty()) {
      target += '?';
      bool first = true;
      for (const auto& [k, v] : req.params) {
        if (!first) target += '&';
        first = false;
        target += httplib::detail::encode_query_param(k) + "=" + httplib::detail::encode_query_param(v);
      }
    }
    res.status = 307;
    res.set_header("Location", target);
    res.set_content(Json{{"error", {{"code", "not_leader"}, {"message", "this controller is a standby; the leader is " + base}}},
                         {"leader", base}}
                        .dump(),
                    "application/json");
  };
  s.Get(".*", redirect);
  s.Post(".*", redirect);
  s.Delete(".*", redirect);
}

Status StandbyServer::start(const HttpOptions& o) {
  constexpr int kWorkers = 4;  // redirects and probes only
  HttpServerOptions so = api_listener_options(o);
  so.workers = kWorkers;
  server_ = std::make_unique<HttpServer>();
  routes(*server_, false);
  if (Status st = server_->start(so); !st.ok()) return st;
  port_ = server_->port();
  if (o.agent_port >= 0) {
    HttpServerOptions ao = agent_listener_options(o);
    ao.workers = kWorkers;
    agent_server_ = std::make_unique<HttpServer>();
    routes(*agent_server_, true);
    if (Status st = agent_server_->start(ao); !st.ok()) return invalid_argument("--agent-listen: " + st.message());
    agent_port_ = agent_server_->port();
  }
  return {};
}

void StandbyServer::stop() {
  if (agent_server_) agent_server_->stop();
  if (server_) server_->stop();
  agent_server_.reset();
  server_.reset();
}

}  // namespace tessera::server
