// Internals of `tessera bench cluster` shared by its files: the submission engine and the end-of-run
// scans of the server's jobs, events and nodes (both in bench_submit.cc). Not an API.
// Thread-safety: run_submissions runs its own client threads; the rest are plain functions.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_cluster.h"
#include "bench/hollow_nodes.h"
#include "bench/server_child.h"

namespace tessera::bench {

// One job to submit: when (seconds after the start) and its spec.
struct Submission {
  double due_s = 0;
  std::string body;  // the job spec, JSON
  int gpus = 0;      // all its tasks' GPUs
};

struct SubmitRecord {
  int64_t job = 0;
  int64_t index = 0;  // the submission's index (next(i))
  Clock::time_point sent{};
  double ack_ms = 0;
  bool capacity_free = false;  // the GPUs of every acknowledged unfinished job, this one's too, fit
};

struct SubmitOutcome {
  std::vector<SubmitRecord> records;
  int64_t submitted = 0, errors = 0;
  std::string first_error;
  double seconds = 0;  // first send to last acknowledgement
};

struct SubmitControl {
  int port = 0;
  std::string token;
  int clients = 8;
  Clock::time_point start{}, deadline = Clock::time_point::max();
  int64_t capacity_gpus = 0;
  std::atomic<int64_t>* outstanding_gpus = nullptr;  // acknowledged, unfinished
  std::atomic<int64_t>* acked = nullptr;             // progress counter
  std::atomic<bool>* stop = nullptr;
  std::function<void(int64_t job)> on_acked;          // from client threads
};

// C clients take submissions in order from `next(i)` (thread-safe; nullopt = no more), each waits
// for its due time and POSTs it on its own keep-alive connection.
SubmitOutcome run_submissions(const SubmitControl& c, const std::function<std::optional<Submission>(int64_t)>& next);

// What the server says at the end.
struct ServerScan {
  int64_t jobs = 0, succeeded = 0, failed = 0, cancelled = 0, active = 0, other = 0, restarted = 0;
  int64_t unexpected_failures = 0;   // failed jobs whose name does not start with "fail-"
  int64_t nodes_not_ready_ever = 0;  // distinct nodes with a node_not_ready event
  int64_t jobs_lost = 0;             // distinct jobs with a lost event
  int64_t not_ready_now = 0;
  std::string error;
};
ServerScan scan_server(RestClient& admin);
// Jobs still pending, running or checkpointing (-1 when the server did not answer).
int64_t active_jobs(RestClient& admin);

// --compare-sim (bench_compare.cc): the acknowledged jobs (their specs from next(index), arrivals
// when sent, the server's start and finish times, their last task's end on its node) against the
// simulator on the same cluster YAML; fills res.compare (or res.compare_error).
void compare_run(const BenchClusterOptions& o, const std::string& cluster_yaml, const std::vector<SubmitRecord>& records,
                 const std::function<std::optional<Submission>(int64_t)>& next, Clock::time_point t0, int64_t t0_unix_ms,
                 const std::map<int64_t, Clock::time_point>& work_ends, RestClient& admin, BenchClusterResult& res);

}  // namespace tessera::bench
