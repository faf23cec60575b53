#include "server/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <unistd.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace tessera::server {

// One request: filled on the I/O thread while it arrives, handled on a worker, answered on the I/O
// thread. Owned by MHD's per-request pointer; freed when MHD reports the request completed.
struct HttpServer::Call {
  MHD_Connection* connection = nullptr;
  httplib::Request req;
  httplib::Response res;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool answered_early = false;  // pre-routing (or a limit) answered before the body was read
  bool dispatched = false;      // handed to a worker (the connection is suspended)
  std::atomic<bool> done{false};  // the worker's answer is ready
  bool body_too_large = false;
  std::function<void(httplib::Response&)> fill;  // a deferred answer to build on a worker
};

// A deferred request's link: `call` is set until it is answered. The mutex makes the answer
// exactly-once and lets stop() wait for an answer in progress.
struct HttpResponder::Shared {
  std::mutex mu;
  HttpServer* server = nullptr;
  HttpServer::Call* call = nullptr;
};

namespace {

MHD_Result collect_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<httplib::Request*>(cls)->headers.emplace(key ? key : "", value ? value : "");
  return MHD_YES;
}

MHD_Result collect_param(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<httplib::Request*>(cls)->params.emplace(key ? key : "", value ? value : "");
  return MHD_YES;
}

std::string client_address(MHD_Connection* c) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return "";
  char host[INET6_ADDRSTRLEN] = {0};
  const sockaddr* sa = info->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, host, sizeof host);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, host, sizeof host);
  return host;
}

// Queues `res` on the connection (I/O thread only). Content-Length is MHD's to set.
MHD_Result queue(MHD_Connection* c, const httplib::Response& res) {
  MHD_Response* r = MHD_create_response_from_buffer(res.body.size(), const_cast<char*>(res.body.data()), MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  for (const auto& [k, v] : res.headers)
    if (strcasecmp(k.c_str(), "Content-Length") != 0) MHD_add_response_header(r, k.c_str(), v.c_str());
  const MHD_Result ok = MHD_queue_response(c, unsigned(res.status > 0 ? res.status : 200), r);
  MHD_destroy_response(r);
  return ok;
}

void answer_plain(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  // A minimal JSON error, for the rare answers given before the API's own error handler can run.
  std::string m;
  for (char ch : message) m += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
  res.set_content("{\"error\":{\"code\":\"" + code + "\",\"message\":\"" + m + "\"}}", "application/json");
}

// MHD's own messages (a client that closed mid-request, a refused connection): at debug level, as
// a hostile client must not be able to fill the log.
void mhd_log(void*, const char* fmt, va_list ap) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string text(buf);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  spdlog::debug("event=http_server message=\"{}\"", text);
}

}  // namespace

// The MHD callbacks, with access to HttpServer's internals.
struct Access {
  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method,
                               const char*, const char* upload_data, size_t* upload_data_size, void** con_cls) {
    auto* self = static_cast<HttpServer*>(cls);
    auto* call = static_cast<HttpServer::Call*>(*con_cls);
    if (!call) {  // the headers are in; the body (if any) is not read yet
      call = new HttpServer::Call;
      *con_cls = call;
      call->connection = connection;
      call->req.method = method ? method : "";
      call->req.path = url ? url : "";
      call->req.remote_addr = client_address(connection);
      MHD_get_connection_values(connection, MHD_HEADER_KIND, collect_header, &call->req);
      MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, collect_param, &call->req);
      const std::string length = call->req.get_header_value("Content-Length");
      const uint64_t announced = length.empty() ? 0 : length.size() > 18 ? UINT64_MAX : std::strtoull(length.c_str(), nullptr, 10);
      if (self->pre_routing_ && self->pre_routing_(call->req, call->res) == HttpServer::Hook::kAnswered) {
        call->answered_early = true;  // e.g. no token: refused before anything is read
      } else if (announced > self->options_.max_body_bytes) {
        // Too large. A body up to 16 times the limit is read and dropped (no memory kept), so that a
        // client that writes its whole body before reading gets the 413; a larger one is refused now
        // and the connection closed.
        call->body_too_large = true;
        if (announced > 16 * uint64_t(self->options_.max_body_bytes)) {
          answer_plain(call->res, 413, "invalid_argument",
                       "body: larger than the " + std::to_string(self->options_.max_body_bytes >> 10) + " KiB limit; split the request");
          call->answered_early = true;
        }
      }
      if (call->answered_early) {
        self->finish(call);
        return queue(connection, call->res);  // the unread body is discarded and the connection closed
      }
      return MHD_YES;
    }
    if (*upload_data_size > 0) {  // a piece of the body
      if (call->body_too_large || call->req.body.size() + *upload_data_size > self->options_.max_body_bytes) {
        call->body_too_large = true;
        std::string().swap(call->req.body);  // dropped, not kept
      } else {
        call->req.body.append(upload_data, *upload_data_size);
      }
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (!call->dispatched) {  // the whole request is in
      if (call->body_too_large) {
        answer_plain(call->res, 413, "invalid_argument",
                     "body: larger than the " + std::to_string(self->options_.max_body_bytes >> 10) + " KiB limit; split the request");
        self->finish(call);
        return queue(connection, call->res);
      }
      call->dispatched = true;
      MHD_suspend_connection(connection);
      self->dispatch(call);
      return MHD_YES;
    }
    if (call->done.load()) return queue(connection, call->res);  // resumed with the answer
    return MHD_YES;
  }

  static void on_completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode code) {
    auto* self = static_cast<HttpServer*>(cls);
    auto* call = static_cast<HttpServer::Call*>(*con_cls);
    if (call && self->sent_ && code == MHD_REQUEST_TERMINATED_COMPLETED_OK && call->res.status > 0) {
      try {
        self->sent_(call->req, call->res, std::chrono::duration<double>(std::chrono::steady_clock::now() - call->started).count());
      } catch (...) {
      }
    }
    delete call;
    *con_cls = nullptr;
  }
};

