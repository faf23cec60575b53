// The agent protocol's messages (docs/api.md, "Agents") as typed values. An agent's registration
// and heartbeat bodies are decoded and checked here, at the edge, before anything reaches the state
// thread: a field of the wrong type, out of range or not printable UTF-8 is an invalid_argument error
// naming it ("tasks[2].exit_code: must be an integer"). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::server {

struct InventoryGpu {
  std::string model;
  bool mig_enabled = false;
};

struct AgentRegistration {
  std::string node;
  std::string address;     // where other nodes reach this one (MASTER_ADDR)
  int log_port = 0;        // 0 = no log server
  std::string log_secret;  // sent back by the controller when it fetches logs
  std::string version;
  std::string gpu_source;  // nvml | fake | ""
  std::vector<InventoryGpu> gpus;
  std::map<std::string, std::string> topology;  // level -> name, as the agent was told
};

// What an agent says of one task. `starting` (waiting for its rendezvous port) reads as running.
enum class ReportedState : uint8_t { kRunning, kSucceeded, kFailed, kCheckpointed, kStopped };
const char* reported_state_name(ReportedState s);  // "running", "succeeded", ...

struct TaskReport {
  int64_t job = 0, attempt = 0;
  int task = 0;
  ReportedState state = ReportedState::kRunning;
  int exit_code = 0;
  std::string checkpoint;          // the newest checkpoint's path, "" = none
  bool answered_request = false;   // the task acknowledged a checkpoint request
  int master_port = 0;             // 0 = not known yet
  int64_t saves = 0, cost_ms = -1;  // checkpoints timed so far and the last one's cost (-1 unknown)
  std::string message;             // why it failed when the exit code does not say (<= 1000 bytes)
};

// A GPU's last sample; -1 = the agent did not know.
struct GpuSample {
  int64_t utilization_pct = -1;  // 0..100
  int64_t memory_used_mib = -1;
};

struct MigLayoutReport {
  int gpu = 0;
  std::vector<std::pair<std::string, int>> instances;  // (profile name, start slice)
};

struct HeartbeatReport {
  std::string node;
  std::vector<TaskReport> tasks;
  std::vector<GpuSample> gpus;  // by GPU index
  std::vector<MigLayoutReport> mig;
  // A spot interruption notice: when it was noticed (0 = unknown) and the reclaim time (-1 = the
  // pool's notice).
  bool notice = false;
  int64_t noticed_at = 0, reclaim_at = -1;
  // A planned stop of the agent (tessera up's Ctrl-C, an agent stopped with --stop-tasks-on-exit): the
  // node takes no new work, and its jobs are checkpointed and requeued without a restart counted.
  bool leaving = false;
  int64_t round_trip_ms = -1;  // the agent's previous heartbeat, sent to answered (-1: not measured)
};

// An agent's watch (a long poll): answered as soon as the node's notice number differs from `seen`,
// or after wait_ms with the current one.
struct WatchRequest {
  std::string node;
  int64_t seen = 0;
  int64_t wait_ms = 20000;  // 100 .. 60000
};

Result<AgentRegistration> parse_registration(const nlohmann::json& body);
Result<WatchRequest> parse_watch(const nlohmann::json& body);
Result<HeartbeatReport> parse_heartbeat(const nlohmann::json& body);

}  // namespace tessera::server
