// The CLI's HTTP/1.1 client (src/cli/http_client.h) against a scripted server: a raw TCP socket on
// 127.0.0.1 with a kernel-picked port, served by a thread that reads one request and writes a fixed
// answer. Bodies framed by Content-Length, chunked (extensions, trailers) and the connection's end;
// the request as the server sees it; and the errors: refused, read timeout, garbage, cut short, https
// without TLS (cli_tests links http_no_tls.cc, as the client-only `tessera` does).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/http_client.h"

namespace tessera::cli::http {
namespace {

// A socket bound to 127.0.0.1 on a port the kernel picks; listening when `listen` is true.
int bound_socket(int* port, bool listen) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || (listen && ::listen(fd, 4) != 0)) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Serves one connection: reads the request (head and its Content-Length body), writes `answer`, then
// closes the connection, or, with kSilent, writes nothing and waits for the client to hang up. Every
// wait is bounded (5 s), so a client that misbehaves fails its test instead of hanging it.
class ScriptedServer {
 public:
  enum Mode { kAnswer, kDribble /* the answer a byte per send */, kSilent };

  explicit ScriptedServer(std::string answer, Mode mode = kAnswer) : answer_(std::move(answer)), mode_(mode) {
    listen_fd_ = bound_socket(&port_, true);
    if (listen_fd_ >= 0) thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  bool ok() const { return listen_fd_ >= 0; }
  int port() const { return port_; }
  Target target() const {
    Target t;
    t.host = "127.0.0.1";
    t.port = port_;
    t.connect_timeout_s = 5;
    t.read_timeout_s = 5;
    t.write_timeout_s = 5;
    return t;
  }
  // The bytes the server received (the whole request); waits for the server to finish.
  const std::string& received() {
    if (thread_.joinable()) thread_.join();
    return received_;
  }

 private:
  void serve() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    read_request(fd);
    if (mode_ == kSilent) {
      char buf[4096];
      while (::recv(fd, buf, sizeof buf, 0) > 0) {
      }
    } else if (mode_ == kDribble) {
      for (char c : answer_) write_all(fd, &c, 1);
    } else {
      write_all(fd, answer_.data(), answer_.size());
    }
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
  }

  // Up to the end of the head, then as many bytes as its Content-Length says.
  void read_request(int fd) {
    char buf[4096];
    size_t head_end = std::string::npos;
    while ((head_end = received_.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r <= 0) return;
      received_.append(buf, static_cast<size_t>(r));
    }
    size_t length = 0;
    const std::string head = received_.substr(0, head_end);
    if (const size_t at = head.find("\r\nContent-Length: "); at != std::string::npos)
      length = std::strtoul(head.c_str() + at + 18, nullptr, 10);
    while (received_.size() < head_end + 4 + length) {
      const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r <= 0) return;
      received_.append(buf, static_cast<size_t>(r));
    }
  }

  std::string answer_;
  Mode mode_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::string received_;
  std::thread thread_;
};

Error get(const Target& t, Response* res, const std::string& path = "/") {
  Client c(t);
  Request req;
  req.path = path;
  return c.send(req, res);
}

TEST(HttpClient, ContentLengthBody) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\ncontent-length: 11\r\n\r\nhello world");
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "hello world");
  EXPECT_EQ(res.header("Content-Type"), "text/plain");
  EXPECT_EQ(res.header("CONTENT-LENGTH"), "11");  // looked up case-insensitively
  EXPECT_EQ(res.header("X-Missing"), "");
  ASSERT_EQ(res.headers.size(), 2u);
  EXPECT_EQ(res.headers[1].first, "content-length");  // as the server sent it
}

TEST(HttpClient, ContentLengthBodyStopsAtLength) {
  // Bytes past Content-Length are not part of the body.
  ScriptedServer srv("HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabcEXTRA");
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.status, 201);
  EXPECT_EQ(res.body, "abc");
}

TEST(HttpClient, LargeContentLengthBody) {
  std::string body(200000, 'x');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.body, body);
}

constexpr const char* kChunked =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5;name=value\r\nhello\r\n"
    "7 ; ext\r\n, world\r\n"
    "A\r\n0123456789\r\n"
    "0\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n";

TEST(HttpClient, ChunkedBody) {
  ScriptedServer srv(kChunked);
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "hello, world0123456789");
}

TEST(HttpClient, ChunkedBodyByteByByte) {
  // The same answer a byte per send: however the reads split it, the body is the same.
  ScriptedServer srv(kChunked, ScriptedServer::kDribble);
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.body, "hello, world0123456789");
}

TEST(HttpClient, BodyToTheConnectionsEnd) {
  ScriptedServer srv("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it\nuntil the end");
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "all of it\nuntil the end");
}

TEST(HttpClient, InterimAnswerSkipped) {
  ScriptedServer srv("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(res.body, "nope");
}

TEST(HttpClient, NoContentHasNoBody) {
  ScriptedServer srv("HTTP/1.1 204 No Content\r\n\r\n");
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res), Error::kNone);
  EXPECT_EQ(res.status, 204);
  EXPECT_EQ(res.body, "");
}

TEST(HttpClient, ReceiversSeeHeadersAndBody) {
  ScriptedServer srv(kChunked);
  ASSERT_TRUE(srv.ok());
  Client c(srv.target());
  Response res;
  int status_seen = 0;
  std::string got;
  ASSERT_EQ(c.send(
                Request{}, &res,
                [&](const Response& r) {
                  status_seen = r.status;
                  return true;
                },
                [&](const char* p, size_t n) {
                  got.append(p, n);
                  return true;
                }),
            Error::kNone);
  EXPECT_EQ(status_seen, 200);
  EXPECT_EQ(got, "hello, world0123456789");
  EXPECT_EQ(res.body, "");  // given to the receiver instead
}

