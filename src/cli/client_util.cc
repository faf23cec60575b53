// Shared pieces of the REST client verbs: see client_util.h.
#include "cli/client_util.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <iostream>
#include <sstream>

#include "cli/client_args.h"
#include "cli/format.h"

namespace tessera::cli {

using nlohmann::json;

json call_get(const std::string& verb, ApiClient& api, const std::string& path) {
  auto r = api.get(path);
  if (!r.ok()) fail(verb, r.error().message);
  return r->body;
}

ApiResponse call_post(const std::string& verb, ApiClient& api, const std::string& path, const json& body,
                      const std::vector<std::pair<std::string, std::string>>& headers) {
  auto r = api.post(path, body, headers);
  if (!r.ok()) fail(verb, r.error().message);
  return std::move(*r);
}

void print_json(const json& j) { std::cout << j.dump(2) << "\n"; }

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) out.push_back(p);
  return out;
}

namespace {

std::optional<int64_t> positive_int(std::string_view s, bool allow_zero) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < (allow_zero ? 0 : 1)) return std::nullopt;
  return v;
}

}  // namespace

int64_t parse_job_id(const std::string& verb, const std::string& s) {
  const auto id = positive_int(s, false);
  if (!id) fail(verb, "JOB: '" + s + "' is not a job id; give the number `tessera jobs` shows (e.g. 17)", 2);
  return *id;
}

std::string parse_job_ref(const std::string& verb, const std::string& s, const std::string& what) {
  const size_t us = s.find('_');
  const bool ok = us == std::string::npos ? positive_int(s, false).has_value()
                                          : positive_int(std::string_view(s).substr(0, us), false) &&
                                                positive_int(std::string_view(s).substr(us + 1), true);
  if (!ok)
    fail(verb, what + ": '" + s + "' is not a job reference; give a job id (17), an array job id (12: all its elements) or " +
                   "an array element (12_3)", 2);
  return s;
}

const std::vector<std::string>& job_states() {
  static const std::vector<std::string> k = {"pending", "running", "checkpointing", "succeeded", "failed", "cancelled", "timeout"};
  return k;
}

bool is_final_state(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled" || state == "timeout";
}

void check_states(const std::string& verb, const std::string& states, const std::string& flag) {
  for (const std::string& s : split_commas(states))
    if (std::find(job_states().begin(), job_states().end(), s) == job_states().end())
      fail(verb, flag + ": unknown state '" + s + "' (known: " + join(job_states(), ", ") + ")", 2);
}

std::string job_ref_of(const json& job) {
  const std::string ref = json_text(job, "ref", "");
  return ref.empty() ? json_text(job, "id") : ref;
}

json fetch_jobs(const std::string& verb, ApiClient& api, const std::string& query, int64_t limit, int64_t* total,
                int64_t* remaining) {
  json jobs = json::array();
  std::optional<int64_t> after, left;
  int64_t count = 0;
  while (static_cast<int64_t>(jobs.size()) < limit) {
    const int64_t page = std::min<int64_t>(1000, limit - static_cast<int64_t>(jobs.size()));
    std::string path = "/api/v1/jobs?limit=" + std::to_string(page) + query;
    if (after) path += "&after=" + std::to_string(*after);
    const json body = call_get(verb, api, path);
    if (!body.is_object() || !body.contains("jobs") || !body["jobs"].is_array())
      fail(verb, "the server's answer has no \"jobs\" array; is " + api.base_url() + " a Tessera server of this version?");
    for (const auto& j : body["jobs"]) {
      if (static_cast<int64_t>(jobs.size()) >= limit) break;
      jobs.push_back(j);
    }
    count = json_int(body, "total").value_or(static_cast<int64_t>(jobs.size()));
    left = json_int(body, "remaining");
    after = json_int(body, "next_after");
    if (!after || body["jobs"].empty()) break;
  }
  if (total) *total = std::max<int64_t>(count, static_cast<int64_t>(jobs.size()));
  if (remaining) *remaining = std::max<int64_t>(0, left.value_or(count - static_cast<int64_t>(jobs.size())));
  return jobs;
}

std::string whoami_user(const std::string& verb, ApiClient& api) {
  const json me = call_get(verb, api, "/api/v1/whoami");
  const std::string user = json_text(me, "user", "");
  if (user.empty()) fail(verb, "--me: the server did not say which user the token acts as (GET /api/v1/whoami)");
  return user;
}

}  // namespace tessera::cli
