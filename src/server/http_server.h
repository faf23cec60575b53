// An HTTP/1.1 server that slow, idle or many clients cannot stall, on GNU libmicrohttpd (Debian's
// libmicrohttpd-dev). A few epoll threads do every socket's I/O, so an open connection costs a little
// memory, never a thread: a client that sends a header line every few seconds, or nothing at all,
// holds no worker. A request reaches a worker only once it has arrived whole; its connection is
// suspended meanwhile and resumed with the answer. Bounded everywhere: connections in all and per
// client address, header memory per connection, body size (announced with Content-Length; chunked
// bodies are refused with 411 before they are read; a body over the limit is 413, dropped unkept
// as it arrives, or refused at once when over 16 times the limit), requests waiting for a worker (503 beyond),
// and an idle connection is closed after `idle_timeout_s`.
//
// Routing is by regular expression over the decoded path (ECMAScript, whole path), first match in
// registration order, with httplib::Request/Response as the handlers' data (cpp-httplib's types, so
// routes read like before: req.matches, get_param_value, set_content). `pre_routing` runs on the I/O
// thread once the headers are in and before the body is read: it must be quick (e.g. look a token
// up) and may answer. Handlers run on workers and must be thread-safe; an exception a handler throws
// is answered 500 and logged, and the server goes on.
//
// A deferred route (PostDeferred) answers later, from any thread, through the HttpResponder it is
// given (a long poll: an agent's watch). Its connection stays suspended meanwhile and holds no worker.
// Every responder is answered exactly once: by its owner, by its destructor (503, so that a dropped
// one never strands a client), or by stop() (503 "stopping") for those still open.
//
// Thread-safety: register routes and hooks before start(); start/stop from one thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "core/status.h"

struct MHD_Daemon;

namespace tessera::server {

using HttpHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

// The answer to one deferred request. Thread-safe; answer() after the first is ignored.
class HttpResponder {
 public:
  struct Shared;  // the link to the request, cut when it is answered (http_server.cc)
  explicit HttpResponder(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  ~HttpResponder();  // unanswered: 503
  HttpResponder(const HttpResponder&) = delete;
  HttpResponder& operator=(const HttpResponder&) = delete;
  // Sends `res`; false when the request was already answered (e.g. by the server's stop).
  bool answer(httplib::Response res);
  // Has a worker build the answer with `fill` (e.g. encode a large JSON body) and send it, so that the
  // thread that has the result (the controller's state thread) does not spend time encoding it.
  bool answer_with(std::function<void(httplib::Response&)> fill);
  bool answered() const;

 private:
  std::shared_ptr<Shared> s_;
};
using DeferredHandler = std::function<void(const httplib::Request&, std::shared_ptr<HttpResponder>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                       // 0 = any free port (see HttpServer::port)
  int workers = 16;                   // threads running handlers
  int io_threads = 2;                 // epoll threads doing socket I/O (connections are spread over them)
  size_t max_body_bytes = 1 << 20;    // larger announced bodies: 413, unread
  int max_connections = 4096;         // open connections in all (more are refused at accept)
  int max_connections_per_ip = 0;     // 0 = no per-address cap
  int idle_timeout_s = 30;            // a connection that sends nothing this long is closed
  size_t max_waiting = 4096;          // whole requests waiting for a worker; more: 503
  size_t header_memory_bytes = 64 << 10;  // per connection, for the request line and headers
};

class HttpServer {
 public:
  enum class Hook { kContinue, kAnswered };
  using PreRouting = std::function<Hook(const httplib::Request&, httplib::Response&)>;
  using Logger = std::function<void(const httplib::Request&, const httplib::Response&, double seconds)>;
  // Fills the body of an answer that has an error status and no body (404 of an unknown path, ...).
  using ErrorBody = std::function<void(const httplib::Request&, httplib::Response&)>;

  HttpServer();
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void Get(const std::string& pattern, HttpHandler h) { route("GET", pattern, std::move(h)); }
  void Post(const std::string& pattern, HttpHandler h) { route("POST", pattern, std::move(h)); }
  void Delete(const std::string& pattern, HttpHandler h) { route("DELETE", pattern, std::move(h)); }
  // The handler runs on a worker and returns at once; the request is answered through the responder.
  void PostDeferred(const std::string& pattern, DeferredHandler h);
  void set_pre_routing(PreRouting f) { pre_routing_ = std::move(f); }
  void set_logger(Logger f) { logger_ = std::move(f); }
  // Called once MHD has sent a request's whole answer, with the seconds since its headers arrived
  // (what a client waits, less the network). On an I/O thread; must not block.
  void set_sent_observer(Logger f) { sent_ = std::move(f); }
  void set_error_body(ErrorBody f) { error_body_ = std::move(f); }

  // Binds, listens and serves on its own threads. Errors name the address and the cause.
  Status start(const HttpServerOptions& options);
  int port() const { return port_; }
  // Stops accepting, answers what is in flight, then closes every connection. Idempotent.
  void stop();

  struct Call;  // one request in flight (http_server.cc)

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    HttpHandler handler;
    DeferredHandler deferred;  // set instead of handler for a deferred route
  };
  void route(const std::string& method, const std::string& pattern, HttpHandler h);
  friend struct Access;
  friend class HttpResponder;
  // The handler of a whole request (nullptr: no route; *method_known tells 404 from 405).
  const Route* find(Call& call) const;
  void dispatch(Call* call);   // on the I/O thread: queue for a worker, or 503
  bool run(Call* call);        // on a worker; false: deferred (answered later through its responder)
  void complete(Call* call);   // the answer is ready: resume the connection (any thread)
  void queue_fill(Call* call);  // a deferred answer's fill: on a worker (inline once stopping)
  static void internal_error(HttpResponder& responder);
  void finish(Call* call);     // the error body and the log, before the answer is queued
  void worker_loop();

  std::vector<Route> routes_;
  PreRouting pre_routing_;
  Logger logger_;
  Logger sent_;
  ErrorBody error_body_;
  HttpServerOptions options_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call*> queue_;
  size_t in_flight_ = 0;  // queued or running
  std::vector<std::weak_ptr<HttpResponder::Shared>> deferred_;  // open deferred requests (pruned as they go)
  size_t deferred_pruned_ = 0;  // deferred_'s size after the last prune
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tessera::server
