// Chargeback and usage accounting (issue 7, docs/chargeback.md): a pure function of the event log, the
// jobs, the cluster configuration and a period [from, to). No I/O, no threads, no floating point in
// quantities or money: GPU time is integer milli-GPU-seconds (ms), money integer micro-units of the
// currency. Every value type here is plain data; the functions are thread-safe.
//
// Definitions (per node, per second of the effective period):
//   capacity  = GPUs × 1000 milli
//   allocated = the milli-GPUs held by running attempts (a whole GPU 1000, a share its milli, a MIG
//               instance core mig_milli(model, profile): 3g on a 7-slice GPU = 3000/7 -> 428)
//   unallocated = capacity - allocated, classed as down (node NotReady), reserved (cordoned,
//               draining, drained) or idle (ready and schedulable)
// so capacity == allocated + idle + reserved + down exactly. The idle-share pool of a (model, pool) is
// idle + reserved; with a rule other than none it is shared out completely, so that
//   sum over accounts of (allocated + idle_share) == capacity - down        (exactly, in ms).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "core/status.h"
#include "server/store.h"

namespace tessera::server::accounting {

// Report dimensions (the `by` parameter).
enum class Dim : uint8_t { kTeam, kQueue, kProject, kUser, kModel, kPool };
const char* dim_name(Dim d);
// "team,project,model" -> dims; errors name `by` and list the dimensions. Duplicates are refused.
Result<std::vector<Dim>> parse_dims(const std::string& text);
std::vector<Dim> default_dims();  // team, project, model, pool

// Who a job belongs to (from JobRow.record).
struct JobInfo {
  std::string queue;    // leaf queue
  std::string user;
  std::string project;  // spec.project ("" when none)
};
// JobRow -> JobInfo (record JSON: queue, user, spec.project).
Result<JobInfo> job_info_from_row(const JobRow& row);

// The finest accounting key; every report row aggregates cells.
struct Cell {
  std::string team, queue, project, user, model, pool;
  auto operator<=>(const Cell&) const = default;
};

struct Amounts {
  int64_t allocated = 0;   // ms, clipped to the period
  int64_t measured = 0;    // the part of allocated whose attempt reported utilisation
  int64_t used = 0;        // measured × utilisation (rounded half-even per attempt)
  int64_t preempted = 0;   // allocated time of attempts that ended "preempted"
  int64_t lost = 0;        // allocated time of attempts that ended "lost"
  // allocated time of attempts ended ("preempted" or "lost") after a spot_interrupted event for the
  // job: part of preempted + lost, not in addition to it
  int64_t interrupted = 0;
  int64_t interruptions = 0;    // spot_interrupted events behind `interrupted` (a count, not ms)
  int64_t idle_share = 0;  // share of the unallocated (idle + reserved) pool
  int64_t allocated_cost = 0;   // micro-units: allocated × rate, rounded half-even per cell
  int64_t idle_share_cost = 0;  // micro-units: idle_share × rate, rounded half-even per cell
  int64_t interrupted_cost = 0; // micro-units: interrupted × rate (part of allocated_cost, not added to cost())
  int64_t cost() const { return allocated_cost + idle_share_cost; }
  Amounts& operator+=(const Amounts& o);
};

struct ModelUsage {            // one (GPU model, pool) of the cluster over the period, in ms
  std::string model, pool;
  int64_t gpus = 0;
  int64_t capacity = 0, allocated = 0, idle = 0, reserved = 0, down = 0;
  int64_t interrupted = 0, interrupted_cost = 0, interruptions = 0;  // sums of the cells' (Amounts)
};

struct Request {
  int64_t from = 0, to = 0;    // [from, to), unix seconds UTC
  int64_t now = 0;             // running attempts are counted until min(now, to); 0 = until `to`
};

// Everything computed at the finest granularity. The effective period is [from, to) clipped to
// [first event, now): nothing is charged before the cluster's log began or after now.
struct Ledger {
  int64_t from = 0, to = 0;                   // as requested
  int64_t start = 0, end = 0;                 // effective (start <= end)
  std::string currency;
  config::IdleShare rule = config::IdleShare::kProportional;
  std::map<Cell, Amounts> cells;              // accounts with any allocation, idle share or interruption
  std::vector<ModelUsage> usage;              // by (model, pool)
  std::map<std::string, int64_t> rates_micro; // model -> micro per GPU-hour (configured ones)
  // pool -> micro per GPU-hour for pools with a price: their hours are charged at it, not the model rate
  std::map<std::string, int64_t> pool_rates_micro;
};

// The inputs: events in seq order (all of them from the start of the log: attempts that began before
// `from` count from `from`), the jobs by id, and the configuration (nodes, queues, catalog, rates).
Result<Ledger> compute_ledger(const std::vector<EventRow>& events, const std::map<int64_t, JobInfo>& jobs,
                              const config::ClusterConfig& config, const Request& request);

// Which cells a principal may see: admin and viewer all; team-lead the cells of their queue
// subtree; member their own user's cells.
using CellFilter = std::function<bool(const Cell&)>;

// Report rows: the ledger's cells aggregated by `by`, filtered, in key order (the key is the tuple
// of the `by` values in `by` order: a total order). Totals are sums over the rows.
struct Row {
  std::vector<std::string> key;  // values of `by`, in order
  Amounts amounts;
};
struct Report {
  std::vector<Dim> by;
  std::vector<Row> rows;
  Amounts totals;
};
Report aggregate(const Ledger& ledger, const std::vector<Dim>& by, const CellFilter& visible = nullptr);

// ---- Output ----
// Integer helpers (exposed for tests): half-even rounding of num/den (den > 0), ms -> "12.345678"
// GPU-hours (6 decimals, half-even), micro-units -> "1.234567".
int64_t div_round_half_even(__int128 num, int64_t den);
std::string format_gpu_hours(int64_t milli_gpu_seconds);
std::string format_micro(int64_t micro);
std::string format_pct(int64_t part, int64_t whole);  // "12.34" (half-even), "0.00" when whole is 0
// Dates: "2026-11-01" or "2026-11-01T12:00:00Z" (UTC) -> unix seconds; errors name `field`.
Result<int64_t> parse_utc_time(const std::string& text, const std::string& field);
std::string format_utc(int64_t t);      // "2026-11-01T00:00:00Z"
int64_t month_start_utc(int64_t t);     // 00:00 UTC on the first day of t's month

// The CSV columns (FinOps FOCUS names where they fit, x_ for Tessera's own) and one row's values.
const std::vector<std::string>& chargeback_columns();
std::string chargeback_csv(const Ledger& ledger, const Report& report);
nlohmann::json chargeback_json(const Ledger& ledger, const Report& report);
// The usage report (sreport-like): per (model, pool) plus a total line.
std::string usage_csv(const Ledger& ledger);
nlohmann::json usage_json(const Ledger& ledger);
// RFC 4180 quoting: quoted when the field holds a comma, quote, CR or LF.
std::string csv_field(const std::string& s);

}  // namespace tessera::server::accounting
