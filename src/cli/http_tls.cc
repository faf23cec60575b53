// tls_connect with OpenSSL, for tessera-full (the client-only `tessera` links http_no_tls.cc and hands
// https servers to tessera-full): TLS 1.2 or newer, the server's certificate verified against the
// system's CA certificates (SSL_CERT_FILE / SSL_CERT_DIR name others) and checked to be for the
// host name (or the IP address) the URL names.
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "cli/http_client.h"

namespace tessera::cli::http {
namespace {

class TlsStream final : public Stream {
 public:
  TlsStream(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  ~TlsStream() override {
    SSL_free(ssl_);
    ::close(fd_);
  }
  ssize_t read(char* buf, size_t n) override {
    const int r = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(n, INT_MAX)));
    if (r > 0) return r;
    const int e = SSL_get_error(ssl_, r);
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN) return 0;
    if (e == SSL_ERROR_WANT_READ) errno = EAGAIN;  // SO_RCVTIMEO ran out
    else if (e != SSL_ERROR_SYSCALL) errno = EPROTO;
    return -1;
  }
  bool write_all(const char* p, size_t n) override {
    while (n > 0) {
      const int w = SSL_write(ssl_, p, static_cast<int>(std::min<size_t>(n, INT_MAX)));
      if (w <= 0) {
        ERR_clear_error();
        return false;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

 private:
  int fd_;
  SSL* ssl_;
};

SSL_CTX* context() {
  static SSL_CTX* const ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    if (!c) return c;
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_default_verify_paths(c);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_options(c, SSL_OP_IGNORE_UNEXPECTED_EOF);  // a server that closes without close_notify ends the body
    return c;
  }();
  return ctx;
}

}  // namespace

std::unique_ptr<Stream> tls_connect(int fd, const std::string& host, Error* err, std::string* detail) {
  SSL_CTX* ctx = context();
  SSL* ssl = ctx ? SSL_new(ctx) : nullptr;
  if (!ssl) {
    ::close(fd);
    *err = Error::kTlsConnection;
    *detail = "OpenSSL could not set up a TLS connection";
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_fd(ssl, fd);
  in_addr a4;
  in6_addr a6;
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, host.c_str());
    SSL_set1_host(ssl, host.c_str());
  }
  if (SSL_connect(ssl) != 1) {
    if (const long v = SSL_get_verify_result(ssl); v != X509_V_OK) {
      *err = Error::kTlsVerification;
      *detail = X509_verify_cert_error_string(v);
    } else {
      *err = Error::kTlsConnection;
      if (const unsigned long e = ERR_peek_last_error(); e != 0) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        *detail = buf;
      }
    }
    ERR_clear_error();
    SSL_free(ssl);
    ::close(fd);
    return nullptr;
  }
  return std::make_unique<TlsStream>(fd, ssl);
}

}  // namespace tessera::cli::http
