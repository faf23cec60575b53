// A minimal non-blocking HTTP/1.1 client connection for the hollow nodes' event loops
// (bench/hollow_nodes.h): one request at a time on a keep-alive TCP connection to a loopback or LAN
// address, driven by readiness events from the loop's epoll set. It knows exactly what the agent
// protocol needs: a POST with a JSON body, an answer with Content-Length (or chunked), `Connection:
// close`. A request on a reused connection that the server closed while it was idle is sent again
// once on a fresh connection (the agent protocol is level-triggered, so a repeat is harmless).
//
// Ownership: the connection owns its socket and keeps it registered in the epoll set it was given
// (tagged with `tag`). Thread-compatible: used only by the loop thread that owns it.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::bench {

struct HttpAnswer {
  int status = 0;     // 0 = no answer (connection refused, reset, timed out)
  std::string body;
  std::string error;  // why there is no answer
};

class AsyncHttpConn {
 public:
  AsyncHttpConn() = default;
  ~AsyncHttpConn() { close(); }
  AsyncHttpConn(const AsyncHttpConn&) = delete;
  AsyncHttpConn& operator=(const AsyncHttpConn&) = delete;

  void configure(int epoll_fd, uint64_t tag, const sockaddr_in& server, std::string host_header, std::string token);

  // Starts a POST of `body` (JSON) to `path`; the connection must not be busy. An immediate failure
  // (no socket) is reported as a finished answer with status 0: check finished() after.
  void post(const std::string& path, const std::string& body, std::chrono::steady_clock::time_point deadline);
  bool busy() const { return state_ != State::kIdle && state_ != State::kDone; }
  bool finished() const { return state_ == State::kDone; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }
  // Progress on readiness `events` (EPOLLIN/OUT/ERR/HUP). Returns true when the answer is complete.
  bool on_ready(uint32_t events);
  // Gives up on the request in flight (timed out): the answer is status 0 with `why`.
  void fail(const std::string& why);
  // The finished answer; the connection is idle again (and still open unless the server closed it).
  HttpAnswer take();
  void close();
  bool open() const { return fd_ >= 0; }

 private:
  enum class State : uint8_t { kIdle, kConnecting, kWriting, kReading, kDone };
  bool connect_now();
  void want(uint32_t events);
  bool write_some();
  bool read_some();   // true when the answer is whole
  bool parse();       // true when the answer is whole
  void finish_error(const std::string& why);

  int epoll_fd_ = -1;
  uint64_t tag_ = 0;
  sockaddr_in server_{};
  std::string host_header_, token_;
  int fd_ = -1;
  uint32_t registered_ = 0;  // events the fd is registered for (0 = not registered)
  State state_ = State::kIdle;
  std::string out_;          // the request's bytes
  size_t written_ = 0;
  std::string in_;           // the answer's bytes so far
  bool reused_ = false;      // the request went out on a connection that served an earlier one
  bool retried_ = false;
  bool close_after_ = false;
  std::chrono::steady_clock::time_point deadline_{};
  HttpAnswer answer_;
};

// "HOST:PORT" or "http://HOST:PORT" (an IPv4 address or localhost) as a socket address.
bool parse_server_address(const std::string& text, sockaddr_in* out, std::string* host_header);

}  // namespace tessera::bench
