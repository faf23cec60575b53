// `tessera bench api`: the controller's speed through its real HTTP API on loopback. Starts an
// in-process server (SQLite store in a temporary directory, the built-in cluster), then
//  1. durable submissions: `clients` threads submit 1-GPU jobs for `seconds` over keep-alive
//     connections; every 201 means the job is on disk (synchronous=FULL, group commit);
//  2. listing: tops the store up to `list_jobs` jobs, then times GET /api/v1/jobs pages (first page,
//     random pages by cursor, a filtered page) and a full walk of every job in pages of 1000.
// Single-threaded except for the client threads and the server's own threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace tessera::server {

struct BenchApiOptions {
  int clients = 64;
  double seconds = 10;
  int64_t list_jobs = 100000;
  int list_requests = 200;
  std::string data_dir;  // empty = a fresh temporary directory, removed afterwards
};

struct BenchApiResult {
  int64_t submitted = 0;
  double submit_seconds = 0;
  double submissions_per_s = 0;
  double submit_ms_p50 = 0, submit_ms_p99 = 0;
  int64_t store_batches = 0, store_transactions = 0;
  int64_t jobs_listed_over = 0;  // jobs in the store while listing
  double list_page_ms_p50 = 0, list_page_ms_p99 = 0;          // GET /jobs?limit=100&after=random
  double list_filtered_ms_p50 = 0, list_filtered_ms_p99 = 0;  // ?state=pending&queue=team-a&limit=100
  double list_all_s = 0;                                       // every job, pages of 1000
};

Result<BenchApiResult> run_bench_api(const BenchApiOptions& o, const std::function<void(const std::string&)>& progress = {});

}  // namespace tessera::server