HttpServer::HttpServer() = default;
HttpServer::~HttpServer() { stop(); }

void HttpServer::route(const std::string& method, const std::string& pattern, HttpHandler h) {
  routes_.push_back(Route{method, std::regex(pattern), std::move(h), nullptr});
}

void HttpServer::PostDeferred(const std::string& pattern, DeferredHandler h) {
  routes_.push_back(Route{"POST", std::regex(pattern), nullptr, std::move(h)});
}

bool HttpResponder::answer(httplib::Response res) {
  std::lock_guard lock(s_->mu);
  HttpServer::Call* call = s_->call;
  if (!call) return false;
  s_->call = nullptr;
  call->res = std::move(res);
  s_->server->finish(call);
  s_->server->complete(call);
  return true;
}

bool HttpResponder::answer_with(std::function<void(httplib::Response&)> fill) {
  std::lock_guard lock(s_->mu);
  HttpServer::Call* call = s_->call;
  if (!call) return false;
  s_->call = nullptr;
  call->fill = std::move(fill);
  s_->server->queue_fill(call);
  return true;
}

void HttpServer::queue_fill(Call* call) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(call);
      ++in_flight_;
      cv_.notify_one();
      return;
    }
  }
  run(call);  // the workers may be gone: fill it here
  complete(call);
}

bool HttpResponder::answered() const {
  std::lock_guard lock(s_->mu);
  return s_->call == nullptr;
}

HttpResponder::~HttpResponder() {
  if (!s_) return;
  httplib::Response res;
  answer_plain(res, 503, "unavailable", "the request was dropped unanswered; retry");
  answer(std::move(res));
}

void HttpServer::complete(Call* call) {
  call->done = true;
  MHD_resume_connection(call->connection);
}

const HttpServer::Route* HttpServer::find(Call& call) const {
  for (const Route& r : routes_)
    if (r.method == call.req.method && std::regex_match(call.req.path, call.req.matches, r.pattern)) return &r;
  return nullptr;
}

void HttpServer::dispatch(Call* call) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_ && queue_.size() < options_.max_waiting) {
      queue_.push_back(call);
      ++in_flight_;
      cv_.notify_one();
      return;
    }
  }
  answer_plain(call->res, 503, "unavailable", "the server is busy or stopping; retry shortly");
  call->res.set_header("Retry-After", "1");
  finish(call);
  complete(call);
}

bool HttpServer::run(Call* call) {
  std::shared_ptr<HttpResponder> responder;
  try {
    if (call->fill) {  // a deferred answer's body, built here
      auto fill = std::exchange(call->fill, nullptr);
      fill(call->res);
      finish(call);
      return true;
    }
    const Route* r = find(*call);
    if (r && r->deferred) {
      auto shared = std::make_shared<HttpResponder::Shared>();
      shared->server = this;
      shared->call = call;
      {
        std::lock_guard lock(mu_);
        if (deferred_.size() >= 64 && deferred_.size() >= 2 * deferred_pruned_)
          std::erase_if(deferred_, [](const auto& w) { return w.expired(); }), deferred_pruned_ = deferred_.size();
        deferred_.push_back(shared);
      }
      responder = std::make_shared<HttpResponder>(shared);
      r->deferred(call->req, responder);  // the responder answers (or, dropped, answers 503)
      return false;
    }
    if (r) {
      r->handler(call->req, call->res);
    } else {
      call->res.status = 404;
      for (const Route& other : routes_)
        if (std::regex_match(call->req.path, other.pattern)) call->res.status = 405;
    }
  } catch (const std::exception& e) {
    spdlog::error("event=handler_exception method={} path={} error=\"{}\"", call->req.method, call->req.path, e.what());
    if (responder) return internal_error(*responder), false;
    call->res = httplib::Response{};
    answer_plain(call->res, 500, "internal", "internal error (logged)");
  } catch (...) {
    spdlog::error("event=handler_exception method={} path={} error=unknown", call->req.method, call->req.path);
    if (responder) return internal_error(*responder), false;
    call->res = httplib::Response{};
    answer_plain(call->res, 500, "internal", "internal error (logged)");
  }
  finish(call);
  return true;
}

