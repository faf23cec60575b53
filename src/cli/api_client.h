// A small HTTP + JSON client of the Tessera REST API (docs/api.md) for the CLI verbs: the server URL,
// the bearer token, connect/read timeouts, and errors turned into one clear message (the server's
// error body, or why the server could not be reached and how to fix it). Over cli/http_client.h.
// Several controllers (docs/ha.md): `server` may list URLs separated by commas. A request goes to the
// one that answered last; a connection that cannot be made moves it to the next, and a standby's
// redirect (307) or "no leader yet" (503) to the leader, or the next, each URL tried once per request.
// An ApiClient owns its connection; one instance is not thread-safe (use one per thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "cli/http_client.h"
#include "core/status.h"

namespace tessera::cli {

struct ClientOptions {
  std::string server = "http://127.0.0.1:8420";  // one URL, or several separated by commas
  std::string token;               // empty = no Authorization header
  int connect_timeout_s = 5;
  int read_timeout_s = 60;
};

struct ApiResponse {
  int status = 0;                  // 2xx (an error status is returned as an Error)
  nlohmann::json body;             // null when the body is empty
};

class ApiClient {
 public:
  // Fails when the server URL is malformed (the message names --server).
  static Result<std::unique_ptr<ApiClient>> create(const ClientOptions& o);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  const std::string& base_url() const { return base_; }

  // `path` starts with '/' (e.g. "/api/v1/jobs?active=true"). The Error message is ready to print.
  Result<ApiResponse> get(const std::string& path);
  Result<ApiResponse> post(const std::string& path, const nlohmann::json& body,
                           const std::vector<std::pair<std::string, std::string>>& headers = {});
  // GET streaming a 2xx body into `sink` (which returns false to abort: the caller keeps the why);
  // an error answer is read whole and returned as an Error. `headers`, when given, gets the answer's
  // headers (names as sent).
  Status download(const std::string& path, const std::function<bool(const char*, size_t)>& sink,
                  std::map<std::string, std::string>* headers = nullptr);

 private:
  ApiClient() = default;
  // Turns a transport failure (no response) into "cannot reach the Tessera server at URL: ...".
  Error transport_error(http::Error err) const;
  http::Request request(const char* method, const std::string& path) const;  // with the token
  Error answer_error(int status, std::string_view body) const;
  Result<ApiResponse> finish(int status, const std::string& body) const;
  // Sends to the current server, moving to another (see above) while that may help.
  http::Error send(const http::Request& req, http::Response* res,
                   const std::function<bool(const http::Response&)>& on_headers = {},
                   const std::function<bool(const char*, size_t)>& on_data = {});
  void use(const ServerUrl& url);  // makes `url` the current server

  std::vector<ServerUrl> servers_;  // as given (at least one)
  std::string base_;
  std::string token_;  // "" = no Authorization header
  int read_timeout_s_ = 60;
  int connect_timeout_s_ = 5;
  std::unique_ptr<http::Client> http_;
};

}  // namespace tessera::cli
