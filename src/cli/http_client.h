// A small blocking HTTP/1.1 client for the CLI's REST calls (ApiClient, api_client.cc), on sockets:
// one request per connection ("Connection: close"), bodies framed by Content-Length, chunked or the
// end of the connection, and connect, read and write timeouts. It replaces cpp-httplib's client in the
// CLI so that a client verb's start loads no HTTP or TLS library (docs/performance.md, "CLI start").
//
// https goes through tls_connect: http_tls.cc (OpenSSL, the system's CA certificates and the host
// name checked) in tessera-full, http_no_tls.cc in the client-only `tessera`, which hands any command
// line that may name an https server to tessera-full before it runs the verb (src/cli/main.cc).
// One Client per thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::cli::http {

enum class Error {
  kNone,
  kConnection,         // no connection: refused, unreachable, unknown host (detail() says which)
  kConnectionTimeout,  // no connection within the connect timeout
  kRead,               // no complete answer within the read timeout
  kClosed,             // the connection ended or broke before a complete answer
  kWrite,              // the request could not be sent whole
  kCanceled,           // a receiver returned false
  kTlsConnection,      // the TLS handshake failed
  kTlsVerification,    // the server's certificate or name did not verify
  kNoTls,              // https in a binary built without TLS (http_no_tls.cc)
  kBadAnswer,          // the answer is not HTTP/1.x
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Target {
  bool tls = false;
  std::string host;  // a name or an address (IPv6 without brackets)
  int port = 80;
  int connect_timeout_s = 5;
  int read_timeout_s = 60;
  int write_timeout_s = 60;
};

struct Request {
  std::string method = "GET";
  std::string path = "/";  // sent as it is (callers encode query values)
  Headers headers;          // besides Host, Accept, User-Agent, Connection, Content-Length
  std::string body;         // sent with Content-Length when the method is not GET
};

struct Response {
  int status = 0;
  Headers headers;   // names as the server sent them
  std::string body;  // the body, unless Client::send was given a receiver for it
  // The first header named `name` (case-insensitive), or "".
  std::string header(std::string_view name) const;
};

// A byte stream over a connected socket (plain or TLS); it owns the socket.
class Stream {
 public:
  virtual ~Stream() = default;
  // Up to n bytes: > 0, 0 at the end of the stream, < 0 on an error or a timeout (errno EAGAIN).
  virtual ssize_t read(char* buf, size_t n) = 0;
  // False when not all of it could be sent (an error or a timeout).
  virtual bool write_all(const char* p, size_t n) = 0;
};

// Runs the TLS handshake over the connected socket `fd` (taking it over, closed on failure) for
// server `host`; null with *err and *detail set when it fails.
std::unique_ptr<Stream> tls_connect(int fd, const std::string& host, Error* err, std::string* detail);

class Client {
 public:
  explicit Client(Target target) : t_(std::move(target)) {}

  // Sends `req` on a new connection and reads the answer into *res. `on_headers`, when given, sees
  // the status and headers before the body (false: stop, kCanceled); `on_data`, when given, gets the
  // body as it arrives instead of res->body (false: stop, kCanceled).
  Error send(const Request& req, Response* res, const std::function<bool(const Response&)>& on_headers = {},
             const std::function<bool(const char*, size_t)>& on_data = {});

  // Why the last send failed, in words, when it says more than the Error ("connection refused",
  // "unknown host 'x' (...)", the certificate's fault); "" otherwise.
  const std::string& detail() const { return detail_; }

 private:
  std::unique_ptr<Stream> open(Error* err);

  Target t_;
  std::string detail_;
};

}  // namespace tessera::cli::http
