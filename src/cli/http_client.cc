// The CLI's HTTP/1.1 client: see http_client.h.
#include "cli/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace tessera::cli::http {
namespace {

constexpr size_t kMaxHeaderBytes = 64 << 10;  // status line and headers of one answer
constexpr size_t kChunk = 16 << 10;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

class PlainStream final : public Stream {
 public:
  explicit PlainStream(int fd) : fd_(fd) {}
  ~PlainStream() override { ::close(fd_); }
  ssize_t read(char* buf, size_t n) override {
    for (;;) {
      const ssize_t r = ::recv(fd_, buf, n, 0);
      if (r < 0 && errno == EINTR) continue;
      return r;  // EAGAIN: SO_RCVTIMEO ran out
    }
  }
  bool write_all(const char* p, size_t n) override {
    while (n > 0) {
      const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

 private:
  int fd_;
};

void set_timeout(int fd, int option, int seconds) {
  timeval tv{};
  tv.tv_sec = seconds;
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

// Connects a non-blocking socket within timeout_s; 0 or the errno (ETIMEDOUT when the time ran out).
int connect_within(int fd, const sockaddr* addr, socklen_t len, int timeout_s) {
  if (::connect(fd, addr, len) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd p{fd, POLLOUT, 0};
  int r;
  do r = ::poll(&p, 1, timeout_s * 1000);
  while (r < 0 && errno == EINTR);
  if (r == 0) return ETIMEDOUT;
  if (r < 0) return errno;
  int err = 0;
  socklen_t l = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) return errno;
  return err;
}

// Reads an answer from a stream: lines for the head, then bytes.
class Reader {
 public:
  explicit Reader(Stream& s) : s_(s) {}

  // One line without its CRLF (or LF), taken from *budget; false at the end of the stream, on an
  // error, or when the line is longer than *budget (then *too_long).
  bool line(std::string* out, size_t* budget, bool* too_long) {
    for (;;) {
      const size_t nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        const size_t len = nl + 1 - pos_;
        if (len > *budget) {
          *too_long = true;
          return false;
        }
        *budget -= len;
        out->assign(buf_, pos_, nl - pos_);
        if (!out->empty() && out->back() == '\r') out->pop_back();
        pos_ = nl + 1;
        return true;
      }
      if (buf_.size() - pos_ > *budget) {
        *too_long = true;
        return false;
      }
      if (fill() <= 0) return false;
    }
  }

  // Up to max bytes: what is buffered first, else one read. 0 at the end, < 0 on an error.
  ssize_t some(const char** data, size_t max) {
    if (pos_ == buf_.size() && fill() <= 0) return ended_ ? 0 : -1;
    const size_t n = std::min(max, buf_.size() - pos_);
    *data = buf_.data() + pos_;
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  // Why the last read got nothing: the read timeout ran out (else the stream ended or broke).
  bool timed_out() const { return timed_out_; }

 private:
  ssize_t fill() {
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    }
    char tmp[kChunk];
    const ssize_t r = s_.read(tmp, sizeof tmp);
    if (r > 0) buf_.append(tmp, static_cast<size_t>(r));
    else if (r == 0) ended_ = true;
    else timed_out_ = errno == EAGAIN || errno == EWOULDBLOCK;
    return r;
  }

  Stream& s_;
  std::string buf_;
  size_t pos_ = 0;
  bool ended_ = false, timed_out_ = false;
};

}  // namespace

std::string Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

std::unique_ptr<Stream> Client::open(Error* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(t_.port);
  if (const int rc = ::getaddrinfo(t_.host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    *err = Error::kConnection;
    detail_ = "unknown host '" + t_.host + "' (" + ::gai_strerror(rc) + ")";
    return nullptr;
  }
  int fd = -1, last = 0;
  for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
    const int s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (s < 0) {
      last = errno;
      continue;
    }
    if (const int e = connect_within(s, ai->ai_addr, ai->ai_addrlen, t_.connect_timeout_s); e != 0) {
      last = e;
      ::close(s);
      continue;
    }
    fd = s;
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    *err = last == ETIMEDOUT ? Error::kConnectionTimeout : Error::kConnection;
    detail_ = last == 0 ? std::string("connection failed")
              : last == ECONNREFUSED ? std::string("connection refused") : std::string(std::strerror(last));
    return nullptr;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // blocking, bounded by the timeouts below
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // headers and body go out at once
  set_timeout(fd, SO_RCVTIMEO, t_.read_timeout_s);
  set_timeout(fd, SO_SNDTIMEO, t_.write_timeout_s);
  if (!t_.tls) return std::make_unique<PlainStream>(fd);
  return tls_connect(fd, t_.host, err, &detail_);
}

Error Client::send(const Request& req, Response* res, const std::function<bool(const Response&)>& on_headers,
                   const std::function<bool(const char*, size_t)>& on_data) {
  detail_.clear();
  *res = Response{};
  Error err = Error::kNone;
  std::unique_ptr<Stream> s = open(&err);
  if (!s) return err;

  const bool v6 = t_.host.find(':') != std::string::npos;
  std::string head = req.method + " " + req.path + " HTTP/1.1\r\nHost: " + (v6 ? "[" + t_.host + "]" : t_.host);
  if (t_.port != (t_.tls ? 443 : 80)) head += ":" + std::to_string(t_.port);
  head += "\r\nAccept: */*\r\nUser-Agent: tessera-cli\r\nConnection: close\r\n";
  for (const auto& [k, v] : req.headers) head += k + ": " + v + "\r\n";
  if (req.method != "GET" && req.method != "HEAD") head += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
  head += "\r\n";
  if (req.body.size() < kChunk) {
    head += req.body;
    if (!s->write_all(head.data(), head.size())) return Error::kWrite;
  } else if (!s->write_all(head.data(), head.size()) || !s->write_all(req.body.data(), req.body.size())) {
    return Error::kWrite;
  }

  Reader in(*s);
  size_t budget = kMaxHeaderBytes;
  bool too_long = false;
  std::string line;
  auto head_failed = [&] { return too_long ? Error::kBadAnswer : in.timed_out() ? Error::kRead : Error::kClosed; };
  for (;;) {  // the status line and headers; 1xx interim answers are skipped
    if (!in.line(&line, &budget, &too_long)) return head_failed();
    std::string_view sl = line;
    int status = 0;
    if (sl.size() < 12 || sl.substr(0, 7) != "HTTP/1." || sl[8] != ' ' ||
        std::from_chars(sl.data() + 9, sl.data() + 12, status).ptr != sl.data() + 12 || status < 100 || status > 999)
      return Error::kBadAnswer;
    res->status = status;
    res->headers.clear();
    for (;;) {
      if (!in.line(&line, &budget, &too_long)) return head_failed();
      if (line.empty()) break;
      const size_t colon = line.find(':');
      if (colon == std::string::npos || colon == 0) return Error::kBadAnswer;
      res->headers.emplace_back(line.substr(0, colon), std::string(trim(std::string_view(line).substr(colon + 1))));
    }
    if (status >= 200 || status == 101) break;
  }
  if (on_headers && !on_headers(*res)) return Error::kCanceled;

  auto deliver = [&](const char* p, size_t n) {
    if (on_data) return on_data(p, n);
    res->body.append(p, n);
    return true;
  };
  // Exactly n bytes (or up to the end of the stream when n < 0).
  auto copy = [&](int64_t n) -> Error {
    while (n != 0) {
      const char* p = nullptr;
      const ssize_t got = in.some(&p, n < 0 ? kChunk : static_cast<size_t>(std::min<int64_t>(n, kChunk)));
      if (got == 0) return n < 0 ? Error::kNone : Error::kClosed;
      if (got < 0) return in.timed_out() ? Error::kRead : Error::kClosed;
      if (!deliver(p, static_cast<size_t>(got))) return Error::kCanceled;
      if (n > 0) n -= got;
    }
    return Error::kNone;
  };
  if (req.method == "HEAD" || res->status == 204 || res->status == 304) return Error::kNone;
  const std::string te = res->header("Transfer-Encoding");
  if (!te.empty() && !iequals(te, "identity")) {  // chunked
    for (;;) {
      budget = kMaxHeaderBytes;
      if (!in.line(&line, &budget, &too_long)) return head_failed();
      std::string_view size = trim(std::string_view(line).substr(0, line.find(';')));
      uint64_t n = 0;
      const auto [ptr, ec] = std::from_chars(size.data(), size.data() + size.size(), n, 16);
      if (size.empty() || ec != std::errc() || ptr != size.data() + size.size() || n > (uint64_t{1} << 62))
        return Error::kBadAnswer;
      if (n == 0) break;
      if (const Error e = copy(static_cast<int64_t>(n)); e != Error::kNone) return e;
      if (!in.line(&line, &budget, &too_long)) return head_failed();  // the CRLF after the data
    }
    do {  // trailers, up to the empty line
      if (!in.line(&line, &budget, &too_long)) return head_failed();
    } while (!line.empty());
    return Error::kNone;
  }
  const std::string cl = res->header("Content-Length");
  if (cl.empty()) return copy(-1);
  int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(cl.data(), cl.data() + cl.size(), n);
  if (ec != std::errc() || ptr != cl.data() + cl.size() || n < 0) return Error::kBadAnswer;
  return copy(n);
}

}  // namespace tessera::cli::http
