#include "bench/async_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <strings.h>

namespace tessera::bench {

void AsyncHttpConn::configure(int epoll_fd, uint64_t tag, const sockaddr_in& server, std::string host_header,
                              std::string token) {
  epoll_fd_ = epoll_fd;
  tag_ = tag;
  server_ = server;
  host_header_ = std::move(host_header);
  token_ = std::move(token);
}

void AsyncHttpConn::close() {
  if (fd_ >= 0) ::close(fd_);  // closing removes it from the epoll set
  fd_ = -1;
  registered_ = 0;
}

void AsyncHttpConn::want(uint32_t events) {
  if (fd_ < 0 || events == registered_) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag_;
  ::epoll_ctl(epoll_fd_, registered_ == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd_, &ev);
  registered_ = events;
}

bool AsyncHttpConn::connect_now() {
  close();
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // no Nagle + delayed-ACK wait
  const int rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&server_), sizeof server_);
  if (rc != 0 && errno != EINPROGRESS) {
    close();
    return false;
  }
  reused_ = false;
  state_ = State::kConnecting;
  want(EPOLLOUT);
  return true;
}

void AsyncHttpConn::post(const std::string& path, const std::string& body, std::chrono::steady_clock::time_point deadline) {
  out_ = "POST " + path + " HTTP/1.1\r\nHost: " + host_header_ + "\r\nAuthorization: Bearer " + token_ +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  written_ = 0;
  in_.clear();
  retried_ = false;
  close_after_ = false;
  deadline_ = deadline;
  answer_ = HttpAnswer{};
  if (fd_ < 0) {
    if (!connect_now()) return finish_error(std::string("connect: ") + std::strerror(errno));
    return;
  }
  reused_ = true;
  state_ = State::kWriting;
  if (!write_some()) return;
  if (state_ == State::kWriting) want(EPOLLOUT);
}

void AsyncHttpConn::finish_error(const std::string& why) {
  close();
  answer_ = HttpAnswer{0, "", why};
  state_ = State::kDone;
}

void AsyncHttpConn::fail(const std::string& why) {
  if (busy()) finish_error(why);
}

bool AsyncHttpConn::write_some() {
  while (written_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + written_, out_.size() - written_, MSG_NOSIGNAL);
    if (n > 0) {
      written_ += size_t(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    // A keep-alive connection the server closed while idle: once more on a fresh one.
    if (reused_ && !retried_) {
      retried_ = true;
      written_ = 0;
      if (connect_now()) return true;
    }
    finish_error(std::string("send: ") + std::strerror(errno));
    return false;
  }
  state_ = State::kReading;
  want(EPOLLIN);
  return true;
}

bool AsyncHttpConn::read_some() {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      in_.append(buf, size_t(n));
      if (parse()) return true;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0 && errno == EINTR) continue;
    // EOF or reset before the whole answer.
    if (in_.empty() && reused_ && !retried_) {
      retried_ = true;
      written_ = 0;
      if (connect_now()) return false;
    }
    finish_error(n == 0 ? "the server closed the connection" : std::string("recv: ") + std::strerror(errno));
    return true;
  }
}

namespace {

// The value of header `name` in the header block (case-insensitive), "" when absent.
std::string header_value(const std::string& head, const char* name) {
  const size_t len = std::strlen(name);
  size_t at = head.find("\r\n");
  while (at != std::string::npos && at + 2 < head.size()) {
    const size_t start = at + 2, end = head.find("\r\n", start);
    const size_t line_end = end == std::string::npos ? head.size() : end;
    if (line_end - start > len && head[start + len] == ':' && ::strncasecmp(head.data() + start, name, len) == 0) {
      size_t v = start + len + 1;
      while (v < line_end && head[v] == ' ') ++v;
      return head.substr(v, line_end - v);
    }
    at = end;
  }
  return "";
}

}  // namespace

bool AsyncHttpConn::parse() {
  const size_t head_end = in_.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  const std::string head = in_.substr(0, head_end);
  const size_t sp = head.find(' ');
  const int status = sp == std::string::npos ? 0 : std::atoi(head.c_str() + sp + 1);
  const std::string conn = header_value(head, "Connection");
  close_after_ = ::strcasecmp(conn.c_str(), "close") == 0;
  const size_t body_at = head_end + 4;
  const std::string te = header_value(head, "Transfer-Encoding");
  if (::strcasecmp(te.c_str(), "chunked") == 0) {
    std::string body;
    size_t at = body_at;
    for (;;) {
      const size_t eol = in_.find("\r\n", at);
      if (eol == std::string::npos) return false;
      const size_t size = std::strtoul(in_.c_str() + at, nullptr, 16);
      if (size == 0) {
        if (in_.find("\r\n", eol + 2) == std::string::npos) return false;
        break;
      }
      if (in_.size() < eol + 2 + size + 2) return false;
      body.append(in_, eol + 2, size);
      at = eol + 2 + size + 2;
    }
    answer_ = HttpAnswer{status, std::move(body), ""};
  } else {
    const std::string cl = header_value(head, "Content-Length");
    const size_t length = cl.empty() ? 0 : std::strtoul(cl.c_str(), nullptr, 10);
    if (in_.size() < body_at + length) return false;
    answer_ = HttpAnswer{status, in_.substr(body_at, length), ""};
  }
  if (close_after_) close();
  state_ = State::kDone;
  return true;
}

bool AsyncHttpConn::on_ready(uint32_t events) {
  if (state_ == State::kConnecting) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      finish_error(std::string("connect: ") + std::strerror(err));
      return true;
    }
    state_ = State::kWriting;
  }
  if (state_ == State::kWriting) {
    if (!write_some()) return true;
    if (state_ == State::kWriting) return false;
  }
  if (state_ == State::kReading && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return read_some() || state_ == State::kDone;
  return state_ == State::kDone;
}

HttpAnswer AsyncHttpConn::take() {
  state_ = State::kIdle;
  if (fd_ >= 0) want(EPOLLIN);  // an idle connection: EOF from the server shows up as readable
  return std::move(answer_);
}

bool parse_server_address(const std::string& text, sockaddr_in* out, std::string* host_header) {
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
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) return false;
  *out = a;
  *host_header = host + ":" + std::to_string(port);
  return true;
}

}  // namespace tessera::bench
