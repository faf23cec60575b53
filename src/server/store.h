// The controller's durable store, behind one interface with two implementations: the embedded SQLite
// default (open_sqlite_store) and PostgreSQL (open_postgres_store), chosen by `--data` (StoreLocation). What is stored: jobs (one row per job: indexed columns plus the full record
// as JSON), the append-only event log (every job state change, audit entries; times in seconds and
// milliseconds), API tokens (hashed), and small metadata values (next job id, ...).
// Writes are batched: write() queues a batch; batches commit in the order they were queued, several
// per transaction (group commit), and `done` runs on the store's writer thread once the batch is
// durable (or failed). Thread-safe: write() may be called from any thread; load() and backup() too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::server {

struct JobRow {
  int64_t id = 0;
  std::string state;       // "pending", "running", ... (job_state_name)
  std::string queue;       // leaf queue name
  std::string user;
  int64_t submitted = 0;   // unix seconds
  std::string record;      // the controller's full job record, JSON
  // When set (and `record` empty), the store makes `record` by calling it on its writer thread, so
  // that encoding is off the caller's thread. It owns what it reads, is pure and may be called more
  // than once (a group that fails is retried batch by batch).
  std::function<std::string()> encode = nullptr;
};

struct EventRow {
  // Assigned by the store on commit (the last seq + 1) when 0 on write; a copy (copy_store) writes
  // the source's seq, which must be above every seq already stored.
  int64_t seq = 0;
  int64_t job_id = 0;      // 0 = not about one job (node changes, audit of denied calls)
  int64_t time = 0;        // unix seconds
  std::string kind;        // "submitted", "started", "checkpoint_requested", "preempted", "denied", ...
  std::string actor;       // user name, "scheduler", "agent:NODE", "admin"
  std::string detail;      // JSON object
  // The same moment in unix milliseconds (time_ms / 1000 == time). On write, -1 stores time * 1000;
  // reads always give it (rows stored before schema version 3 read as time * 1000).
  int64_t time_ms = -1;
};

struct TokenRow {
  std::string hash;        // hex SHA-256 of the token; the token itself is never stored
  std::string user;
  std::string role;        // "admin", "team-lead", "member", "viewer", "agent"
  std::string queue;       // team-lead/member: the queue subtree they act in ("" = none)
  int64_t created = 0;
  bool revoked = false;
  std::string node;        // agent: the node name or fnmatch pattern it may report for ("" = any, older tokens)
};

// One atomic unit: everything in it commits together or not at all.
struct WriteBatch {
  std::vector<JobRow> jobs;       // insert or replace by id
  std::vector<EventRow> events;   // appended
  std::vector<TokenRow> tokens;   // insert or replace by hash
  std::vector<std::pair<std::string, std::string>> meta;  // insert or replace by key
  bool empty() const { return jobs.empty() && events.empty() && tokens.empty() && meta.empty(); }
};

struct LoadedState {
  std::vector<JobRow> jobs;       // by id ascending
  std::vector<TokenRow> tokens;   // by hash ascending
  std::vector<std::pair<std::string, std::string>> meta;  // by key ascending
  int64_t last_event_seq = 0;
};

struct StoreStats {
  int64_t batches = 0;       // batches committed
  int64_t transactions = 0;  // transactions (each holds one or more batches)
};

// What a copy reads of a store: everything but events, and the events page by page.
class StoreReader {
 public:
  virtual ~StoreReader() = default;
  // Everything but events (they are read per job or by range).
  virtual Result<LoadedState> load() = 0;
  // Events with seq > after_seq, in seq order, at most `limit`.
  virtual Result<std::vector<EventRow>> events_after(int64_t after_seq, int64_t limit) = 0;
};

class Store : public StoreReader {
 public:
  // Queues `batch`; `done` (may be empty) runs once it is durable or has failed. Batches commit in
  // the order write() was called.
  virtual void write(WriteBatch batch, std::function<void(Status)> done) = 0;
  // write() and wait.
  Status write_sync(WriteBatch batch);
  // Blocks until every batch queued before the call has committed (or failed).
  virtual void flush() = 0;
  // Events of one job in seq order; job_id 0 gives the events not about a job.
  virtual Result<std::vector<EventRow>> events_for_job(int64_t job_id) = 0;
  // An online, consistent copy of the whole store to `path` (which must not exist, created 0600),
  // taken while writes go on, as a SQLite store file (`tessera admin restore` installs it). The copy
  // is itself a valid store: a store (or copy) that fails the check is refused and nothing is left
  // at `path`.
  virtual Status backup(const std::string& path) = 0;
  virtual StoreStats stats() const = 0;
};

