// The controller: owns the cluster, queue and job state of `tessera server`, runs the scheduling
// cycle from src/core and persists every change through the Store.
//
// Threads. One state thread owns every piece of state below; other threads (HTTP handlers, the
// store's writer) never touch it: they post commands (closures) and wait for the answer. The
// scheduling cycle runs on a second thread over an immutable copy of the state (a Snapshot); its
// decisions come back as a command and are re-checked against the state as it is then (a job that
// was cancelled meanwhile is not started; a placement that no longer applies is dropped).
// Cycles run when something changed (submission, completion, node change), coalesced, and at least
// every `cycle_interval`.
//
// Durability. A call that changes state answers only after its store batch is durable (group commit:
// the state thread goes on while the store's writer syncs). Batches commit in the order the state
// thread queued them, so a job's start can never be durable before its submission.
//
// Invariants: the ClusterState holds exactly the placements of running and checkpointing jobs, plus
// (with agents) those of tasks of ended attempts that their agents still run;
// every job state change has an event; job ids grow and are never reused.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <atomic>
#include <future>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "config/job_spec.h"
#include "core/sched/apply.h"
#include "core/status.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/store.h"

namespace tessera::server {

using Json = nlohmann::json;

// How the controller applies the scheduler's decisions (core/sched/apply.h): a job that must leave
// leaves at once (with agents, tasks whose processes may still run keep their GPUs until reported
// gone); a run counts as started when it gets its GPUs; checkpoints are learnt from the agents' acks.
// The controller adds which nodes take work (admin state, agent ready) and which tasks stay held.
ApplyOptions controller_apply_options();

// What a job placed by an agentless controller says (its reason in the API), and what
// `tessera server --agentless` prints at start.
inline constexpr const char* kAgentlessReason =
    "placed, but no agent runs tasks on this server (--agentless: placement only); it never executes and ends "
    "only when cancelled or reported through the agent protocol";

struct HeartbeatReport;  // agent_protocol.h

// One command's answer, set exactly once from whichever thread has it (the state thread, or the
// store's writer once a write is durable): it fulfils a waiting caller's future (Controller::answer)
// or runs a callback (answer_async). A second set_value throws std::future_error, as a promise's
// does. One dropped unset (the controller stopped first) answers "unavailable".
template <class T>
class Answer {
 public:
  explicit Answer(std::function<void(Result<T>)> done) : done_(std::move(done)) {}
  ~Answer() {
    if (set_.exchange(true)) return;
    try {
      done_(Error{ErrorCode::kUnavailable, "the server is shutting down; retry shortly"});
    } catch (...) {
    }
  }
  Answer(const Answer&) = delete;
  Answer& operator=(const Answer&) = delete;
  void set_value(Result<T> v) {
    if (set_.exchange(true)) throw std::future_error(std::future_errc::promise_already_satisfied);
    done_(std::move(v));
  }

