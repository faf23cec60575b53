// The CLI's HTTP + JSON client of the Tessera REST API: see api_client.h. One instance per thread.
#include "cli/api_client.h"

#include <httplib.h>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera::cli {
namespace {

// Why a TCP connection to host:port fails, in words ("connection refused", "unknown host ..."):
// cpp-httplib reports only that it failed, so the connect is tried once more here.
std::string connect_failure(const std::string& host, int port, int timeout_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return "unknown host '" + host + "' (" + gai_strerror(rc) + ")";
  std::string why = "connection failed";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, timeout_s * 1000) <= 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof err;
          if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
    }
    ::close(fd);
    if (err == 0) {
      why = "the connection dropped (the server may have just stopped)";
      break;
    }
    why = err == ECONNREFUSED ? std::string("connection refused") : std::string(std::strerror(err));
  }
  freeaddrinfo(res);
  return why;
}

}  // namespace

ApiClient::~ApiClient() = default;

Result<std::unique_ptr<ApiClient>> ApiClient::create(const ClientOptions& o) {
  auto url = parse_server_url(o.server);
  if (!url.ok()) return url.error();
  std::unique_ptr<ApiClient> c(new ApiClient());
  c->base_ = url->base();
  c->host_ = url->host;
  c->port_ = url->port;
  c->has_token_ = !o.token.empty();
  c->read_timeout_s_ = o.read_timeout_s;
  c->connect_timeout_s_ = o.connect_timeout_s;
  c->http_ = std::make_unique<httplib::Client>(c->base_);  // http or https (system CA certificates)
  c->http_->set_connection_timeout(o.connect_timeout_s, 0);
  c->http_->set_read_timeout(o.read_timeout_s, 0);
  c->http_->set_write_timeout(o.read_timeout_s, 0);
  c->http_->set_url_encode(false);  // callers encode query values with url_encode()
  c->http_->set_tcp_nodelay(true);  // a request's headers and body go out at once (no 40 ms Nagle wait)
  if (c->has_token_) c->http_->set_bearer_token_auth(o.token);
  return c;
}

Error ApiClient::transport_error(int err) const {
  std::string why;
  switch (static_cast<httplib::Error>(err)) {
    case httplib::Error::Connection:
      why = connect_failure(host_, port_, connect_timeout_s_);
      break;
    case httplib::Error::ConnectionTimeout:
      why = "no connection within " + std::to_string(connect_timeout_s_) + " s (is the host right and reachable?)";
      break;
    case httplib::Error::Read:
      why = "no complete answer within " + std::to_string(read_timeout_s_) +
            " s (the server is slow or stopped; raise --timeout or retry)";
      break;
    case httplib::Error::Write: why = "the connection broke while sending the request"; break;
    case httplib::Error::Canceled: why = "the transfer was aborted"; break;
    case httplib::Error::SSLConnection: why = "the TLS handshake failed (does the server speak https on this port?)"; break;
    case httplib::Error::SSLServerVerification:
      why = "its TLS certificate could not be verified against the system's CA certificates";
      break;
    default: why = "HTTP error " + httplib::to_string(static_cast<httplib::Error>(err)); break;
  }
  if (static_cast<httplib::Error>(err) == httplib::Error::Canceled) return {ErrorCode::kInternal, why};
  return {ErrorCode::kFailedPrecondition,
          "cannot reach the Tessera server at " + base_ + ": " + why +
              "; start it with `tessera server --data DIR` or set TESSERA_SERVER (or --server URL)"};
}

Error ApiClient::answer_error(int status, std::string_view body) const {
  std::string msg = format_server_error(status, body);
  if (status == 401)
    msg += has_token_ ? "; the token is unknown or revoked: check --token / --token-file / TESSERA_TOKEN"
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

Result<ApiResponse> ApiClient::get(const std::string& path) {
  auto res = http_->Get(path);
  if (!res) return transport_error(static_cast<int>(res.error()));
  return finish(res->status, res->body);
}

Result<ApiResponse> ApiClient::post(const std::string& path, const nlohmann::json& body,
                                    const std::vector<std::pair<std::string, std::string>>& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  auto res = http_->Post(path, h, body.dump(), "application/json");
  if (!res) return transport_error(static_cast<int>(res.error()));
  return finish(res->status, res->body);
}

Status ApiClient::download(const std::string& path, const std::function<bool(const char*, size_t)>& sink,
                           std::map<std::string, std::string>* headers) {
  int status = 0;
  std::string error_body;
  bool sink_failed = false;
  auto res = http_->Get(
      path,
      [&](const httplib::Response& r) {
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
  if (!res) return transport_error(static_cast<int>(res.error()));
  if (res->status < 200 || res->status >= 300)
    return answer_error(res->status, error_body.empty() ? res->body : error_body);
  return {};
}

}  // namespace tessera::cli
