// The CLI's HTTP + JSON client of the Tessera REST API: see api_client.h. One instance per thread.
#include "cli/api_client.h"

#include <algorithm>

namespace tessera::cli {

ApiClient::~ApiClient() = default;

Result<std::unique_ptr<ApiClient>> ApiClient::create(const ClientOptions& o) {
  std::unique_ptr<ApiClient> c(new ApiClient());
  size_t start = 0;
  for (;;) {
    const size_t comma = o.server.find(',', start);
    const std::string one = o.server.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto url = parse_server_url(one);
    if (!url.ok()) return url.error();
    c->servers_.push_back(*url);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  c->token_ = o.token;
  c->read_timeout_s_ = o.read_timeout_s;
  c->connect_timeout_s_ = o.connect_timeout_s;
  c->use(c->servers_.front());
  return c;
}

void ApiClient::use(const ServerUrl& url) {
  base_ = url.base();
  http::Target t;
  t.tls = url.scheme == "https";  // the system's CA certificates (http_tls.cc)
  t.host = url.host;
  t.port = url.port;
  t.connect_timeout_s = connect_timeout_s_;
  t.read_timeout_s = read_timeout_s_;
  t.write_timeout_s = read_timeout_s_;
  http_ = std::make_unique<http::Client>(std::move(t));
}

http::Error ApiClient::send(const http::Request& req, http::Response* res,
                            const std::function<bool(const http::Response&)>& on_headers,
                            const std::function<bool(const char*, size_t)>& on_data) {
  std::vector<std::string> tried;
  const auto next_untried = [&]() -> const ServerUrl* {
    for (const ServerUrl& u : servers_)
      if (std::find(tried.begin(), tried.end(), u.base()) == tried.end()) return &u;
    return nullptr;
  };
  for (;;) {
    tried.push_back(base_);
    *res = http::Response{};
    // Only a 2xx body goes to on_data: a redirect's or an error's is read whole.
    bool pass_body = true;
    const http::Error e = http_->send(
        req, res,
        [&](const http::Response& r) {
          pass_body = r.status >= 200 && r.status < 300;
          return !on_headers || on_headers(r);
        },
        on_data ? std::function<bool(const char*, size_t)>([&](const char* d, size_t n) {
          if (pass_body) return on_data(d, n);
          if (res->body.size() < 64 * 1024) res->body.append(d, n);
          return true;
        })
                : std::function<bool(const char*, size_t)>());
    // No connection was made: nothing was sent, so another controller may take the request.
    if (e == http::Error::kConnection || e == http::Error::kConnectionTimeout) {
      if (const ServerUrl* u = next_untried()) {
        use(*u);
        continue;
      }
      return e;
    }
    if (e != http::Error::kNone) return e;
    if (res->status == 307) {  // a standby names the leader
      std::string loc = res->header("Location");
      const size_t scheme = loc.find("://");
      if (const size_t path = loc.find('/', scheme == std::string::npos ? 0 : scheme + 3); path != std::string::npos)
        loc.resize(path);
      auto leader = parse_server_url(loc);
      if (leader.ok() && std::find(tried.begin(), tried.end(), leader->base()) == tried.end()) {
        use(*leader);
        continue;
      }
    }
    if (res->status == 503 && res->body.find("standby") != std::string::npos) {  // no leader yet
      if (const ServerUrl* u = next_untried()) {
        use(*u);
        continue;
      }
    }
    return e;
  }
}

Error ApiClient::transport_error(http::Error err) const {
  std::string why;
  switch (err) {
    case http::Error::kConnection: why = http_->detail(); break;
    case http::Error::kConnectionTimeout:
      why = "no connection within " + std::to_string(connect_timeout_s_) + " s (is the host right and reachable?)";
      break;
    case http::Error::kRead:
      why = "no complete answer within " + std::to_string(read_timeout_s_) +
            " s (the server is slow or stopped; raise --timeout or retry)";
      break;
    case http::Error::kClosed:
      why = "the connection ended before a complete answer (the server stopped, or it is not a Tessera server: "
            "an https one?)";
      break;
    case http::Error::kWrite: why = "the connection broke while sending the request"; break;
    case http::Error::kCanceled: why = "the transfer was aborted"; break;
    case http::Error::kTlsConnection: why = "the TLS handshake failed (does the server speak https on this port?)"; break;
    case http::Error::kTlsVerification:
      why = "its TLS certificate could not be verified against the system's CA certificates";
      if (!http_->detail().empty()) why += " (" + http_->detail() + ")";
      break;
    case http::Error::kNoTls: why = http_->detail(); break;
    case http::Error::kBadAnswer: why = "the answer is not HTTP/1.x (is it a Tessera server?)"; break;
    case http::Error::kNone: why = "no answer"; break;
  }
  if (err == http::Error::kCanceled) return {ErrorCode::kInternal, why};
  return {ErrorCode::kFailedPrecondition,
          "cannot reach the Tessera server at " + base_ + ": " + why +
              "; start it with `tessera server --data DIR` or set TESSERA_SERVER (or --server URL)"};
}

Error ApiClient::answer_error(int status, std::string_view body) const {
  std::string msg = format_server_error(status, body);
  if (status == 401)
    msg += !token_.empty() ? "; the token is unknown or revoked: check --token / --token-file / TESSERA_TOKEN"
                           : "; no token given: pass --token TOKEN, --token-file DATA_DIR/admin.token or set TESSERA_TOKEN";
  return {status == 404 ? ErrorCode::kNotFound : ErrorCode::kFailedPrecondition, msg};
}

Result<ApiResponse> ApiClient::finish(int status, const std::string& body) const {
  if (status < 200 || status >= 300) return answer_error(status, body);
  ApiResponse r;
  r.status = status;
  if (body.empty()) return r;
  r.body = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (r.body.is_discarded())
    return Error{ErrorCode::kInternal, "the server at " + base_ + " answered " + std::to_string(status) +
                                           " with a body that is not JSON: " + truncate(body, 200)};
  return r;
}

http::Request ApiClient::request(const char* method, const std::string& path) const {
  http::Request r;
  r.method = method;
  r.path = path;
  if (!token_.empty()) r.headers.emplace_back("Authorization", "Bearer " + token_);
  return r;
}

Result<ApiResponse> ApiClient::get(const std::string& path) {
  http::Response res;
  if (const http::Error e = send(request("GET", path), &res); e != http::Error::kNone) return transport_error(e);
  return finish(res.status, res.body);
}

Result<ApiResponse> ApiClient::post(const std::string& path, const nlohmann::json& body,
                                    const std::vector<std::pair<std::string, std::string>>& headers) {
  http::Request req = request("POST", path);
  for (const auto& [k, v] : headers) req.headers.emplace_back(k, v);
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = body.dump();
  http::Response res;
  if (const http::Error e = send(req, &res); e != http::Error::kNone) return transport_error(e);
  return finish(res.status, res.body);
}

Status ApiClient::download(const std::string& path, const std::function<bool(const char*, size_t)>& sink,
                           std::map<std::string, std::string>* headers) {
  int status = 0;
  std::string error_body;
  bool sink_failed = false;
  http::Response res;
  const http::Error e = send(
      request("GET", path), &res,
      [&](const http::Response& r) {
        status = r.status;
        if (headers)
          for (const auto& [k, v] : r.headers) (*headers)[k] = v;
        return true;
      },
      [&](const char* data, size_t len) {
        if (status < 200 || status >= 300) {
          if (error_body.size() < 64 * 1024) error_body.append(data, len);
          return true;
        }
        if (!sink(data, len)) {
          sink_failed = true;
          return false;
        }
        return true;
      });
  if (sink_failed) return Error{ErrorCode::kInternal, "the download was stopped by its receiver"};
  if (e != http::Error::kNone) return transport_error(e);
  if (res.status < 200 || res.status >= 300) return answer_error(res.status, error_body.empty() ? res.body : error_body);
  return {};
}

}  // namespace tessera::cli