// How much of an existing store open_sqlite_store checks before using it.
enum class StoreCheck {
  kQuick,  // PRAGMA quick_check: every page's structure (reads the whole file, skips index contents)
  kFull,   // PRAGMA integrity_check: also that every index matches its table
};

struct SqliteOpenOptions {
  StoreCheck check = StoreCheck::kQuick;
  // Warnings (a missing -wal after an unclean stop, modes tightened); empty: logged with spdlog.
  std::function<void(const std::string&)> warn;
};

// The embedded default: a SQLite database DIR/tessera.db in WAL mode, synchronous=FULL (a batch's
// `done` runs only after fsync), created and migrated to the current schema on open. DIR is made
// 0700 and the database files 0600. An existing store is checked first (options.check) and refused
// if damaged, or if it holds fewer commits than DIR/tessera.db-state recorded as acknowledged (a
// lost or truncated -wal); the message names the recovery (`tessera admin restore`). Errors name
// the file and the cause (not writable, newer schema than this binary knows, not a Tessera database).
// It does not lock DIR (the server does: data_dir.h).
Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& dir, const SqliteOpenOptions& options = {});

// Restore (server stopped): checks that `backup_file` is a Tessera store whose schema this binary
// can read and that passes the integrity check, then installs it as DIR/tessera.db. Holds DIR's lock
// while it works (refused while a server holds it). Refuses if DIR already has a store unless `force`.
Status restore_sqlite_store(const std::string& backup_file, const std::string& dir, bool force);

// The schema version this binary writes (migrations bring older stores up to it on open).
int sqlite_schema_version();

// PostgreSQL: the database named by `dsn` (libpq's URI or key=value form; a password in it is
// refused: PGPASSWORD or a password file instead). An empty database becomes a store; an existing
// one is checked (a Tessera store this binary can read) and migrated to the current schema under an
// advisory lock. Every batch is acknowledged after COMMIT (synchronous_commit). A lost connection
// fails writes and reads with kUnavailable until PostgreSQL answers again (each call reconnects).
struct PostgresOpenOptions {
  // Fencing (leader_lease.h). When set, each write transaction first checks, under a share lock on the
  // lease row, that the lease still has this epoch and has not expired; otherwise it writes nothing
  // and fails with kUnavailable. A new leader's epoch bump waits for that lock, so every write a
  // deposed leader commits comes before the new leader's first.
  std::function<int64_t()> epoch;
  // Called (on the writer thread) when a write was refused because another controller leads now.
  std::function<void(const std::string& why)> on_fenced;
};
Result<std::unique_ptr<Store>> open_postgres_store(const std::string& dsn, const PostgresOpenOptions& options = {});
int postgres_schema_version();

// Where a store lives, parsed from `--data`: "sqlite:DIR" or a plain DIR (the embedded default), or a
// PostgreSQL DSN "postgres://..." / "postgresql://..." (also "postgres:" followed by key=value pairs).
struct StoreLocation {
  enum class Kind { kSqlite, kPostgres } kind = Kind::kSqlite;
  std::string dir;  // kSqlite
  std::string dsn;  // kPostgres
  std::string describe() const;  // for logs and messages: the directory, or the DSN (it holds no password)
};
Result<StoreLocation> parse_store_location(const std::string& spec);
Result<std::unique_ptr<Store>> open_store(const StoreLocation& where, const SqliteOpenOptions& sqlite_options = {},
                                          const PostgresOpenOptions& postgres_options = {});

// Copies everything `from` holds into `to`, which must be empty: jobs, tokens and meta, then the
// events in seq order with their seq kept. Then reads `to` back and compares the row counts and a
// SHA-256 over every row of both; any difference is an error naming it. `progress` (may be empty)
// hears a line per step.
struct CopyReport {
  int64_t jobs = 0, events = 0, tokens = 0, meta = 0;
  std::string checksum;  // hex SHA-256 over every row copied (the same on both sides)
};
Result<CopyReport> copy_store(StoreReader& from, Store& to, const std::function<void(const std::string&)>& progress = {});

}  // namespace tessera::server
