// `tessera bench attack`: the controller under hostile connections, through its real HTTP API on
// loopback. Starts an in-process server with agents required (SQLite store in a temporary directory,
// the built-in cluster), registers its nodes with simulated agents that heartbeat every
// `heartbeat_ms` on keep-alive connections (to the agent listener with `agent_listener`, else the
// main port), and opens `slow` connections that each send one header line every `slow_line_ms` and
// `idle` connections that send nothing, for `seconds`. Meanwhile a prober asks GET /healthz on a new
// connection every 50 ms. Reports heartbeat and /healthz latency (p50, p99, max), requests that got no
// answer, and how many times a node went NotReady (each is a node whose jobs were requeued).
// Threads: one per simulated agent and per 64 attack connections, plus the prober.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace tessera::server {

struct BenchAttackOptions {
  int slow = 1000;          // connections sending a header line every slow_line_ms
  int idle = 200;           // connections sending nothing
  int slow_line_ms = 2000;
  double seconds = 20;
  int heartbeat_ms = 1000;  // what the simulated agents use; NotReady after 3 missed
  bool agent_listener = true;
  int max_connections = 4096;
};

struct BenchAttackResult {
  int64_t heartbeats = 0, heartbeats_failed = 0;
  double heartbeat_ms_p50 = 0, heartbeat_ms_p99 = 0, heartbeat_ms_max = 0;
  int64_t probes = 0, probes_failed = 0;
  double healthz_ms_p50 = 0, healthz_ms_p99 = 0, healthz_ms_max = 0;
  int64_t attack_connections_open = 0;  // attack connections the server had accepted at the end
  int64_t not_ready = 0;                // NotReady transitions during the attack
};

Result<BenchAttackResult> run_bench_attack(const BenchAttackOptions& o,
                                           const std::function<void(const std::string&)>& progress = {});

}  // namespace tessera::server
