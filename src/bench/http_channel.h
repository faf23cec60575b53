// The hollow nodes' HTTP client (bench/hollow_nodes.h), on libcurl's multi interface: one HttpMulti
// per event-loop thread, its sockets registered in that loop's epoll set (curl_multi_socket_action),
// and one HttpChannel (a reused curl easy handle) per node per channel (heartbeat, watch) that carries
// one POST at a time. Connections are HTTP/1.1 keep-alive, kept in the multi's connection cache and
// reused across requests; a request sent on a reused connection that the server had closed while it
// was idle is sent again on a fresh connection by libcurl (the agent protocol is level-triggered, so
// a repeat is harmless).
//
// Ownership: an HttpChannel must be destroyed (or closed) before the HttpMulti it uses. Thread-
// compatible: a multi and its channels are used only by the loop thread that owns them.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::bench {

struct HttpAnswer {
  int status = 0;     // 0 = no answer (connection refused, reset, timed out)
  std::string body;
  std::string error;  // why there is no answer
};

class HttpChannel;

class HttpMulti {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `epoll_fd`: the loop's epoll set, where a socket is registered with tag_of(id, fd) as the event's
  // data.u64 (so several multis can share one set). `max_connections`: connections kept in the cache,
  // in use or idle; one returned beyond it is closed.
  HttpMulti(int epoll_fd, uint32_t id, long max_connections);
  ~HttpMulti();
  HttpMulti(const HttpMulti&) = delete;
  HttpMulti& operator=(const HttpMulti&) = delete;

  bool ok() const { return multi_ != nullptr; }
  static uint64_t tag_of(uint32_t id, int fd) { return (uint64_t(id) + 1) << 32 | uint32_t(fd); }
  // The multi id and socket of an epoll tag; id is ~0u for a tag no multi made (a high word of 0 or ~0).
  static uint32_t id_of(uint64_t tag) { return uint32_t(tag >> 32) - 1; }
  static int fd_of(uint64_t tag) { return int(uint32_t(tag)); }
  // Readiness `events` (EPOLLIN/OUT/ERR/HUP) on socket `fd`, one this multi registered.
  void on_socket(int fd, uint32_t events);
  // libcurl's own timeouts (connect, the per-request deadline, its start of added transfers).
  TimePoint next_timeout() const { return due_; }
  void on_timeout(TimePoint now);
  // The next channel whose request finished (answer or failure) since the last call, or nullptr.
  HttpChannel* next_finished();

 private:
  friend class HttpChannel;
  static int on_socket_change(CURL* easy, curl_socket_t s, int what, void* self, void* socketp);
  static int on_timer_change(CURLM* multi, long timeout_ms, void* self);
  void act(curl_socket_t s, int mask);

  CURLM* multi_ = nullptr;
  int epoll_fd_ = -1;
  uint32_t id_ = 0;
  TimePoint due_ = TimePoint::max();
};

class HttpChannel {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  HttpChannel() = default;
  ~HttpChannel();
  HttpChannel(const HttpChannel&) = delete;
  HttpChannel& operator=(const HttpChannel&) = delete;

  // `base_url`: "http://HOST:PORT"; `headers`: sent with every request, owned by the caller and kept
  // alive as long as the channel; `tag`: the caller's name for the channel.
  bool configure(HttpMulti* multi, std::string base_url, const curl_slist* headers, uint64_t tag);
  uint64_t tag() const { return tag_; }

  // Starts a POST of `body` (JSON) to `path`; the channel must not be busy. An immediate failure is
  // reported as a finished answer with status 0: check finished() after.
  void post(const std::string& path, std::string body, TimePoint deadline);
  bool busy() const { return state_ == State::kBusy; }
  bool finished() const { return state_ == State::kDone; }
  TimePoint deadline() const { return deadline_; }
  // Gives up on the request in flight (timed out): the answer is status 0 with `why`.
  void fail(const std::string& why);
  // The finished answer; the channel is idle again.
  HttpAnswer take();
  // Abandons the request in flight, if any, without an answer (its connection is closed).
  void close();

 private:
  friend class HttpMulti;
  enum class State : uint8_t { kIdle, kBusy, kDone };
  static size_t on_body(char* data, size_t size, size_t count, void* self);
  void on_done(CURLcode result);
  void detach();

  HttpMulti* multi_ = nullptr;
  CURL* easy_ = nullptr;
  std::string base_url_;
  uint64_t tag_ = 0;
  State state_ = State::kIdle;
  std::string out_;  // the request's body (libcurl reads it in place)
  char error_[CURL_ERROR_SIZE] = {};
  TimePoint deadline_{};
  HttpAnswer answer_;
};

// "HOST:PORT" or "http://HOST:PORT" (an IPv4 address or localhost) as "http://A.B.C.D:PORT".
bool server_base_url(const std::string& text, std::string* url);

}  // namespace tessera::bench
