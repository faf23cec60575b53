// The agent's log endpoint. See log_server.h.
#include "agent/log_server.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

namespace tessera::agent {

namespace {

// A decimal integer >= 0 with nothing else (no sign, spaces or suffix); nullopt otherwise.
std::optional<int64_t> non_negative(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// The parameter's one value; an error when missing (if required), repeated or not an integer >= 0.
Result<std::optional<int64_t>> param(const std::multimap<std::string, std::string>& params, const std::string& name,
                                     bool required) {
  const auto n = params.count(name);
  if (n == 0) {
    if (required) return invalid_argument(name + ": required (an integer >= 0)");
    return std::optional<int64_t>();
  }
  if (n > 1) return invalid_argument(name + ": given more than once");
  const std::string& text = params.find(name)->second;
  auto v = non_negative(text);
  if (!v) return invalid_argument(name + ": must be an integer >= 0, got \"" + text.substr(0, 40) + "\"");
  return v;
}

LogReply error_reply(int status, const std::string& why) {
  return LogReply{status, nlohmann::json{{"error", why}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), -1};
}

}  // namespace

std::string log_path(const std::string& state_dir, int64_t job, int64_t attempt, int task) {
  return state_dir + "/logs/job-" + std::to_string(job) + "/attempt-" + std::to_string(attempt) + "/task-" +
         std::to_string(task) + ".log";
}

bool secret_matches(std::string_view given, std::string_view expected) {
  if (expected.empty()) return false;
  volatile unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | (g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

Result<LogQuery> parse_log_query(const std::multimap<std::string, std::string>& params) {
  LogQuery q;
  auto job = param(params, "job", true);
  if (!job.ok()) return job.error();
  auto attempt = param(params, "attempt", true);
  if (!attempt.ok()) return attempt.error();
  auto task = param(params, "task", true);
  if (!task.ok()) return task.error();
  if (**task > std::numeric_limits<int>::max()) return invalid_argument("task: out of range");
  auto offset = param(params, "offset", false);
  if (!offset.ok()) return offset.error();
  auto limit = param(params, "limit", false);
  if (!limit.ok()) return limit.error();
  if (*limit && **limit < 1) return invalid_argument("limit: must be >= 1 byte");
  q.job = **job, q.attempt = **attempt, q.task = int(**task);
  q.offset = offset->value_or(0);
  q.limit = std::min(limit->value_or(kMaxLogChunk), kMaxLogChunk);
  return q;
}

LogReply serve_log(const std::string& state_dir, std::string_view expected_secret, std::string_view given_secret,
                   const std::multimap<std::string, std::string>& params) {
  if (!secret_matches(given_secret, expected_secret)) return error_reply(403, "wrong or missing log secret");
  auto q = parse_log_query(params);
  if (!q.ok()) return error_reply(400, q.error().message);
  std::ifstream in(log_path(state_dir, q->job, q->attempt, q->task), std::ios::binary);
  if (!in)
    return error_reply(404, "no log for job " + std::to_string(q->job) + " attempt " + std::to_string(q->attempt) + " task " +
                                std::to_string(q->task) + " on this node (not started yet?)");
  in.seekg(0, std::ios::end);
  const int64_t size = std::max<int64_t>(0, int64_t(in.tellg()));
  const int64_t offset = std::min(q->offset, size);
  const int64_t n = std::min(q->limit, size - offset);
  LogReply r;
  r.body.assign(size_t(n), '\0');
  in.seekg(offset);
  in.read(r.body.data(), n);
  r.body.resize(size_t(std::max<std::streamsize>(0, in.gcount())));
  r.next_offset = offset + int64_t(r.body.size());
  return r;
}

}  // namespace tessera::agent