TEST(HttpClient, ReceiverStops) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_TRUE(srv.ok());
  Client c(srv.target());
  Response res;
  EXPECT_EQ(c.send(Request{}, &res, [](const Response&) { return false; }), Error::kCanceled);
}

TEST(HttpClient, SendsRequestLineHostHeadersAndBody) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_TRUE(srv.ok());
  Client c(srv.target());
  Request req;
  req.method = "POST";
  req.path = "/api/v1/jobs?queue=gpu%20a";
  req.headers = {{"Content-Type", "application/json"}, {"Authorization", "Bearer tok"}};
  req.body = R"({"name":"train","gpus":8})";
  Response res;
  ASSERT_EQ(c.send(req, &res), Error::kNone);
  EXPECT_EQ(res.body, "{}");

  const std::string& got = srv.received();
  const size_t end = got.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos);
  const std::string head = got.substr(0, end + 2);
  EXPECT_EQ(head.substr(0, head.find("\r\n")), "POST /api/v1/jobs?queue=gpu%20a HTTP/1.1");
  EXPECT_NE(head.find("\r\nHost: 127.0.0.1:" + std::to_string(srv.port()) + "\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nConnection: close\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nContent-Type: application/json\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nAuthorization: Bearer tok\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nContent-Length: " + std::to_string(req.body.size()) + "\r\n"), std::string::npos) << head;
  EXPECT_EQ(got.substr(end + 4), req.body);
}

TEST(HttpClient, SendsLargeBody) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(srv.ok());
  Client c(srv.target());
  Request req;
  req.method = "PUT";
  req.path = "/big";
  req.body.assign(100000, 'z');
  Response res;
  ASSERT_EQ(c.send(req, &res), Error::kNone);
  EXPECT_EQ(res.status, 200);
  const std::string& got = srv.received();
  const size_t end = got.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(got.substr(end + 4), req.body);
}

TEST(HttpClient, GetSendsNoContentLength) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(srv.ok());
  Response res;
  ASSERT_EQ(get(srv.target(), &res, "/api/v1/queues"), Error::kNone);
  const std::string& got = srv.received();
  EXPECT_EQ(got.substr(0, got.find("\r\n")), "GET /api/v1/queues HTTP/1.1");
  EXPECT_EQ(got.find("Content-Length"), std::string::npos) << got;
  EXPECT_EQ(got.size(), got.find("\r\n\r\n") + 4);  // nothing after the head
}

TEST(HttpClient, RefusedConnection) {
  // A port bound but not listening: connecting to it is refused, and no one else can take it meanwhile.
  int port = 0;
  const int fd = bound_socket(&port, false);
  ASSERT_GE(fd, 0);
  Target t;
  t.host = "127.0.0.1";
  t.port = port;
  t.connect_timeout_s = 2;
  Client c(t);
  Response res;
  EXPECT_EQ(c.send(Request{}, &res), Error::kConnection);
  EXPECT_EQ(c.detail(), "connection refused");
  ::close(fd);
}

TEST(HttpClient, SilentServerTimesOut) {
  ScriptedServer srv("", ScriptedServer::kSilent);
  ASSERT_TRUE(srv.ok());
  Target t = srv.target();
  t.read_timeout_s = 1;  // the shortest the client takes (whole seconds)
  Client c(t);
  Response res;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(c.send(Request{}, &res), Error::kRead);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(4));
  EXPECT_GE(took, std::chrono::milliseconds(900));
}

TEST(HttpClient, GarbageAnswer) {
  ScriptedServer srv("SSH-2.0-OpenSSH_9.6\r\n\r\n");
  ASSERT_TRUE(srv.ok());
  Response res;
  EXPECT_EQ(get(srv.target(), &res), Error::kBadAnswer);
}

TEST(HttpClient, BadStatusCode) {
  ScriptedServer srv("HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(srv.ok());
  Response res;
  EXPECT_EQ(get(srv.target(), &res), Error::kBadAnswer);
}

TEST(HttpClient, BadChunkSize) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n");
  ASSERT_TRUE(srv.ok());
  Response res;
  EXPECT_EQ(get(srv.target(), &res), Error::kBadAnswer);
}

TEST(HttpClient, AnswerCutShortMidBody) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it");
  ASSERT_TRUE(srv.ok());
  Response res;
  EXPECT_EQ(get(srv.target(), &res), Error::kClosed);
}

TEST(HttpClient, ChunkedAnswerCutShort) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort");
  ASSERT_TRUE(srv.ok());
  Response res;
  EXPECT_EQ(get(srv.target(), &res), Error::kClosed);
}

TEST(HttpClient, AnswerCutShortInHead) {
  ScriptedServer srv("HTTP/1.1 200 OK\r\nContent-Len");
  ASSERT_TRUE(srv.ok());
  Response res;
  EXPECT_EQ(get(srv.target(), &res), Error::kClosed);
}

TEST(HttpClient, HttpsWithoutTls) {
  // cli_tests links http_no_tls.cc, as the client-only `tessera` does: the TCP connection is made,
  // then tls_connect refuses. The server sees a connection that ends without a request.
  ScriptedServer srv("");
  ASSERT_TRUE(srv.ok());
  Target t = srv.target();
  t.tls = true;
  Client c(t);
  Response res;
  EXPECT_EQ(c.send(Request{}, &res), Error::kNoTls);
  EXPECT_NE(c.detail().find("no TLS"), std::string::npos) << c.detail();
  EXPECT_EQ(srv.received(), "");
}

}  // namespace
}  // namespace tessera::cli::http
