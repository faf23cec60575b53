// Route groups of the HTTP API that live in their own files (issue 7): reports (chargeback, usage),
// Prometheus metrics, and the web portal's static files. HttpApi::routes() calls each register_*.
// Handlers run on the HTTP thread pool and must be thread-safe (they reach state through the
// Controller, which serialises it).
#pragma once

#include <functional>
#include <optional>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "server/auth.h"
#include "server/controller.h"
#include "server/http_server.h"

namespace tessera::server {

// The bearer token's principal, or nullopt after an error answer was sent (401/403).
using Authenticator = std::function<std::optional<Principal>(const httplib::Request&, httplib::Response&)>;

// The API's answer shapes (docs/api.md): JSON body with a status, or the one error shape.
void reply_json(httplib::Response& res, int status, const nlohmann::json& body);
void reply_error(httplib::Response& res, const Error& e);

// GET /api/v1/reports/chargeback, GET /api/v1/reports/usage (server/report_routes.cc).
void register_report_routes(HttpServer& s, Controller& c, const Authenticator& auth);
// GET /metrics and GET /api/v1/utilisation (server/metrics_routes.cc).
void register_metrics_routes(HttpServer& s, Controller& c, const Authenticator& auth);
// Every request once answered, with its handling time: API latency by route and code.
void observe_request(const httplib::Request& req, const httplib::Response& res, double seconds);
// The same request once its answer is sent (HttpServer::set_sent_observer): time to the last byte.
void observe_request_sent(const httplib::Request& req, const httplib::Response& res, double seconds);
// The portal: / and its static assets (server/portal_routes.cc).
void register_portal_routes(HttpServer& s);

}  // namespace tessera::server
