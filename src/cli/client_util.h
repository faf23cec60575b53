// What the REST client verbs (cmd_client.cc, cmd_submit.cc, cmd_jobs.cc, cmd_workflow.cc,
// cmd_history.cc) share beyond the connection options: calls that fail the command with the server's
// message, job references ("12", "12_3"), job states, and fetching a filtered job list page by page.
// Single-threaded (one command per process).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"

namespace tessera::cli {

// GET/POST that fail the command (exit 1) with the client's message.
nlohmann::json call_get(const std::string& verb, ApiClient& api, const std::string& path);
ApiResponse call_post(const std::string& verb, ApiClient& api, const std::string& path, const nlohmann::json& body,
                      const std::vector<std::pair<std::string, std::string>>& headers = {});

void print_json(const nlohmann::json& j);
int64_t now_s();

std::string join(const std::vector<std::string>& v, const std::string& sep);
std::vector<std::string> split_commas(const std::string& s);

// A job id argument: a positive integer (fails the command with exit 2 otherwise).
int64_t parse_job_id(const std::string& verb, const std::string& s);
// A job reference "12" or "12_3" (element 3 of the array job 12); fails with exit 2 otherwise.
// Returns the text as the API takes it.
std::string parse_job_ref(const std::string& verb, const std::string& s, const std::string& what = "JOB");

// The job states of the API and whether one is final.
const std::vector<std::string>& job_states();
bool is_final_state(const std::string& state);
// --state a,b: each known, else fail (exit 2) naming `flag`.
void check_states(const std::string& verb, const std::string& states, const std::string& flag = "--state");

// A job record's reference: "ref" when the server gives it, else the id.
std::string job_ref_of(const nlohmann::json& job);

// GET /api/v1/jobs with `query` (starting with '&', values encoded) page by page until `limit` jobs
// or the end. `total` (if given) gets the server's count of matching jobs; `remaining` (if given) how
// many match after the last job returned (the last page's "remaining"; from total for older servers).
nlohmann::json fetch_jobs(const std::string& verb, ApiClient& api, const std::string& query, int64_t limit,
                          int64_t* total = nullptr, int64_t* remaining = nullptr);

// The token's user (GET /api/v1/whoami), for --me.
std::string whoami_user(const std::string& verb, ApiClient& api);

}  // namespace tessera::cli
