// The embedded SQLite store (see store.h): DIR/tessera.db in WAL mode with synchronous=FULL.
// Ownership: SqliteStore owns two connections. The write connection (and its prepared statements)
// belongs to the writer thread once the constructor has started it; the read connection is shared by
// load()/events_*() under read_mu_. backup() opens its own short-lived read connection.
// Thread-safety: every public method may be called from any thread. write() only queues (WriteQueue,
// write_queue.h); the writer thread commits all queued batches (up to kMaxGroupBatches) in one transaction (group commit) and
// runs their `done` callbacks after COMMIT has returned (i.e. after fsync). A `done` runs on the
// writer thread: it may call write() but must not wait on the store (write_sync, flush), nor throw.
// Invariants: batches commit in write() order; the schema and its checks are sqlite_db.h's; every transaction
// bumps meta "store/commits" (hidden from load()), and DIR/tessera.db-state (commit_record.h)
// records the count as of the last commit, so that a store missing acknowledged commits is refused.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string_view>

#include <spdlog/spdlog.h>

#include "server/commit_record.h"
#include "server/data_dir.h"
#include "server/sqlite_db.h"
#include "server/store.h"
#include "server/write_queue.h"

namespace tessera::server {
namespace {

using namespace sqlite;  // NOLINT: the plumbing shared with sqlite_db.cc

// Upper bound on the batches one group-commit transaction takes from the queue.
constexpr size_t kMaxGroupBatches = 4096;

std::string column_text(sqlite3_stmt* stmt, int col) {
  const unsigned char* text = sqlite3_column_text(stmt, col);
  int n = sqlite3_column_bytes(stmt, col);
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(n)) : std::string();
}

void bind_text(sqlite3_stmt* stmt, int col, const std::string& s) {
  // SQLITE_STATIC: the batch outlives the statement's use of it (reset before the batch is released).
  sqlite3_bind_text(stmt, col, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

EventRow read_event(sqlite3_stmt* stmt) {
  EventRow e;
  e.seq = sqlite3_column_int64(stmt, 0);
  e.job_id = sqlite3_column_int64(stmt, 1);
  e.time = sqlite3_column_int64(stmt, 2);
  e.kind = column_text(stmt, 3);
  e.actor = column_text(stmt, 4);
  e.detail = column_text(stmt, 5);
  e.time_ms = sqlite3_column_int64(stmt, 6);
  return e;
}

class SqliteStore final : public Store {
 public:
  struct WriteStatements {
    StmtPtr upsert_job, append_event, upsert_token, upsert_meta, bump_commits;
  };
  struct ReadStatements {
    StmtPtr jobs, tokens, meta, last_seq, events_for_job, events_after;
  };

  SqliteStore(Conn writer, WriteStatements ws, CommitRecord record, int64_t commits, Conn reader, ReadStatements rs)
      : writer_(std::move(writer)),
        ws_(std::move(ws)),
        record_(std::move(record)),
        commits_(commits),
        reader_(std::move(reader)),
        rs_(std::move(rs)) {}

  ~SqliteStore() override {
    queue_.stop();
    // Statements before their connections; the last connection to close checkpoints the -wal into
    // tessera.db and removes it. Only then is the store closed cleanly.
    ws_ = {};
    rs_ = {};
    reader_.db.reset();
    writer_.db.reset();
    record_.update({false, commits_}, true);
  }

  void write(WriteBatch batch, std::function<void(Status)> done) override { queue_.write(std::move(batch), std::move(done)); }
  void flush() override { queue_.flush(); }

  Result<LoadedState> load() override {
    std::lock_guard lock(read_mu_);
    // One read transaction: the four queries see one snapshot.
    if (Status s = reader_.exec("BEGIN", "cannot start read transaction"); !s.ok()) return s.error();
    auto state = load_locked();
    reader_.rollback_if_open();
    return state;
  }

  Result<std::vector<EventRow>> events_for_job(int64_t job_id) override {
    std::lock_guard lock(read_mu_);
    sqlite3_stmt* stmt = rs_.events_for_job.get();
    sqlite3_bind_int64(stmt, 1, job_id);
    return read_events(stmt, "cannot read events of job " + std::to_string(job_id));
  }

  Result<std::vector<EventRow>> events_after(int64_t after_seq, int64_t limit) override {
    if (limit <= 0) return invalid_argument("events_after: limit must be positive, got " + std::to_string(limit));
    std::lock_guard lock(read_mu_);
    sqlite3_stmt* stmt = rs_.events_after.get();
    sqlite3_bind_int64(stmt, 1, after_seq);
    sqlite3_bind_int64(stmt, 2, limit);
    return read_events(stmt, "cannot read events after seq " + std::to_string(after_seq));
  }

  Status backup(const std::string& path) override {
    // O_EXCL: refuse an existing file without a check-then-create race.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) return failed_precondition(path + " already exists; backup writes a new file only");
      return internal_error(path + ": cannot create backup file: " + std::strerror(errno));
    }
    ::close(fd);
    Status s = [&]() -> Status {
      auto src = open_conn(writer_.path, SQLITE_OPEN_READONLY);
      if (!src) return src.error();
      // A damaged store must not become a backup that looks good: check it, and the copy.
      auto problems = integrity_problems(*src, StoreCheck::kQuick);
      if (!problems) return problems.error();
      if (!problems->empty()) return backup_refused(*problems);
      if (Status c = copy_database(*src, path); !c.ok()) return c;
      auto copy = open_conn(path, SQLITE_OPEN_READONLY);
      if (!copy) return copy.error();
      problems = integrity_problems(*copy, StoreCheck::kQuick);
      if (!problems) return problems.error();
      if (!problems->empty()) return backup_refused(*problems);
      return {};
    }();
    if (!s.ok()) ::unlink(path.c_str());
    return s;
  }

  StoreStats stats() const override {
    return {batches_.load(std::memory_order_relaxed), transactions_.load(std::memory_order_relaxed)};
  }

 private:
  using Pending = WriteQueue::Pending;

  Error backup_refused(const std::string& problems) const {
    std::string dir = parent_dir(writer_.path);
    return failed_precondition("no backup taken: " + writer_.path + " fails " + check_name(StoreCheck::kQuick) + " (" +
                               problems + "), and a copy of it would not restore. The store needs recovery: " +
                               restore_advice(dir));
  }

  static void report(Pending& p, const Status& s) {
    if (p.done) p.done(s);
  }

  // Commits `group` in one transaction; if that fails, each batch alone, so that only the bad batch
  // fails. Runs every `done` after its batch's COMMIT (or failure).
  void commit_group(std::vector<Pending>& group) {
    Status s = run_transaction(group.data(), group.size());
    if (s.ok() || group.size() == 1) {
      for (Pending& p : group) report(p, s);
      return;
    }
    for (Pending& p : group) report(p, run_transaction(&p, 1));
  }

  Status run_transaction(Pending* batches, size_t n) {
    if (Status s = writer_.exec("BEGIN IMMEDIATE", "cannot start write transaction"); !s.ok()) return s;
    for (size_t i = 0; i < n; ++i) {
      if (Status s = apply(batches[i].batch); !s.ok()) {
        writer_.rollback_if_open();
        return s;
      }
    }
    auto commits = bump_commits();
    if (!commits) {
      writer_.rollback_if_open();
      return commits.error();
    }
    if (Status s = writer_.exec("COMMIT", "commit failed"); !s.ok()) {
      writer_.rollback_if_open();
      return s;
    }
    // After COMMIT (durable), never before: the record must not count what may not be there.
    commits_ = *commits;
    record_.update({true, commits_}, false);
    transactions_.fetch_add(1, std::memory_order_relaxed);
    batches_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    return {};
  }

  // Runs `stmt` (bound) to completion and resets it.
  Status step(sqlite3_stmt* stmt, const std::string& what) {
    int rc = sqlite3_step(stmt);
    Status s;
    if (rc != SQLITE_DONE) s = writer_.error("write failed (" + what + ")");
    sqlite3_reset(stmt);
    return s;
  }

  // Counts this transaction in meta "store/commits"; returns the new count.
  Result<int64_t> bump_commits() {
    sqlite3_stmt* st = ws_.bump_commits.get();
    int rc = sqlite3_step(st);
    int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    while (rc == SQLITE_ROW) rc = sqlite3_step(st);
    Result<int64_t> out = value;
    if (rc != SQLITE_DONE || value <= 0) out = writer_.error("write failed (the commit count)");
    sqlite3_reset(st);
    return out;
  }

  Status apply(const WriteBatch& batch) {
    for (const JobRow& j : batch.jobs) {
      const bool deferred = j.record.empty() && j.encode;
      std::string encoded;  // outlives the statement's use of it (SQLITE_STATIC)
      if (deferred) {
        try {
          encoded = j.encode();
        } catch (const std::exception& e) {
          return internal_error("job " + std::to_string(j.id) + ": cannot encode its record (" + e.what() + ")");
        }
      }
      sqlite3_stmt* st = ws_.upsert_job.get();
      sqlite3_bind_int64(st, 1, j.id);
      bind_text(st, 2, j.state);
      bind_text(st, 3, j.queue);
      bind_text(st, 4, j.user);
      sqlite3_bind_int64(st, 5, j.submitted);
      bind_text(st, 6, deferred ? encoded : j.record);
      if (Status s = step(st, "job " + std::to_string(j.id)); !s.ok()) return s;
    }
    for (const EventRow& e : batch.events) {
      sqlite3_stmt* st = ws_.append_event.get();
      sqlite3_bind_int64(st, 1, e.job_id);
      sqlite3_bind_int64(st, 2, e.time);
      bind_text(st, 3, e.kind);
      bind_text(st, 4, e.actor);
      bind_text(st, 5, e.detail);
      sqlite3_bind_int64(st, 6, e.time_ms >= 0 ? e.time_ms : e.time * 1000);
      if (e.seq > 0) sqlite3_bind_int64(st, 7, e.seq);  // a copy's; else NULL: the next seq
      else sqlite3_bind_null(st, 7);
      if (Status s = step(st, "event " + e.kind + " of job " + std::to_string(e.job_id)); !s.ok()) return s;
    }
    for (const TokenRow& t : batch.tokens) {
      sqlite3_stmt* st = ws_.upsert_token.get();
      bind_text(st, 1, t.hash);
      bind_text(st, 2, t.user);
      bind_text(st, 3, t.role);
      bind_text(st, 4, t.queue);
      sqlite3_bind_int64(st, 5, t.created);
      sqlite3_bind_int(st, 6, t.revoked ? 1 : 0);
      bind_text(st, 7, t.node);
      if (Status s = step(st, "token of user " + t.user); !s.ok()) return s;
    }
    for (const auto& [key, value] : batch.meta) {
      sqlite3_stmt* st = ws_.upsert_meta.get();
      bind_text(st, 1, key);
      bind_text(st, 2, value);
      if (Status s = step(st, "meta " + key); !s.ok()) return s;
    }
    return {};
  }

  // Steps `stmt` through all rows; `row` reads one. Resets the statement. Caller holds read_mu_.
  template <class Fn>
  Status for_each_row(sqlite3_stmt* stmt, const std::string& what, Fn&& row) {
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) row(stmt);
    Status s;
    if (rc != SQLITE_DONE) s = reader_.error(what);
    sqlite3_reset(stmt);
    return s;
  }

  Result<std::vector<EventRow>> read_events(sqlite3_stmt* stmt, const std::string& what) {
    std::vector<EventRow> events;
    Status s = for_each_row(stmt, what, [&](sqlite3_stmt* st) { events.push_back(read_event(st)); });
    if (!s.ok()) return s.error();
    return events;
  }

  Result<LoadedState> load_locked() {
    LoadedState state;
    Status s = for_each_row(rs_.jobs.get(), "cannot read jobs", [&](sqlite3_stmt* st) {
      state.jobs.push_back({sqlite3_column_int64(st, 0), column_text(st, 1), column_text(st, 2),
                            column_text(st, 3), sqlite3_column_int64(st, 4), column_text(st, 5)});
    });
    if (!s.ok()) return s.error();
    s = for_each_row(rs_.tokens.get(), "cannot read tokens", [&](sqlite3_stmt* st) {
      state.tokens.push_back({column_text(st, 0), column_text(st, 1), column_text(st, 2), column_text(st, 3),
                              sqlite3_column_int64(st, 4), sqlite3_column_int(st, 5) != 0, column_text(st, 6)});
    });
    if (!s.ok()) return s.error();
    s = for_each_row(rs_.meta.get(), "cannot read meta", [&](sqlite3_stmt* st) {
      state.meta.emplace_back(column_text(st, 0), column_text(st, 1));
    });
    if (!s.ok()) return s.error();
    s = for_each_row(rs_.last_seq.get(), "cannot read the last event seq",
                     [&](sqlite3_stmt* st) { state.last_event_seq = sqlite3_column_int64(st, 0); });
    if (!s.ok()) return s.error();
    return state;
  }

  // Writer side: used by the writer thread only (and by the constructor before it starts).
  Conn writer_;
  WriteStatements ws_;
  CommitRecord record_;
  int64_t commits_ = 0;  // meta "store/commits" as of the last commit
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> transactions_{0};

  // Reader side.
  std::mutex read_mu_;
  Conn reader_;
  ReadStatements rs_;

  // Last: its writer thread starts once everything it commits with exists.
  WriteQueue queue_{kMaxGroupBatches, [this](std::vector<Pending>& group) { commit_group(group); }};
};

Result<SqliteStore::WriteStatements> prepare_writes(const Conn& conn) {
  SqliteStore::WriteStatements ws;
  std::pair<StmtPtr*, const char*> specs[] = {
      {&ws.upsert_job,
       "INSERT OR REPLACE INTO jobs (id, state, queue, user, submitted, record) VALUES (?, ?, ?, ?, ?, ?)"},
      {&ws.append_event,
       "INSERT INTO events (job_id, time, kind, actor, detail, time_ms, seq) VALUES (?, ?, ?, ?, ?, ?, ?)"},
      {&ws.upsert_token,
       "INSERT OR REPLACE INTO tokens (hash, user, role, queue, created, revoked, node) VALUES (?, ?, ?, ?, ?, ?, ?)"},
      {&ws.upsert_meta, "INSERT OR REPLACE INTO meta (\"key\", \"value\") VALUES (?, ?)"},
      {&ws.bump_commits,
       "INSERT INTO meta (\"key\", \"value\") VALUES ('store/commits', '1') ON CONFLICT (\"key\") DO UPDATE "
       "SET \"value\" = CAST(\"value\" AS INTEGER) + 1 RETURNING CAST(\"value\" AS INTEGER)"},
  };
  for (auto& [stmt, sql] : specs) {
    auto prepared = conn.prepare(sql);
    if (!prepared) return prepared.error();
    *stmt = std::move(*prepared);
  }
  return ws;
}

Result<SqliteStore::ReadStatements> prepare_reads(const Conn& conn) {
  SqliteStore::ReadStatements rs;
  std::pair<StmtPtr*, const char*> specs[] = {
      {&rs.jobs, "SELECT id, state, queue, user, submitted, record FROM jobs ORDER BY id"},
      {&rs.tokens, "SELECT hash, user, role, queue, created, revoked, node FROM tokens ORDER BY hash"},
      {&rs.meta, "SELECT \"key\", \"value\" FROM meta WHERE \"key\" <> 'store/commits' ORDER BY \"key\""},
      {&rs.last_seq, "SELECT coalesce(max(seq), 0) FROM events"},
      // time_ms is NULL in rows stored before schema version 3: those read as their second.
      {&rs.events_for_job,
       "SELECT seq, job_id, time, kind, actor, detail, coalesce(time_ms, time * 1000) FROM events WHERE job_id = ? "
       "ORDER BY seq"},
      {&rs.events_after,
       "SELECT seq, job_id, time, kind, actor, detail, coalesce(time_ms, time * 1000) FROM events WHERE seq > ? "
       "ORDER BY seq LIMIT ?"},
  };
  for (auto& [stmt, sql] : specs) {
    auto prepared = conn.prepare(sql);
    if (!prepared) return prepared.error();
    *stmt = std::move(*prepared);
  }
  return rs;
}

}  // namespace
namespace {

// What an existing store's files said before SQLite opened them (opening creates an empty -wal).
struct PriorFiles {
  bool db = false;                          // tessera.db existed and was not empty
  bool wal = false;                         // tessera.db-wal existed
  bool wal_lost = false;                    // WAL mode, no -wal, and the last run did not close cleanly
  std::optional<CommitRecordState> record;  // DIR/tessera.db-state
};

PriorFiles inspect_files(const std::string& path, const std::string& state_path, const WarnFn& warn) {
  PriorFiles prior;
  struct stat st {};
  prior.db = ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
  std::string unreadable;
  prior.record = CommitRecord::read(state_path, &unreadable);
  if (!unreadable.empty()) warn(unreadable + "; this start cannot tell whether acknowledged commits are missing");
  prior.wal = ::access((path + "-wal").c_str(), F_OK) == 0;
  prior.wal_lost = prior.db && !prior.wal && header_says_wal(path) && prior.record && prior.record->open;
  return prior;
}

// The refusal of a store holding fewer commits than were acknowledged.
Error lost_commits(const std::string& path, const std::string& dir, const std::string& state_path, int64_t has,
                   int64_t acknowledged, const PriorFiles& prior) {
  const std::string wal = path + "-wal (the write-ahead log)";
  std::string cause = prior.wal        ? wal + " was truncated or damaged, or tessera.db was replaced by an older copy"
                      : prior.wal_lost ? wal + " is missing after a run that did not stop cleanly"
                                       : "tessera.db was replaced by an older copy, or lost writes";
  return failed_precondition(
      path + " is missing acknowledged commits and will not be used: it holds " + std::to_string(has) +
      " committed transactions, but " + std::to_string(acknowledged) + " were acknowledged (" + state_path +
      "), so the last " + std::to_string(acknowledged - has) + " are lost; " + cause + ". To recover, " +
      restore_advice(dir) + "; or, to start with what is left and lose those commits, remove " + state_path);
}

}  // namespace

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& dir, const SqliteOpenOptions& options) {
  const WarnFn warn = options.warn ? options.warn : WarnFn([](const std::string& msg) {
    spdlog::warn("event=store_warning detail=\"{}\"", msg);
  });
  if (Status s = ensure_private_dir(dir, warn); !s.ok()) return s.error();
  const std::string path = (std::filesystem::path(dir) / kDbFileName).string();
  const std::string state_path = (std::filesystem::path(dir) / kStateFileName).string();
  const PriorFiles prior = inspect_files(path, state_path, warn);
  const std::string wal_note =
      prior.wal_lost ? "; " + path + "-wal is missing after a run that did not stop cleanly" : std::string();

  // Created 0600 before SQLite opens it: SQLite gives -wal and -shm the database file's mode.
  if (!prior.db) {
    auto fd = create_private_file(path, O_RDWR);
    if (!fd) return fd.error();
    ::close(*fd);
  }
  for (const std::string& f : {path, path + "-wal", path + "-shm", state_path}) {
    if (Status s = make_file_private(f, warn); !s.ok()) return s.error();
  }

  auto writer = open_conn(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!writer) return writer.error();
  auto version = check_tessera(*writer);
  if (!version) {
    // Not a SQLite file at all (SQLITE_NOTADB) is check_tessera's message; a damaged schema is ours.
    if (writer->errcode() == SQLITE_CORRUPT) {
      return damaged_store(path, dir, options.check, version.error().message, wal_note);
    }
    return version.error();
  }
  int64_t commits = 0;
  if (*version > 0) {
    auto problems = integrity_problems(*writer, options.check);
    if (!problems) return problems.error();
    if (!problems->empty()) return damaged_store(path, dir, options.check, *problems, wal_note);
    auto count = writer->query_int("SELECT CAST(\"value\" AS INTEGER) FROM meta WHERE \"key\" = 'store/commits'");
    if (!count) return count.error();
    commits = *count;
  }
  // Acknowledged commits are all there, or the store is refused (before anything writes to it).
  if (prior.record && commits < prior.record->commits) {
    return lost_commits(path, dir, state_path, commits, prior.record->commits, prior);
  }
  auto mode = writer->query_text("PRAGMA journal_mode = WAL");
  if (!mode) return mode.error();
  if (*mode != "wal") return internal_error(path + ": cannot switch to WAL mode (journal_mode is " + *mode + ")");
  if (Status s = writer->exec("PRAGMA synchronous = FULL; PRAGMA foreign_keys = OFF", "cannot set pragmas");
      !s.ok()) {
    return s.error();
  }
  if (Status s = migrate(*writer); !s.ok()) return s.error();

  if (prior.wal_lost) {
    warn(path + "-wal is missing after a run that did not stop cleanly (it was removed, or another program "
         "checkpointed it); the store holds all " + std::to_string(commits) + " acknowledged commits, so none is lost");
  } else if (prior.record && prior.record->open) {
    spdlog::info("event=store_recovered path={} commits={} (the last run did not stop cleanly)", path, commits);
  }
  auto record = CommitRecord::create(state_path, {true, commits});
  if (!record) return record.error();
  auto writes = prepare_writes(*writer);
  if (!writes) return writes.error();

  auto reader = open_conn(path, SQLITE_OPEN_READWRITE);
  if (!reader) return reader.error();
  if (Status s = reader->exec("PRAGMA query_only = ON", "cannot set pragmas"); !s.ok()) return s.error();
  auto reads = prepare_reads(*reader);
  if (!reads) return reads.error();
  for (const std::string& f : {path + "-wal", path + "-shm"}) {
    if (Status s = make_file_private(f, warn); !s.ok()) return s.error();
  }

  return std::unique_ptr<Store>(std::make_unique<SqliteStore>(std::move(*writer), std::move(*writes), std::move(*record),
                                                              commits, std::move(*reader), std::move(*reads)));
}

}  // namespace tessera::server
