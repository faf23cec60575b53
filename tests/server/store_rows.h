// Rows for store tests (server/store.h): a job, an event and a token with fixed, recognisable values.
// Header-only; used by store_conformance_test.cc and pg_store_test.cc.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "server/store.h"

namespace tessera::server::testing {

inline JobRow job(int64_t id, std::string state = "pending") {
  return {id, std::move(state), "team-a", "alice", 1700000000 + id, R"({"id":)" + std::to_string(id) + "}", {}};
}
inline EventRow event(int64_t job_id, std::string kind, int64_t time_ms = -1) {
  return {0, job_id, 1700000000, std::move(kind), "scheduler", R"({"n":1})", time_ms};
}
inline TokenRow token(std::string hash, std::string role = "member") {
  return {std::move(hash), "bob", std::move(role), "team-a", 1700000100, false, ""};
}

}  // namespace tessera::server::testing