 private:
  std::function<void(Result<T>)> done_;
  std::atomic<bool> set_{false};
};

struct ControllerOptions {
  int64_t cycle_interval_ms = 1000;  // a cycle at least this often while work waits
  int64_t min_cycle_gap_ms = 20;     // event-driven cycles coalesce within this gap
  // Unix seconds. Tests may pass a controllable clock.
  std::function<int64_t()> clock;
  // Agent liveness (heartbeat ages, the NotReady timeout) runs on this monotonic clock; tests may pass
  // a controllable one. Default: std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> steady_clock;
  // With agents (the default for `tessera server`), a node takes work only once its agent has
  // registered, and becomes NotReady when no heartbeat came for agent_timeout_ms: its jobs are
  // requeued by their restart policy. Without (`--agentless`), nodes are ready as configured and
  // nothing runs the tasks: for trying policies and for API tests.
  bool agents_required = false;
  int64_t heartbeat_interval_ms = 5000;  // what agents are told to use
  int64_t agent_timeout_ms = 15000;      // three missed heartbeats
  // Fencing (docs/containers.md): an agent that has had no heartbeat answered for this long kills its
  // tasks, and a job lost with its node restarts no sooner than this long after the node's last
  // heartbeat, so the old attempt and the new one never run at once. 0 = max(60 s, 4 x the timeout).
  int64_t task_lease_ms = 0;
  int64_t lease_ms() const { return task_lease_ms > 0 ? task_lease_ms : std::max<int64_t>(60000, 4 * agent_timeout_ms); }
  int64_t utilisation_step_s = 10;       // GPU utilisation samples: one per step, 24 h kept
  // Viewers see every job's command, environment (but secret values) and logs; otherwise only admins
  // and the job's own team (queue subtree) do.
  bool viewers_see_job_details = false;
};

struct JobFilter {
  std::string queue;                // matches the queue's subtree
  std::string user;
  std::vector<std::string> states;  // empty = all
  bool active_only = false;
  int64_t after = 0;                // ids greater than this
  int64_t limit = 100;
  std::string name;                 // exact job name
  int64_t array = 0;                // only the elements of this array job
  int64_t finished_after = -1;      // only jobs that ended at or after this (unix s); -1 = any
  int64_t finished_before = -1;     // only jobs that ended before this; -1 = any
};

// The workflow verbs on a job reference (Controller::job_verb).
enum class JobVerb : uint8_t { kHold, kRelease, kRequeue, kCancel, kSignal };

class Controller {
 public:
  // Loads everything from `store` (restart recovery: running jobs keep their placements until their
  // agents report) and starts the state and scheduling threads. The store must outlive the controller.
  static Result<std::unique_ptr<Controller>> start(config::ClusterConfig config, Store* store, ControllerOptions options);
  ~Controller();  // stops the threads (pending calls fail with kUnavailable)

  // Jobs. Each returns the JSON docs/api.md gives for the call.
  Result<Json> submit(const Principal& who, config::JobSpec spec, const std::string& idempotency_key, bool* created);
  Result<Json> list_jobs(const Principal& who, const JobFilter& filter);
  Result<Json> show_job(const Principal& who, int64_t id);
  Result<Json> cancel_job(const Principal& who, int64_t id) { return job_verb(who, config::JobRef{id, -1}, JobVerb::kCancel); }
  // hold / release / requeue (then held when `hold_after`) / cancel the jobs `ref` names ("12", "12_3";
  // an array job id: every element). One job: its record; an array: {"array_job_id", "jobs": [the
  // records changed], "skipped": [{"ref", "reason"}]}. Pending jobs can be held; held ones released
  // (an admin's hold on another's job by admins only); running ones requeued (checkpoint first when
  // they can; no restart counted) and ended ones too (a new attempt).
  // kSignal sends `signal` ("USR1" or "SIGUSR1"; HUP INT QUIT KILL USR1 USR2 TERM CONT STOP TSTP WINCH
  // ALRM) to every task of a running job, once (the latest of several sent between heartbeats).
  Result<Json> job_verb(const Principal& who, const config::JobRef& ref, JobVerb verb, bool hold_after = false,
                        const std::string& signal = "");
  // The job id a reference names (ID_N: that element's own id).
  Result<int64_t> job_id(const config::JobRef& ref);
  Result<Json> set_priority(const Principal& who, int64_t id, const std::string& priority_class);
  // Queues and nodes.
  Result<Json> queues(const Principal& who);
  Result<Json> nodes(const Principal& who);
  // op: "cordon", "drain" or "resume".
  Result<Json> node_op(const Principal& who, const std::string& node, const std::string& op, const std::string& reason);
  // A spot interruption notice (admin): the node is reclaimed at reclaim_at, or notice_s from now,
  // or (both < 0) after its pool's notice. Refused for nodes outside spot pools.
  Result<Json> node_interrupt(const Principal& who, const std::string& node, int64_t notice_s, int64_t reclaim_at);
  // Agents: registration (inventory checked against the configured node), then heartbeats: a node's
  // report in, its desired state out (docs/api.md, "Agents").
  Result<Json> agent_register(const Principal& who, const Json& registration);
  Result<Json> agent_heartbeat(const Principal& who, const Json& report);
  // The same without blocking the caller: `done` gets the answer (on the state thread, or the store's
  // writer once the report's changes are durable). The HTTP API uses this, so a heartbeat holds no
  // server thread while it waits.
  void agent_heartbeat_async(const Principal& who, const Json& report, std::function<void(Result<Json>)> done);
  // An agent's watch (a long poll): `done` gets {seq} once the node's notice number differs from the
  // body's `seen` (something to tell it: heartbeat now), or after its wait_ms. Called from any thread;
  // `done` runs on the state thread (or is dropped unanswered when the controller stops).
  void agent_watch(const Principal& who, const Json& body, std::function<void(Result<Json>)> done);
  // Where task `task` of job `id` ran last (for logs): {node, address, log_port, log_secret, attempt}.
  // attempt > 0: that attempt's (its node from the job's started event; the agent keeps the logs of
  // attempts it ran until it forgets the job).
  Result<Json> log_source(const Principal& who, int64_t id, int task, int64_t attempt = 0);
  // Tokens (admin).
  // `node`: agent tokens only (required): the node name or fnmatch pattern the token speaks for.
  Result<Json> create_token(const Principal& who, const std::string& user, const std::string& role, const std::string& queue,
                            const std::string& node = "");
  Result<Json> list_tokens(const Principal& who);
  // Revokes the token whose id (a prefix of its hash, as listed) is `id`; in force for the next
  // request. The last admin token cannot be revoked.
  Result<Json> revoke_token(const Principal& who, const std::string& id);
  Result<Json> events(const Principal& who, int64_t after, int64_t limit);
  // Replaces queues, priority classes and the scheduler's configuration. Refused (old config kept,
  // the error says why) when it is invalid, changes the nodes, or drops a queue that holds jobs.
  Status reload(config::ClusterConfig config, const std::string& who);
  // Records a denied call in the event log (the HTTP layer denies calls before they get here too).
  void audit_denied(const Principal& who, const std::string& what, const std::string& why);
  Json health();

