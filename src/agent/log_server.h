// The agent's log endpoint, as plain functions (the agent serves them with httplib): the controller
// fetches task logs with GET /logs?job=J&attempt=A&task=T[&offset=BYTES][&limit=BYTES] and the
// header X-Tessera-Log-Secret (the secret this agent registered with). The secret is compared in
// constant time; every bad parameter is a 400 naming it; a missing log is a 404.
//
// Stateless; thread-safe (the log server's threads call it; it only reads log files).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::agent {

constexpr int64_t kMaxLogChunk = 1 << 20;  // bytes per answer (the default limit)

// STATE_DIR/logs/job-J/attempt-A/task-T.log
std::string log_path(const std::string& state_dir, int64_t job, int64_t attempt, int task);

// Equal strings, in time that depends only on the lengths (an empty `expected` never matches).
bool secret_matches(std::string_view given, std::string_view expected);

struct LogQuery {
  int64_t job = 0, attempt = 0;
  int task = 0;
  int64_t offset = 0;              // >= 0; past the end reads nothing
  int64_t limit = kMaxLogChunk;    // 1..kMaxLogChunk (larger asks are capped)
};
// job, attempt, task: required integers >= 0; offset >= 0 and limit >= 1 when given. Each value
// must be a plain decimal integer given once; the error names the parameter.
Result<LogQuery> parse_log_query(const std::multimap<std::string, std::string>& params);

struct LogReply {
  int status = 200;
  std::string body;          // the bytes, or {"error": "..."} for other statuses
  int64_t next_offset = -1;  // with 200: where the next read starts
};
LogReply serve_log(const std::string& state_dir, std::string_view expected_secret, std::string_view given_secret,
                   const std::multimap<std::string, std::string>& params);

}  // namespace tessera::agent
