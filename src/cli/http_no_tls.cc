// tls_connect for the client-only `tessera`, which has no TLS library so that its start stays short:
// src/cli/main.cc hands every command line that may name an https server to tessera-full (whose
// http_tls.cc does TLS) before a verb runs, so this is reached only when that check was bypassed.
#include <unistd.h>

#include "cli/http_client.h"

namespace tessera::cli::http {

std::unique_ptr<Stream> tls_connect(int fd, const std::string&, Error* err, std::string* detail) {
  ::close(fd);
  *err = Error::kNoTls;
  *detail = "this tessera binary has no TLS; run tessera-full (built beside it) for an https server";
  return nullptr;
}

}  // namespace tessera::cli::http
