// GET /metrics (Prometheus text format 0.0.4) and GET /api/v1/utilisation, plus the API request
// metrics every answered request feeds (observe_request, called by the HTTP layer's logger).
// /metrics needs no token, as Prometheus scrapes usually do: the listen address protects it
// (docs/metrics.md). The API metrics live in one process-wide registry (thread-safe).
#include <array>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/metrics.h"
#include "server/route_groups.h"

namespace tessera::server {

namespace {

struct ApiMetrics {
  metrics::Registry registry;
  metrics::CounterFamily* requests = nullptr;
  metrics::HistogramFamily* duration = nullptr;
  metrics::HistogramFamily* sent = nullptr;
  ApiMetrics() {
    auto c = registry.counter("tessera_api_requests_total",
                              "HTTP requests answered, by route pattern, method and status code.", {"route", "method", "code"});
    auto h = registry.histogram("tessera_api_request_duration_seconds",
                                "HTTP request handling time by route pattern, seconds.", {"route"},
                                metrics::latency_buckets());
    auto s = registry.histogram("tessera_api_request_sent_seconds",
                                "HTTP requests from their headers' arrival to their answer sent, by route pattern, seconds.",
                                {"route"}, metrics::latency_buckets());
    if (!c.ok() || !h.ok() || !s.ok()) std::abort();  // constant names: covered by the metrics tests
    requests = *c;
    duration = *h;
    sent = *s;
  }
};

ApiMetrics& api_metrics() {
  static ApiMetrics m;
  return m;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = i;
    while (j < path.size() && path[j] != '/') ++j;
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

// The route pattern of a request path, with ids replaced ("/api/v1/jobs/17/logs" ->
// "/api/v1/jobs/{id}/logs"); "other" for anything that is not a route of the API. Bounded: the
// result is always one of the fixed patterns below.
std::string route_pattern(std::string_view path) {
  const size_t q = path.find('?');
  if (q != std::string_view::npos) path = path.substr(0, q);
  const std::vector<std::string_view> seg = split_path(path);
  const size_t n = seg.size();
  if (n == 0) return "/";
  if (n == 1 && (seg[0] == "healthz" || seg[0] == "metrics")) return "/" + std::string(seg[0]);
  if (n < 3 || seg[0] != "api" || seg[1] != "v1") return "other";
  static const std::array<std::string_view, 6> kFlat = {"whoami", "jobs", "queues", "nodes", "tokens", "events"};
  const std::string_view top = seg[2];
  if (n == 3) {
    for (std::string_view f : kFlat)
      if (top == f) return "/api/v1/" + std::string(f);
    if (top == "utilisation") return "/api/v1/utilisation";
    return "other";
  }
  if (top == "jobs") {
    if (n == 4) return "/api/v1/jobs/{id}";
    if (n == 5 && (seg[4] == "cancel" || seg[4] == "priority" || seg[4] == "logs"))
      return "/api/v1/jobs/{id}/" + std::string(seg[4]);
    return "other";
  }
  if (top == "nodes" && n == 5 && (seg[4] == "cordon" || seg[4] == "drain" || seg[4] == "resume" || seg[4] == "interruption"))
    return "/api/v1/nodes/{node}/" + std::string(seg[4]);
  if (n == 4 && top == "admin" && (seg[3] == "backup" || seg[3] == "reload")) return "/api/v1/admin/" + std::string(seg[3]);
  if (n == 4 && top == "agent" && (seg[3] == "heartbeat" || seg[3] == "register")) return "/api/v1/agent/" + std::string(seg[3]);
  if (n == 4 && top == "reports" && (seg[3] == "chargeback" || seg[3] == "usage")) return "/api/v1/reports/" + std::string(seg[3]);
  return "other";
}

void observe_request(const httplib::Request& req, const httplib::Response& res, double seconds) {
  static const std::array<std::string_view, 7> kMethods = {"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"};
  std::string method = "other";
  for (std::string_view m : kMethods)
    if (req.method == m) method = std::string(m);
  const std::string code = res.status >= 100 && res.status <= 599 ? std::to_string(res.status) : "other";
  const std::string route = route_pattern(req.path);
  ApiMetrics& m = api_metrics();
  m.requests->inc({route, method, code});
  m.duration->observe({route}, seconds);
}

void observe_request_sent(const httplib::Request& req, const httplib::Response&, double seconds) {
  api_metrics().sent->observe({route_pattern(req.path)}, seconds);
}

void register_metrics_routes(HttpServer& s, Controller& c, const Authenticator& auth) {
  s.Get("/metrics", [&c](const httplib::Request&, httplib::Response& res) {
    std::vector<metrics::Family> families = c.metric_families();
    for (metrics::Family& f : api_metrics().registry.collect()) families.push_back(std::move(f));
    res.status = 200;
    res.set_content(metrics::render(std::move(families)), "text/plain; version=0.0.4; charset=utf-8");
  });

  // ?minutes=N (1..1440, default 60).
  s.Get("/api/v1/utilisation", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    int64_t minutes = 60;
    if (req.has_param("minutes")) {
      const std::string v = req.get_param_value("minutes");
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno == ERANGE)
        return reply_error(res, invalid_argument("minutes: must be an integer 1..1440, got \"" + v + "\""));
      minutes = int64_t(x);
    }
    auto r = c.utilisation(*p, minutes);
    if (!r.ok()) return reply_error(res, r.error());
    reply_json(res, 200, *r);
  });
}

}  // namespace tessera::server
