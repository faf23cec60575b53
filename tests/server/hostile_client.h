// Test helpers for hostile clients: a raw HTTP request whose bytes are sent exactly as given (paths
// with %FF, headers with byte 0xFF, bodies that are not UTF-8), and the server process's health
// (alive, resident memory). Loopback only. Not thread-safe per call; each call is its own connection.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace tessera::testing {

struct RawReply {
  int status = 0;      // 0 = no answer (connection refused, closed without a status line, or timed out)
  std::string body;
};

// Sends `request` (a whole HTTP request, bytes as given) to 127.0.0.1:port and reads until the server
// closes or `timeout_s` passes. Ask for `Connection: close` in the request to get the close.
inline RawReply raw_http(int port, const std::string& request, int timeout_s = 10) {
  RawReply out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return out;
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += size_t(n);
  }
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, size_t(n));
  }
  ::close(fd);
  if (got.rfind("HTTP/1.", 0) == 0 && got.size() >= 12) out.status = std::atoi(got.substr(9, 3).c_str());
  if (const auto at = got.find("\r\n\r\n"); at != std::string::npos) out.body = got.substr(at + 4);
  return out;
}

// A request with the given method, target (sent as is), token, extra header lines and body.
inline std::string raw_request(const std::string& method, const std::string& target, const std::string& token,
                               const std::string& body = "", const std::string& extra_headers = "",
                               const std::string& content_type = "application/json") {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) r += "Authorization: Bearer " + token + "\r\n";
  r += extra_headers;
  if (!body.empty() || method == "POST") r += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return r + "\r\n" + body;
}

// Empty while child `pid` runs; else how it ended ("exit status N", "signal N (name)"). Reaps it.
inline std::string how_it_ended(pid_t pid) {
  int status = 0;
  const pid_t r = pid > 0 ? ::waitpid(pid, &status, WNOHANG) : -1;
  if (r == 0) return "";
  if (r < 0) return "not a child of this process any more";
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

// Whether the child `pid` is still running (not exited, not a zombie).
inline bool process_alive(pid_t pid) { return how_it_ended(pid).empty(); }

// Resident memory of `pid` in KiB (VmRSS), or -1.
inline int64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  return -1;
}

}  // namespace tessera::testing