  // Metrics (docs/metrics.md): gauges computed on the state thread at the call, plus the counters
  // and histograms updated where events happen. Unsorted; metrics::render writes them.
  std::vector<metrics::Family> metric_families();
  // GET /api/v1/utilisation: the last `minutes` (1..1440) of the utilisation samples per GPU model
  // and pool: {"step_s", "series": [{"model", "pool", "total_milli", "points": [[t, alloc, used]]}]}.
  Result<Json> utilisation(const Principal& who, int64_t minutes);

  // A copy of the configuration in force (nodes, queues, classes, catalog), for reports.
  config::ClusterConfig config_snapshot();

  TokenRegistry& tokens() { return tokens_; }
  Store& store() { return *store_; }
  // Blocks until a cycle has run after the call (tests and benchmarks).
  void wait_for_cycle();

 // The state the state thread owns (defined in controller.cc).
  struct State;

 private:
  Controller(Store* store, ControllerOptions options);
  // The one way other threads reach the state: `fn` runs on the state thread and answers through its
  // Answer, at once or later (e.g. once its writes are durable). An exception it throws is logged
  // and answered as an internal error for that call only. answer() blocks until answered;
  // answer_async() returns at once and `done` gets the answer.
  template <class T>
  Result<T> answer(std::function<void(State&, const std::shared_ptr<Answer<T>>&)> fn);
  template <class T>
  void answer_async(std::function<void(State&, const std::shared_ptr<Answer<T>>&)> fn, std::function<void(Result<T>)> done);
  // answer() for a function that returns its result at once.
  template <class T>
  Result<T> call(std::function<Result<T>(State&)> fn);
  Store* store_;
  ControllerOptions options_;
  TokenRegistry tokens_;
  std::unique_ptr<State> state_;
};

// The metric label of a pending job's wait category (docs/metrics.md): quota, priority (order and
// reservation), preempting, mig_reconfiguring, topology, capacity or other. (The controller adds
// backoff and new for pending jobs that have no reason from a cycle.)
const char* pending_metric_category(WaitCategory c);

}  // namespace tessera::server