void HttpServer::internal_error(HttpResponder& responder) {
  httplib::Response res;
  answer_plain(res, 500, "internal", "internal error (logged)");
  responder.answer(std::move(res));
}

void HttpServer::finish(Call* call) {
  if (call->res.status <= 0) call->res.status = 200;
  if (call->res.status >= 400 && call->res.body.empty() && error_body_) {
    try {
      error_body_(call->req, call->res);
    } catch (...) {
    }
  }
  if (logger_) {
    try {
      logger_(call->req, call->res, std::chrono::duration<double>(std::chrono::steady_clock::now() - call->started).count());
    } catch (...) {
    }
  }
}

void HttpServer::worker_loop() {
  for (;;) {
    Call* call = nullptr;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || (stopping_ && in_flight_ == 0); });
      if (queue_.empty()) return;
      call = queue_.front();
      queue_.pop_front();
    }
    if (run(call)) complete(call);
    {
      std::lock_guard lock(mu_);
      --in_flight_;
    }
    cv_.notify_all();
  }
}

Status HttpServer::start(const HttpServerOptions& o) {
  options_ = o;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(o.port);
  if (getaddrinfo(o.host.empty() ? nullptr : o.host.c_str(), port_text.c_str(), &hints, &found) != 0 || !found)
    return invalid_argument("listen: cannot resolve " + o.host + " to an address of this machine");
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  const bool v6 = found->ai_family == AF_INET6;
  freeaddrinfo(found);
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (v6) flags |= MHD_USE_IPv6;
  daemon_ = MHD_start_daemon(
      flags, uint16_t(o.port), nullptr, nullptr, &Access::on_request, this,
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&addr),
      MHD_OPTION_CONNECTION_LIMIT, unsigned(o.max_connections),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, unsigned(o.max_connections_per_ip),
      MHD_OPTION_CONNECTION_TIMEOUT, unsigned(o.idle_timeout_s),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, size_t(o.header_memory_bytes),
      MHD_OPTION_LISTEN_BACKLOG_SIZE, unsigned(SOMAXCONN),
      MHD_OPTION_THREAD_POOL_SIZE, unsigned(std::max(1, o.io_threads)),
      MHD_OPTION_NOTIFY_COMPLETED, &Access::on_completed, this,
      MHD_OPTION_EXTERNAL_LOGGER, &mhd_log, nullptr,
      MHD_OPTION_END);
  if (!daemon_)
    return invalid_argument("listen: cannot bind " + o.host + ":" + port_text +
                            " (in use, or not an address of this machine); pick another with --listen HOST:PORT");
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  port_ = info ? int(info->port) : o.port;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  for (int i = 0; i < std::max(1, o.workers); ++i) workers_.emplace_back([this] { worker_loop(); });
  return {};
}

void HttpServer::stop() {
  if (!daemon_) return;
  // No new connections. The listening socket is then ours to close (MHD_stop_daemon leaves it open),
  // so that the port is free again once stop() returns.
  const MHD_socket listener = MHD_quiesce_daemon(daemon_);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // Workers answer what is queued and resume those connections, then exit; no connection stays
  // suspended when the daemon stops (MHD requires that).
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  // Deferred requests still open are answered now (an answer in progress is waited for).
  std::vector<std::weak_ptr<HttpResponder::Shared>> open;
  {
    std::lock_guard lock(mu_);
    open.swap(deferred_);
    deferred_pruned_ = 0;
  }
  for (const auto& w : open) {
    if (auto shared = w.lock()) {
      httplib::Response res;
      answer_plain(res, 503, "unavailable", "the server is stopping; retry shortly");
      res.set_header("Retry-After", "1");
      HttpResponder(shared).answer(std::move(res));
    }
  }
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
  if (listener != MHD_INVALID_SOCKET) ::close(listener);
}

}  // namespace tessera::server
