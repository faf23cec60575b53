// The web portal's routes: the embedded files of web/ (server/portal_assets.h) at "/" (index.html)
// and "/assets/..." (content-hashed names, cached for a year), and index.html again for other
// extension-less paths outside /api, /metrics and /healthz (client-side routes such as /jobs/17).
// Anything else keeps the API's JSON 404 (the server's error handler writes it).
#include <string>
#include <string_view>
#include <unordered_map>

#include "server/portal_assets.h"
#include "server/route_groups.h"

namespace tessera::server {

namespace {

const PortalAsset* find_asset(std::string_view path) {
  static const auto* by_path = [] {
    auto* m = new std::unordered_map<std::string_view, const PortalAsset*>();
    for (const PortalAsset& a : portal_assets()) (*m)[a.path] = &a;
    return m;
  }();
  auto it = by_path->find(path);
  return it == by_path->end() ? nullptr : it->second;
}

// Same origin only: scripts, styles and fetches come from this server (the page needs no network
// beyond it); inline style attributes are used for bar widths and colours.
constexpr const char* kCsp =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

void send_asset(httplib::Response& res, const PortalAsset& a, bool immutable) {
  res.status = 200;
  res.set_header("Cache-Control", immutable ? "public, max-age=31536000, immutable" : "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (std::string_view(a.content_type).starts_with("text/html")) {
    res.set_header("Content-Security-Policy", kCsp);
    res.set_header("Referrer-Policy", "no-referrer");
  }
  res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.content_type);
}

void send_index(httplib::Response& res) {
  if (const PortalAsset* index = find_asset("/index.html")) return send_asset(res, *index, false);
  res.status = 404;  // the error handler answers with the JSON 404
}

}  // namespace

void register_portal_routes(HttpServer& s) {
  s.Get("/", [](const httplib::Request&, httplib::Response& res) { send_index(res); });
  s.Get("/index.html", [](const httplib::Request&, httplib::Response& res) { send_index(res); });
  s.Get(R"(/assets/[^/]+)", [](const httplib::Request& req, httplib::Response& res) {
    if (const PortalAsset* a = find_asset(req.path)) return send_asset(res, *a, true);
    res.status = 404;
    res.set_header("Cache-Control", "no-store");
    res.set_content("not found: " + req.path + " (the portal was rebuilt since this page loaded; reload it)\n",
                    "text/plain; charset=utf-8");
  });
  // Client-side routes: paths without a dot, except the API's, metrics and health.
  s.Get(R"(/(?!api(/|$)|metrics(/|$)|healthz(/|$)|assets(/|$))[^.]*)",
        [](const httplib::Request&, httplib::Response& res) { send_index(res); });
}

}  // namespace tessera::server
