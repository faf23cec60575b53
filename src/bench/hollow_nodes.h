// Hollow nodes: a fleet of simulated GPU nodes that speak the real agent protocol (docs/api.md,
// "Agent protocol") over real HTTP to a real controller, with fake GPUs and tasks that "run" for
// their declared duration without a process. Many nodes share a few event-loop threads (a timer heap,
// an epoll set and a libcurl multi handle each, bench/http_channel.h); every node has its own channel
// for register and heartbeats and, when watching, one for its long poll, over keep-alive connections,
// so 5,000 nodes fit in one process.
//
// What a hollow node does, as the real agent (src/agent/agent.cc) does:
// - registers with a fake inventory (the model's catalog memory, synthetic UUIDs, source "fake");
//   again when a heartbeat is answered 409 not_registered;
// - heartbeats every heartbeat_interval_ms (the controller's answer; the first beat at a random phase
//   so the fleet does not beat in step), and at once after any task state change (start, exit);
// - keeps the tasks of the answer's `run` list: task 0 of a job reports a master port and runs at
//   once, the other tasks wait ("starting") until the controller passes the port on; a task's
//   duration comes from its command: ["sleep","S"] runs S seconds (fractional allowed), ["true"]
//   0 s and succeeds, ["false"] fails with exit 1, anything else runs `default_task_s`;
// - stops what is not listed or is in `stop` (reported `checkpointed` with a checkpoint path when
//   asked to checkpoint, `stopped` otherwise), and fences its tasks when no heartbeat was answered
//   for task_lease_ms;
// - watches (POST /api/v1/agent/watch, {node, seen, wait_ms}) when asked and the server has it: an
//   answer whose seq exceeds what it saw makes it heartbeat at once. A 404 turns watching off for
//   the whole fleet (plain heartbeats).
// It measures each heartbeat's round trip and records when each task's assignment first arrived.
//
// Thread-safety: HollowFleet's public methods are thread-safe (commands are posted to the loops).
// Callbacks run on loop threads and must be quick and thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::bench {

using Clock = std::chrono::steady_clock;

struct HollowNodeSpec {
  std::string name;
  int gpus = 8;
  std::string gpu_model = "H100-80GB-SXM";  // catalog name
};

struct HollowFleetOptions {
  std::string server;   // the controller's agent listener, HOST:PORT or http://HOST:PORT
  std::string token;    // an agent token that may speak for every node (or an admin token)
  int loops = 2;        // event-loop threads
  bool watch = false;   // hold a watch (long poll) open per node when the server answers it
  int64_t watch_wait_ms = 20000;
  double default_task_s = 60;  // a task whose command is not sleep/true/false
  int64_t register_spread_ms = 2000;  // registrations spread over this long at start
  int64_t heartbeat_timeout_ms = 15000;  // an unanswered heartbeat is given up after this
  uint64_t seed = 1;
  // A task of `job` that held `gpus` GPUs ended in `state`: succeeded, failed, stopped (asked, fenced
  // or the node went silent) or checkpointed.
  std::function<void(int64_t job, int gpus, const std::string& state)> on_task_end;
};

// A task assignment's first arrival at a node.
struct TaskArrival {
  size_t node = 0;  // the fleet's index of the node it arrived at
  int64_t job = 0, attempt = 0;
  int task = 0, tasks = 1;
  Clock::time_point at{};
};

struct FleetStats {
  int64_t registered = 0;          // nodes registered now
  int64_t registrations = 0;       // successful registrations in all (re-registrations included)
  int64_t heartbeats = 0;          // answered 200
  int64_t heartbeat_failures = 0;  // no answer, or an answer other than 200 / 409 not_registered
  int64_t watches_answered = 0, watch_wakeups = 0;  // wakeups: answers whose seq had moved
  bool watch_supported = false;    // a watch was answered 200 at least once
  bool watch_off = false;          // the server answered a watch 404: watching is off
  int64_t tasks_started = 0, tasks_ended = 0, tasks_failed = 0, tasks_stopped = 0;
  int64_t tasks_running = 0;       // tasks running now, fleet-wide
  int64_t gpus_busy = 0;           // GPUs held by running tasks now
  std::string last_error;          // the latest failure's text, for progress lines
};

class HollowFleet {
 public:
  static Result<std::unique_ptr<HollowFleet>> start(std::vector<HollowNodeSpec> nodes, HollowFleetOptions options);
  ~HollowFleet();  // stops the loops
  HollowFleet(const HollowFleet&) = delete;
  HollowFleet& operator=(const HollowFleet&) = delete;

  size_t size() const;
  const HollowNodeSpec& node(size_t i) const;
  // Stops heartbeating and watching, and forgets its tasks (a machine that died: its watchdog killed
  // them); the controller sees a silent node.
  void go_silent(size_t i);
  // Comes back: registers again (with no tasks) and heartbeats as before.
  void come_back(size_t i);
  bool silent(size_t i) const;

  FleetStats stats() const;
  // Heartbeat round trips in ms (answered 200 only), all nodes, since start or the last reset.
  std::vector<double> heartbeat_rtts_ms() const;
  void reset_heartbeat_rtts();
  // Every task assignment's first arrival so far.
  std::vector<TaskArrival> arrivals() const;

  struct Impl;

 private:
  explicit HollowFleet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A task's run time and outcome from its command (see above): {seconds, exit code}.
struct HollowOutcome {
  double seconds = 0;
  int exit_code = 0;
};
HollowOutcome hollow_outcome(const std::vector<std::string>& command, double default_s);

}  // namespace tessera::bench
