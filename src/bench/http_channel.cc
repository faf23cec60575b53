#include "bench/http_channel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace tessera::bench {

namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

// ---- HttpMulti -------------------------------------------------------------------------------------

HttpMulti::HttpMulti(int epoll_fd, uint32_t id, long max_connections) : epoll_fd_(epoll_fd), id_(id) {
  init_curl_once();
  multi_ = curl_multi_init();
  if (multi_ == nullptr) return;
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &HttpMulti::on_socket_change);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &HttpMulti::on_timer_change);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, std::max(4L, max_connections));
  curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
  curl_multi_setopt(multi_, CURLMOPT_PIPELINING, long(CURLPIPE_NOTHING));  // HTTP/1.1, one request per connection at a time
}

HttpMulti::~HttpMulti() {
  if (multi_ != nullptr) curl_multi_cleanup(multi_);  // closes the cached connections
}

int HttpMulti::on_socket_change(CURL*, curl_socket_t s, int what, void* self, void*) {
  auto* m = static_cast<HttpMulti*>(self);
  if (what == CURL_POLL_REMOVE) {
    ::epoll_ctl(m->epoll_fd_, EPOLL_CTL_DEL, s, nullptr);
    return 0;
  }
  epoll_event ev{};
  ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
  ev.data.u64 = tag_of(m->id_, s);
  if (::epoll_ctl(m->epoll_fd_, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT)
    ::epoll_ctl(m->epoll_fd_, EPOLL_CTL_ADD, s, &ev);
  return 0;
}

int HttpMulti::on_timer_change(CURLM*, long timeout_ms, void* self) {
  auto* m = static_cast<HttpMulti*>(self);
  m->due_ = timeout_ms < 0 ? TimePoint::max() : std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  return 0;
}

void HttpMulti::act(curl_socket_t s, int mask) {
  int running = 0;
  curl_multi_socket_action(multi_, s, mask, &running);
}

void HttpMulti::on_socket(int fd, uint32_t events) {
  int mask = 0;
  if (events & (EPOLLIN | EPOLLHUP)) mask |= CURL_CSELECT_IN;  // a hang-up reads as EOF
  if (events & EPOLLOUT) mask |= CURL_CSELECT_OUT;
  if (events & EPOLLERR) mask |= CURL_CSELECT_ERR;
  act(fd, mask);
}

void HttpMulti::on_timeout(TimePoint now) {
  if (now < due_) return;
  due_ = TimePoint::max();  // libcurl sets the next one from inside the call
  act(CURL_SOCKET_TIMEOUT, 0);
}

HttpChannel* HttpMulti::next_finished() {
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    HttpChannel* c = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &c);
    const CURLcode result = msg->data.result;  // `msg` is freed when the handle is removed
    if (c == nullptr) continue;
    c->on_done(result);
    return c;
  }
  return nullptr;
}

// ---- HttpChannel -----------------------------------------------------------------------------------

HttpChannel::~HttpChannel() {
  detach();
  if (easy_ != nullptr) curl_easy_cleanup(easy_);
}

bool HttpChannel::configure(HttpMulti* multi, std::string base_url, const curl_slist* headers, uint64_t tag) {
  init_curl_once();
  multi_ = multi;
  base_url_ = std::move(base_url);
  tag_ = tag;
  easy_ = curl_easy_init();
  if (easy_ == nullptr) return false;
  curl_easy_setopt(easy_, CURLOPT_PRIVATE, this);
  curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy_, CURLOPT_HTTP_VERSION, long(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy_, CURLOPT_TCP_NODELAY, 1L);   // no Nagle + delayed-ACK wait
  curl_easy_setopt(easy_, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &HttpChannel::on_body);
  curl_easy_setopt(easy_, CURLOPT_WRITEDATA, this);
  curl_easy_setopt(easy_, CURLOPT_ERRORBUFFER, error_);
  return true;
}

size_t HttpChannel::on_body(char* data, size_t size, size_t count, void* self) {
  static_cast<HttpChannel*>(self)->answer_.body.append(data, size * count);
  return size * count;
}

void HttpChannel::post(const std::string& path, std::string body, TimePoint deadline) {
  deadline_ = deadline;
  answer_ = HttpAnswer{};
  error_[0] = '\0';
  out_ = std::move(body);
  if (easy_ == nullptr) {
    answer_.error = "curl: no easy handle";
    state_ = State::kDone;
    return;
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  curl_easy_setopt(easy_, CURLOPT_URL, (base_url_ + path).c_str());
  curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(out_.size()));
  curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, out_.data());
  curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, long(std::max<int64_t>(1, left)));
  if (const CURLMcode rc = curl_multi_add_handle(multi_->multi_, easy_); rc != CURLM_OK) {
    answer_.error = std::string("curl: ") + curl_multi_strerror(rc);
    state_ = State::kDone;
    return;
  }
  state_ = State::kBusy;
}

void HttpChannel::detach() {
  if (state_ == State::kBusy && multi_ != nullptr && easy_ != nullptr) curl_multi_remove_handle(multi_->multi_, easy_);
}

void HttpChannel::on_done(CURLcode result) {
  curl_multi_remove_handle(multi_->multi_, easy_);  // the connection goes back to the multi's cache
  state_ = State::kDone;
  if (result == CURLE_OK) {
    long code = 0;
    curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &code);
    answer_.status = int(code);
    return;
  }
  answer_.status = 0;
  answer_.body.clear();
  answer_.error = error_[0] != '\0' ? std::string(error_) : std::string(curl_easy_strerror(result));
}

void HttpChannel::fail(const std::string& why) {
  if (!busy()) return;
  detach();
  answer_ = HttpAnswer{0, "", why};
  state_ = State::kDone;
}

HttpAnswer HttpChannel::take() {
  state_ = State::kIdle;
  return std::move(answer_);
}

void HttpChannel::close() {
  detach();
  state_ = State::kIdle;
  answer_ = HttpAnswer{};
}

bool server_base_url(const std::string& text, std::string* url) {
  std::string t = text;
  if (t.rfind("http://", 0) == 0) t = t.substr(7);
  while (!t.empty() && t.back() == '/') t.pop_back();
  const size_t colon = t.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = t.substr(0, colon);
  char* end = nullptr;
  const long port = std::strtol(t.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) return false;
  if (host == "localhost") host = "127.0.0.1";
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  *url = "http://" + host + ":" + std::to_string(port);
  return true;
}

}  // namespace tessera::bench
